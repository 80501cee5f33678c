"""Page banners: a tutorial page this build did not execute (with the results recorded elsewhere), or one
built on a CPU or with stand-in weights, says so under its title."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from ..core.messages import N_, _, in_lang
from ..engine.platform import platform_for
from ..inputs.cards import load_card
from ..inputs.weights import shown_label
from .freshness import freshness_block
from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..record.results import document_id, page_record, read_doc, recorded, recorded_dir, results_dir
from ..views import Views
from .i18n import extracting, page_lang
from .recorded_page import draw_from_record, record_banner


NOT_EXECUTED_BANNER = """
.. admonition:: {title}
   :class: warning tut-not-executed

   {body}

"""


@in_lang
def not_executed_banner(stem: str, why: str = "", lang: str | None = None) -> str:
    """The warning of a tutorial page this build did not execute (``why``: the build plan's reason)."""
    if why:
        body = _("This page shows the tutorial's code, but this build did not run it: {why}, so its results below "
                 "(if any) were recorded elsewhere.  Run ``make html`` (or ``make html TUTORIAL_ONLY={stem}``) on a "
                 "machine that can execute it.", why=why, stem=stem)
    else:
        body = _("This page shows the tutorial's code, but this build did not run it, so its results below (if "
                 "any) were recorded elsewhere.  Run ``make html`` (or ``make html TUTORIAL_ONLY={stem}``) on a "
                 "machine that can execute it.", stem=stem)
    return NOT_EXECUTED_BANNER.format(title=_("Not executed in this build"), body=body)


def _after_title(lines: list[str]) -> int:
    """Index of the line after the page title's underline in a sphinx-gallery page."""
    for i in range(1, len(lines)):
        u = lines[i].strip()
        if u and set(u) <= set("=-~^\"'`#*+<>") and len(u) >= 3 and lines[i - 1].strip() \
                and not lines[i - 1].lstrip().startswith(".."):
            return i + 1
    return 0


CI_BUILD_BANNER = """
.. admonition:: {title}
   :class: warning tut-ci-build

   {body}

"""


# (built on a CPU, with stand-in weights) -> how the page was built, and what its figures mean then
BUILT = {(True, False): N_("on a CPU"), (False, True): N_("with stand-in weights"),
         (True, True): N_("on a CPU and with stand-in weights")}
BODY = {
    (True, False): N_("This page was built on a CPU ({device}, {weights}). Its figures are real measurements of "
                      "that build: they show that the tutorial runs end to end and how that machine performs, not "
                      "how the model performs on an Ascend NPU."),
    (False, True): N_("This page was built with stand-in weights ({device}, {weights}). Its figures are real "
                      "measurements of that build: they show that the tutorial runs end to end and how that "
                      "machine performs; generated text and task accuracy on stand-in weights mean nothing."),
    (True, True): N_("This page was built on a CPU and with stand-in weights ({device}, {weights}). Its figures "
                     "are real measurements of that build: they show that the tutorial runs end to end and how "
                     "that machine performs, not how the model performs on an Ascend NPU; generated text and task "
                     "accuracy on stand-in weights mean nothing."),
}


@in_lang
def build_banner(doc, lang: str | None = None) -> str:
    """The warning a page (or the landing page) carries when it was not built on an accelerator with
    real weights, in ``lang``; empty otherwise."""
    p = doc.provenance
    on_cpu = not platform_for(p.backend).accelerator
    stand_in = p.weights is not None and p.weights.kind == "stand-in"
    if not (on_cpu or stand_in):
        return ""
    what = _(BUILT[on_cpu, stand_in])
    weights = shown_label(p.weights) if p.weights else _("unknown weights")
    body = _(BODY[on_cpu, stand_in], device=p.device, weights=weights)
    if stand_in:
        body += " " + trained_model_link(lang)
    return CI_BUILD_BANNER.format(title=_("Built {what}", what=what), body=body)


@in_lang
def trained_model_link(lang: str | None = None) -> str:
    """A sentence linking the page of the tutorial whose real weights every build has (a card with
    ``packaged:`` weights): the same checks on a trained model.  Empty where no card has them."""
    for stem, key in tutorials().items():
        card = load_card(key)
        if card.packaged is not None:
            return _("The same checks on a trained model: {link}, real weights on every build.",
                         link=f":doc:`{card.name} </tutorials/models/{stem}>`")
    return ""


def _insert_after_title(text: str, block: str) -> str:
    lines = text.splitlines(keepends=True)
    at = _after_title(lines)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def add_banners(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: label a tutorial page that this build did not execute, or that it built on
    a CPU or with stand-in weights."""
    lang = page_lang(app)
    text = source[0]
    if "sphx_glr_download_" not in text or extracting(app):  # not an example page, or text for translators
        return
    stem = docname.rsplit("/", 1)[-1]
    if "sphx-glr-script-out" not in text and "tut-table" not in text and "output_result" not in text:
        skipped = Path(app.srcdir) / f"{docname}.skipped" if app is not None else None
        why = skipped.read_text().strip() if skipped is not None and skipped.is_file() else ""
        source[0] = unexecuted_page(text, stem, why, lang, depth=_depth(docname, lang))
        return

    key = tutorials().get(stem)
    path = results_dir() / f"{key}.json" if key else None
    if path is None or not path.is_file():
        return
    try:
        doc = read_doc(path)
    except TutorialError:
        return  # the end-of-build check reports an unreadable document
    source[0] = _insert_after_title(text, freshness_block(doc, stem, _depth(docname, lang), doc_id=document_id(path),
                                                          lang=lang) + build_banner(doc, lang))


def _depth(docname: str, lang: str) -> int:
    """How many folders a page is below the site's root (the Chinese pages: one more, under ``zh_CN/``)."""
    return docname.count("/") + (lang != "en")


def unexecuted_page(text: str, stem: str, why: str, lang: str, depth: int = 2) -> str:
    """A page this build did not execute: drawn from the recorded run that fits it, under a banner that says so
    (:mod:`npu_tutorials.site.recorded_page`), or, where none fits, its code under the not-executed warning,
    with what is recorded of it."""
    key = tutorials().get(stem)
    try:
        found = page_record(key) if key else None
    except TutorialError:  # a card that does not load: the build's own check names it
        found = None
    if found is None:
        return _insert_after_title(text, not_executed_banner(stem, why, lang) + recorded_rst(stem, lang))
    record, doc = found
    banner = (freshness_block(doc, stem, depth, recorded=record, doc_id=document_id(recorded_dir() / record), lang=lang)
              + record_banner(doc, record, why, stem, lang) + build_banner(doc, lang))
    return _insert_after_title(draw_from_record(text, key, record), banner)


def _underline(title: str, char: str = "-") -> str:
    """A section title's underline, as wide as docutils measures the title (a CJK character: two columns)."""
    return char * sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in title)


@in_lang
def recorded_rst(stem: str, lang: str | None = None) -> str:
    """Results recorded on other hardware for an unexecuted page, as raw HTML tables (views of them; the
    tables carry every language, the text around them is ``lang``'s)."""
    key = tutorials().get(stem)
    if key is None:
        return ""
    try:
        docs = recorded(key)
        card = load_card(key)
    except TutorialError:
        return ""
    if not docs:
        return ""
    newest = docs[-1]
    show = Views(newest, card)
    tables = [show.compare.on_other_hardware(docs[:-1])]
    for view in (show.serving.bench_table, show.accuracy.logits_verdict, show.accuracy.consistency_verdict,
                 show.performance.concurrency_table, show.performance.efficiency_table):
        try:
            tables.append(view())
        except TutorialError:
            continue
    html = "\n".join(t._repr_html_() for t in tables)
    body = "\n".join("   " + line for line in html.splitlines())
    title = _("Recorded results")
    intro = _("The newest recorded run of this tutorial ({device}, {date}), and every other one beside it:",
                  device=newest.provenance.device, date=newest.provenance.built_at[:10])
    return f"{title}\n{_underline(title)}\n\n{intro}\n\n.. raw:: html\n\n{body}\n\n"
