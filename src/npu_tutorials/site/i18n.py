"""The site in Simplified Chinese as well as English, from one build: Sphinx's gettext flow, as
vllm-ascend's docs use it.

* ``make intl``: the gettext builder extracts every page's text, leaving out what a build measures
  (:func:`static_text`), and sphinx-intl updates ``docs/source/locale/zh_CN/LC_MESSAGES/**/*.po``;
  a translator fills each ``msgstr`` (an English text that changed comes back ``fuzzy``);
* ``make html`` builds the English site, then the Chinese one into ``_build/html/zh_CN`` from the same
  executed pages (:func:`translation_pass`: nothing executes, nothing is invalidated);
* every page links to its counterpart (``docs/source/_templates/lang-switch.html``);
* ``make check`` fails on an untranslated or fuzzy message (:mod:`npu_tutorials.checks.translations`).

What the code writes (tables, verdicts, banners, the landing matrices, plot labels) comes from the message
catalog of :mod:`npu_tutorials.core.messages`: each language's pass renders a page's views from its results
document in that language (:mod:`npu_tutorials.site.render`).
"""

from __future__ import annotations

import os
import re

from ..core.messages import LANGS
from ..engine.deploy import COMMENTS
from ..core.messages import _, language

TIMING = re.compile(r"^[ \t]*\*\*Total running time of the script:\*\*.*$", re.M)


def page_lang(app) -> str:
    """The language of this Sphinx pass (``-D language=zh_CN``: the Chinese one): one of
    :data:`~npu_tutorials.core.messages.LANGS`, the first for anything else (and without an app)."""
    lang = getattr(getattr(app, "config", None), "language", None) or LANGS[0]
    return lang if lang in LANGS else LANGS[0]


def translation_pass() -> bool:
    """This Sphinx run builds the second language from the first one's pages (``TUTORIAL_TRANSLATION_PASS``):
    it executes no tutorial, invalidates none, and writes no plan."""
    return os.environ.get("TUTORIAL_TRANSLATION_PASS", "") not in ("", "0")


def extracting(app) -> bool:
    """The gettext builder is extracting messages (``make intl``, the translation check)."""
    return app is not None and getattr(app, "builder", None) is not None and app.builder.name == "gettext"


def static_text(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``, gettext builder only: leave out of the catalogs what differs from build to
    build (a tutorial's running time, the execution-time tables), so a message is translated once."""
    if not extracting(app):
        return
    if docname.endswith("sg_execution_times"):  # sphinx-gallery's table of this build's times: its title only
        head, sep, _ = source[0].partition("=================\n")
        source[0] = head + sep
        return
    source[0] = TIMING.sub("", source[0])


def comments_in_language(app, relative_path, parent_docname: str, content: list[str]) -> None:
    """Sphinx ``include-read``, the second language's pass: the comments of the "Deploy it yourself" snippets
    (``engine.deploy.COMMENTS``, messages) in that language; the commands and code stay as they are."""
    lang = page_lang(app)
    if lang == LANGS[0] or extracting(app):
        return
    with language(lang):
        for comment in COMMENTS:
            content[0] = content[0].replace(f"# {comment}", f"# {_(comment)}")

