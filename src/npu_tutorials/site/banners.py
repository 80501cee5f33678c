"""Page banners: a tutorial page this build did not execute (with the results recorded elsewhere), or one
built on a CPU or with stand-in weights, says so under its title."""

from __future__ import annotations

from pathlib import Path

from ..inputs.cards import load_card


NOT_EXECUTED_BANNER = """
.. admonition:: Not executed in this build
   :class: warning tut-not-executed

   This page shows the tutorial's code, but this build did not run it{why}, so
   its results below (if any) were recorded elsewhere.  Run ``make html`` (or
   ``make html TUTORIAL_ONLY={stem}``) on a machine that can execute it.

"""


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


def build_banner(doc) -> str:
    """The warning a page (or the landing page) carries when it was not built on an accelerator with
    real weights; empty otherwise."""
    p = doc.provenance
    on_cpu = p.backend == "cpu"
    stand_in = p.weights is not None and p.weights.kind == "stand-in"
    if not (on_cpu or stand_in):
        return ""
    what = " and ".join(x for x in ("on a CPU" if on_cpu else "", "with stand-in weights" if stand_in else "") if x)
    body = (f"This page was built {what} ({p.device}, {p.weights.label if p.weights else 'unknown weights'}). "
            "Its figures are real measurements of that build: they show that the tutorial runs end to end "
            "and how that machine performs")
    body += ", not how the model performs on an Ascend NPU" if on_cpu else ""
    body += ("; generated text and task accuracy on stand-in weights mean nothing." if stand_in else ".")
    return CI_BUILD_BANNER.format(title=f"Built {what}", body=body)


def _insert_after_title(text: str, block: str) -> str:
    lines = text.splitlines(keepends=True)
    at = _after_title(lines)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def add_banners(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: label a tutorial page that this build did not execute, or that it built on
    a CPU or with stand-in weights."""
    from .i18n import extracting

    text = source[0]
    if "sphx_glr_download_" not in text or extracting(app):  # not an example page, or text for translators
        return
    stem = docname.rsplit("/", 1)[-1]
    if "sphx-glr-script-out" not in text and "tut-table" not in text:
        skipped = Path(app.srcdir) / f"{docname}.skipped" if app is not None else None
        why = skipped.read_text().strip() if skipped is not None and skipped.is_file() else ""
        block = NOT_EXECUTED_BANNER.format(stem=stem, why=f": {why}" if why else "")
        source[0] = _insert_after_title(text, block + recorded_rst(stem))
        return
    from ..core.errors import TutorialError
    from ..inputs.gallery_index import tutorials
    from ..record.results import read_doc, results_dir

    key = tutorials().get(stem)
    path = results_dir() / f"{key}.json" if key else None
    if path is None or not path.is_file():
        return
    try:
        banner = build_banner(read_doc(path))
    except TutorialError:
        return  # the end-of-build check reports an unreadable document
    if banner:
        source[0] = _insert_after_title(text, banner)


def recorded_rst(stem: str) -> str:
    """Results recorded on other hardware for an unexecuted page, as raw HTML tables (views of them)."""
    from ..core.errors import TutorialError
    from ..inputs.gallery_index import tutorials
    from ..record.results import recorded
    from ..views import Views

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
    return ("Recorded results\n----------------\n\nThe newest recorded run of this tutorial "
            f"({newest.provenance.device}, {newest.provenance.built_at[:10]}), and every other one beside it:\n\n"
            f".. raw:: html\n\n{body}\n\n")
