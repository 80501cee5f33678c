"""The landing, build-costs and methods pages' generated sections (support and coverage matrices, the
costs of each step, the methods figures), filled in when Sphinx reads those pages.

A page asks for one with a ``generated`` directive naming it (one of :data:`BLOCKS`)::

    ```{generated} support-matrix
    ```

:func:`fill_landing` puts the block's Markdown in its place when Sphinx reads the page, before parsing, so the
block's own headings are the page's sections (MyST nests the headings of a directive's parsed content out of
order).  A name no block has fails the build in one line; a ``generated`` directive left unexpanded is an error
too (:class:`Generated`), so a block is never silently missing."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from .banners import build_banner
from .overview import overview
from .i18n import page_lang
from ..core.messages import _, current, in_lang
from ..inputs.cards import load_card
from ..inputs.weights import shown_label
from ..checks.methods import floors_markdown, margins_markdown, negative_controls_markdown, repeatability_markdown
from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..record.results import read_doc, recorded, results_dir, shown_doc
from .i18n import extracting
from .landing import md_table, coverage_matrix, plain, support_rows
from .render import table_csv
from ..views.figure_data import FigureData
from .paired_page import paired_markdown
from .prepare import read_record
from ..record.results import this_build


@in_lang
def landing_markdown(now=None, lang: str | None = None, data: Path | None = None) -> tuple[str, str, str]:
    """(banner, support matrix, coverage matrix) from this build's and the recorded results documents, in
    ``lang``; with ``data`` (the site's ``_data`` folder), the support matrix's CSV is written there and linked
    under it."""
    stems = {key: stem for stem, key in tutorials().items()}
    cards = [load_card(k) for k in stems]
    this_build, notes = {}, []
    for card in cards:
        path = results_dir() / f"{card.key}.json"
        try:
            this_build[card.key] = read_doc(path) if path.is_file() else None
        except TutorialError as exc:
            this_build[card.key] = None
            notes.append(f"- {exc}")
    rec_errors: list[str] = []
    rec = {c.key: recorded(c.key, errors=rec_errors) for c in cards}
    notes += [f"- {e}" for e in rec_errors]
    pages = {key: f"tutorials/models/{stem}" for key, stem in stems.items()}
    drawn = {}  # a page this build did not execute: the recorded run it is drawn from
    for c in cards:
        found = shown_doc(c.key) if this_build[c.key] is None else None
        if found is not None:
            drawn[c.key] = found[1].provenance.built_at
    header, rows = support_rows(cards, pages, this_build, rec, now, lang, drawn)
    table = md_table(header, rows)
    if data is not None:
        _h, with_ids = support_rows(cards, pages, this_build, rec, now, lang, drawn, ids=True)  # each cell's document
        table += "\n\n" + table_csv(FigureData(header, [[plain(c) for c in r] for r in with_ids]), data, "",
                                     f"support_matrix_{lang}")
    built = [(c, this_build[c.key]) for c in cards if this_build.get(c.key) is not None]
    if built:
        table += "\n\n" + _("Weights used by this build:") + "\n\n" + "\n".join(
            f"- {c.name}: {shown_label(d.provenance.weights) if d.provenance.weights else _('unknown')} "
            f"({d.provenance.backend}, {d.provenance.status})" for c, d in built)
    banners = [build_banner(d, lang) for _c, d in built]
    banner = ""
    if any(banners):
        kinds = sorted({b.split("\n")[1].removeprefix(".. admonition:: ") for b in banners if b})
        kinds = "; ".join(k.lower() for k in kinds) if current() == "en" else "；".join(kinds)
        banner = ":::{warning}\n" + _(
            "This site was not built on an accelerator with real weights ({kinds}): its figures show that the "
            "tutorials run and how that machine performs, not how the models perform on an Ascend NPU. Each such "
            "page says so at its top.", kinds=kinds) + "\n:::\n"
    if notes:
        table += "\n\n" + _("Unreadable results documents:") + "\n\n" + "\n".join(notes)
    return banner, table, coverage_matrix(cards, lang)


@in_lang
def preparation_markdown(lang: str | None = None) -> str:
    """What the newest build here spent on its checkpoints before the tutorials ran (``preparation.json``,
    written by ``scripts/preflight.py --prepare``), in ``lang``; '' when it made none."""
    prep = read_record()
    if prep is None:
        return ""
    out = [_("**Before the tutorials** (the build of {built_at}): {n} checkpoint(s) made {workers} at a time "
                 "in {wall:.0f} s, each in a process of its own; a tutorial then finds its checkpoint ready, so "
                 "its weights step takes well under a second.", built_at=prep.built_at, n=len(prep.jobs),
                 workers=prep.workers, wall=prep.wall_s) + "\n",
           "| " + _("model") + " | " + _("made") + " | " + _("seconds")
           + " |\n|---|---|---|"]
    out += [f"| {j.model} | {' + '.join(_(w) for w in j.work)} | {j.seconds:.1f} |" for j in prep.jobs]
    out.append("")
    return "\n".join(out)


@in_lang
def costs_markdown(lang: str | None = None) -> str:
    """The checkpoints made before the tutorials, then each tutorial's time per step in this build, from its
    results document."""
    out = [preparation_markdown(lang)]
    for stem, key in tutorials().items():
        path = results_dir() / f"{key}.json"
        try:
            doc = read_doc(path) if path.is_file() else None
        except TutorialError as exc:
            out.append(f"**{key}**: {exc}\n")
            continue
        if doc is None:
            out.append(f"**{key}**: not executed in this build.\n")
            continue
        p = doc.provenance
        out.append(f"**{{doc}}`{key} </tutorials/models/{stem}>`**: {p.wall_time_s:.0f} s in all, {p.status}, "
                   f"on {p.device}, {p.profile} profile, built {p.built_at}.\n")
        out.append("| step | seconds |\n|---|---|")
        out += [f"| {c.step.shown()} | {c.seconds:.1f} |" for c in doc.results.costs]
        out.append("")
    return "\n".join(out)


def _this_builds_docs() -> list:
    """This build's readable results documents, one per executed tutorial."""
    out = []
    for key in tutorials().values():
        try:
            doc = this_build(key)
        except TutorialError:
            continue
        if doc is not None:
            out.append(doc)
    return out


BLOCKS = ("build-banner", "model-grid", "comparison-figure", "support-matrix", "coverage-matrix", "build-costs",
          "floors", "margins", "negative-controls", "repeatability", "paired")
BLOCK = re.compile(r"^```\{generated\}[ \t]+(\S+)[ \t]*\n```[ \t]*$", re.M)


def blocks(app) -> dict:
    """Each generated block's maker (:data:`BLOCKS`), in the pass's language; the landing page's four and the
    overview's two are made once per page."""
    lang, out = page_lang(app), Path(app.outdir)
    landing = functools.cache(lambda: landing_markdown(lang=lang, data=out / "_data"))
    grid = functools.cache(lambda: overview(lang, out / "_images"))
    made = {"build-banner": lambda: landing()[0], "support-matrix": lambda: landing()[1],
            "coverage-matrix": lambda: landing()[2], "model-grid": lambda: grid()[0],
            "comparison-figure": lambda: grid()[1], "build-costs": lambda: costs_markdown(lang),
            "floors": floors_markdown, "margins": lambda: margins_markdown(_this_builds_docs()),
            "negative-controls": negative_controls_markdown, "repeatability": repeatability_markdown,
            "paired": lambda: paired_markdown(lang, out / "_images")}
    assert set(made) == set(BLOCKS)
    return made


def fill_landing(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: put each generated block a page names where it names it (not for the translators'
    catalogs: what a build measures is no message; there :class:`Generated` leaves nothing)."""
    if extracting(app) or "{generated}" not in source[0]:
        return
    made = blocks(app)

    def one(m: re.Match) -> str:
        if m.group(1) not in made:
            raise ExtensionError(f"{docname}: no generated block {m.group(1)!r} (site.pages.BLOCKS: "
                                 f"{', '.join(BLOCKS)})")
        return made[m.group(1)]()

    source[0] = BLOCK.sub(one, source[0])


class Generated(SphinxDirective):
    """The ``generated`` directive :func:`fill_landing` expands before parsing: reached only when the translators'
    catalogs are extracted (nothing to translate), else a block was not expanded, which fails the build."""

    required_arguments = 1

    def run(self):
        if extracting(self.env.app):
            return []
        raise ExtensionError(f"{self.env.docname}: the generated block {self.arguments[0]!r} was not expanded "
                             "(write it as its own ```{generated} NAME``` fence; site.pages.BLOCKS)")


def always_reread_landing(app, env, added, changed, removed) -> list[str]:
    """Sphinx ``env-get-outdated``: the landing, costs and methods pages read this build's results, so read
    them every build."""
    return [d for d in ("index", "build-costs", "methods") if d in env.found_docs]
