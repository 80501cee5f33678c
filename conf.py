"""Sphinx configuration: MyST pages under docs/source, executed tutorials from gallery/."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "docs" / "source"
sys.path.insert(0, str(ROOT / "src"))

from npu_tutorials.site.banners import add_banners  # noqa: E402
from npu_tutorials.site.pages import Generated, always_reread_landing, fill_landing  # noqa: E402
from npu_tutorials.site.build_plan import force_rerun, plan_build  # noqa: E402
from npu_tutorials.site.rerun import invalidate_changed_tutorials  # noqa: E402
from npu_tutorials.site.generated import write_generated  # noqa: E402
from npu_tutorials.site.i18n import comments_in_language, static_text, translation_pass  # noqa: E402
from npu_tutorials.site.render import render_included, render_views, rerender_outdated  # noqa: E402
from npu_tutorials.site.api import publish_api  # noqa: E402
from npu_tutorials.site.paired_facts import fact_role  # noqa: E402

project = "vLLM on Ascend: executable model tutorials"
author = "the project's contributors"
copyright = "2026, " + author

extensions = [
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx.ext.autodoc",  # the contributing page's API reference
]
autodoc_member_order = "bysource"
myst_enable_extensions = ["colon_fence", "deflist"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_generated/**", "tutorials/models/*.skipped", "tutorials/models/*.inputs", "tutorials/models/*.ipynb", "tutorials/models/*.py",
                    "tutorials/models/*.zip", "tutorials/models/*.md5", "tutorials/models/*.pickle"]

html_theme = "pydata_sphinx_theme"
html_title = "vLLM on Ascend tutorials"
html_static_path = [str(SRC / "_static")]
html_css_files = ["tutorials.css"]
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2,
                      "navbar_end": ["lang-switch", "theme-switcher", "navbar-icon-links"]}
templates_path = [str(SRC / "_templates")]

# The Chinese site (npu_tutorials.site.i18n): make html builds it into _build/html/zh_CN with -D language=zh_CN
# from docs/source/locale/zh_CN/LC_MESSAGES (sphinx-intl, as vllm-ascend's docs); make intl updates them.
language = "en"
locale_dirs = ["locale/"]
gettext_compact = False
gettext_uuid = False
gettext_location = False

# Where tutorials write their results and downloadable files during the build.
BUILD = Path(os.environ.get("TUTORIAL_BUILD_DIR", ROOT / "_build"))
os.environ.setdefault("TUTORIAL_RESULTS_DIR", str(BUILD / "results"))
os.environ.setdefault("TUTORIAL_DOWNLOADS_DIR", str(SRC / "tutorials" / "models" / "data"))
os.environ.setdefault("TUTORIAL_CACHE", str(ROOT / ".cache"))

GALLERY_OUT = SRC / "tutorials" / "models"
GALLERY = Path(os.environ.get("TUTORIAL_GALLERY_DIR") or ROOT / "gallery")  # tests use galleries of their own
# make assemble: the pages come from shards built elsewhere; execute nothing, invalidate nothing.
ASSEMBLE = os.environ.get("TUTORIAL_ASSEMBLE", "") not in ("", "0")
# The second language's pass (and make intl): the pages the first pass executed, reused; nothing runs.
TRANSLATION = translation_pass()

write_generated(SRC)
if not ASSEMBLE and not TRANSLATION:
    # Re-run a tutorial when anything it depends on changed (its card, the package, the requirements, the
    # engine, its controls, the weights it would use), not only when its script did (sphinx-gallery's MD5).
    invalidate_changed_tutorials(GALLERY_OUT)

# One tutorial only: TUTORIAL_ONLY=qwen2_5_0_5b (a regular expression on the file name).
_only = os.environ.get("TUTORIAL_ONLY", "")
# make html FORCE=1: re-run the selected tutorials even when nothing they depend on changed.
if os.environ.get("TUTORIAL_FORCE", "") not in ("", "0") and not TRANSLATION:
    force_rerun(GALLERY_OUT, _only)
# Execute the selected tutorials of this shard that fit this build's hardware; label the others.
_plan = plan_build(GALLERY_OUT, _only, os.environ.get("TUTORIAL_SHARD"), ASSEMBLE) if not TRANSLATION else None
sphinx_gallery_conf = {
    "examples_dirs": [str(GALLERY)],
    "gallery_dirs": [str(GALLERY_OUT)],
    "filename_pattern": _plan.filename_pattern() if _plan else r"^$",  # the translation pass: none
    "ignore_pattern": r"__init__\.py|/_",
    "capture_repr": ("_repr_html_", "__repr__"),
    "ignore_repr_types": r"matplotlib[a-z_.]*|NoneType",
    "reset_modules": ("matplotlib", "npu_tutorials.site.teardown.reset_example"),
    "reset_modules_order": "both",
    "abort_on_example_error": False,
    # a failed tutorial is named by make html's own check, one line with its error (scripts/check_site.py),
    # not by Sphinx's "Extension error ... please report this to sphinx-doc" banner
    "only_warn_on_example_error": True,
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "plot_gallery": "True",
    "matplotlib_animations": False,
    # a cell leaves no figure open: each language's pass draws the page's figures from its results document
    # (npu_tutorials.site.render)
    "image_scrapers": ("matplotlib",),
    "within_subsection_order": "FileNameSortKey",
    # TUTORIAL_JOBS / a multi-device host: tutorials run at once, each on devices of its own (scheduler.py)
    "parallel": _plan.jobs if _plan and _plan.jobs > 1 else False,
}


def _title_in_language(app, config):
    """The top bar's title is a setting, not a message: the Chinese site's own."""
    if config.language == "zh_CN":
        config.html_title = "昇腾上的 vLLM 教程"


def setup(app):
    app.connect("config-inited", _title_in_language)
    app.connect("source-read", static_text)
    # a page this build did not execute gets its recorded run's view references (add_banners) before they are drawn
    app.connect("source-read", add_banners)
    app.connect("source-read", render_views)  # each pass draws a page's views from its results document
    app.connect("source-read", fill_landing)  # the pages' ```{generated} NAME``` blocks
    app.add_directive("generated", Generated)
    app.connect("include-read", render_included)  # each "Deploy it yourself" tab's collect-env report
    app.connect("include-read", comments_in_language)  # the deploy snippets' comments in the pass's language
    app.connect("env-get-outdated", always_reread_landing)
    app.connect("env-get-outdated", rerender_outdated)  # a view, message or document changed: draw again
    app.add_role("fact", fact_role)  # the methods page's figures of recorded comparisons, computed (paired_facts.py)
    app.connect("build-finished", publish_api)  # api/models.json, the documents, the bundles, llms.txt
