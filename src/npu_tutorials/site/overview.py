"""The landing page at a glance: a card per model (its picture, tags and headline figures, linking its page) and
one figure comparing the models' measured throughput and TPOT on every hardware, all drawn from the results
documents the pages show (this build's, or the recorded run a page is drawn from) and the recorded ones.

Computing and drawing apart: :func:`comparison_rows` reads the documents, :func:`npu_tutorials.views.plots.
models_compared` draws any rows it is given."""

from __future__ import annotations

import html
from pathlib import Path

from ..core.errors import TutorialError
from ..core.messages import _, in_lang
from ..inputs.cards import Card
from ..inputs.layouts import num_parameters
from ..inputs.weights import kind_label
from ..record.headline import headline_figures
from ..record.schema import ResultsDoc
from ..inputs.cards import load_card
from ..inputs.gallery_index import tutorials
from ..views import Views, plots
from .render import figure_block, figure_html
from ..record.results import recorded, shown_doc


def hardware_label(doc: ResultsDoc) -> str:
    """What a bar of the comparison is: the machine, the backend, the weights kind and the profile."""
    p = doc.provenance
    kind = p.weights.kind if p.weights else "?"
    return f"{p.device_and_generation} ({p.backend}, {kind}, {p.profile})"


def comparison_rows(cards: list[Card], shown: dict[str, ResultsDoc | None], recorded: dict[str, list[ResultsDoc]]):
    """(model, hardware, throughput Stat, TPOT Stat, document identifier) per model and hardware: the document each
    page shows, and the newest recorded document of every other machine kind."""
    rows = []
    for card in cards:
        docs = [shown[card.key]] if shown.get(card.key) is not None else []
        seen = {hardware_label(d) for d in docs}
        for d in sorted(recorded.get(card.key, []), key=lambda d: d.provenance.built_at, reverse=True):
            if d.provenance.status == "complete" and hardware_label(d) not in seen:
                seen.add(hardware_label(d))
                docs.append(d)
        for d in docs:
            h = headline_figures(d)
            thr, tpot = h.get("output_throughput"), h.get("median_tpot_ms")
            if thr or tpot:
                rows.append((card.name, hardware_label(d), thr.stat if thr else None, tpot.stat if tpot else None,
                             d.identifier))
    return rows


@in_lang
def comparison_html(rows, images: Path, lang: str | None = None) -> str:
    """The comparison figure as the landing page shows it (an image and its caption), in ``lang``."""
    if not rows:
        return "<p>" + html.escape(_("No results document holds a benchmark yet.")) + "</p>"
    fig = plots.models_compared(rows, _("Measured throughput and TPOT per model and hardware"))
    caption = _("Each bar is the median of one results document, its whisker the interquartile range. The "
                "documents differ in machine, weights and profile, as each label says: compare bars of one label, "
                "not across labels.")
    return (f'<div class="tut-compare">{figure_block(fig, images, "", f"models_compared_{lang}")}'
            f'<p class="tut-note">{html.escape(caption)}</p></div>')


@in_lang
def grid_html(cards: list[Card], pages: dict[str, str], shown: dict[str, ResultsDoc | None],
              recorded: dict[str, list[ResultsDoc]], images: Path, lang: str | None = None,
              this_builds: dict[str, str] | None = None) -> str:
    """A card per model: its picture (drawn from the document its page shows, else its newest recorded one),
    tags (architecture, size, backends with runs, weights) and headline figures, the whole card linking its page.
    ``this_builds``: model key -> ``built_at`` of this build's document."""
    this_builds = this_builds or {}

    out = ['<div class="tut-grid">']
    for card in cards:
        doc = shown.get(card.key)
        picture, figures = "", []
        if doc is not None:
            try:
                picture = figure_html(Views(doc, card).serving.thumbnail(), images, "",
                                      f"thumb_{card.key}_{lang}")
            except TutorialError:
                picture = ""
            h = headline_figures(doc)
            figures = [h[k].short() for k in ("output_throughput", "median_tpot_ms") if k in h]
        runs = [d for d in [doc, *recorded.get(card.key, [])] if d is not None]
        backends = sorted({d.provenance.backend for d in runs})
        kinds = sorted({d.provenance.weights.kind for d in runs if d.provenance.weights})
        tags = [card.architecture, f"{num_parameters(card.config) / 1e9:.2f} B"] + backends + \
            [kind_label(k) for k in kinds]
        if doc is None:
            where = _("no run to show yet")
        elif doc.provenance.built_at == this_builds.get(card.key):
            where = _("this build: {device}, {date}", device=doc.provenance.device, date=doc.provenance.built_at[:10])
        else:
            where = _("recorded: {device}, {date}", device=doc.provenance.device, date=doc.provenance.built_at[:10])
        out.append(f'<a class="tut-card" href="{html.escape(pages[card.key])}.html">{picture}'
                   f'<span class="tut-card-title">{html.escape(card.name)}</span>'
                   f'<span class="tut-tags">{"".join(f"<span class=tut-tag>{html.escape(t)}</span>" for t in tags)}</span>'
                   f'<span class="tut-card-figures">{html.escape(" · ".join(figures) or "–")}</span>'
                   f'<span class="tut-card-where">{html.escape(where)}</span></a>')
    out.append("</div>")
    return "".join(out)


def overview(lang: str, images: Path) -> tuple[str, str]:
    """(the card grid, the comparison figure) of the landing page in ``lang``, from the documents."""
    stems = {key: stem for stem, key in tutorials().items()}
    cards = [load_card(k) for k in stems]
    shown, rec, mine = {}, {}, {}
    for c in cards:
        rec[c.key] = recorded(c.key)
        found = shown_doc(c.key)
        if found is not None and not found[0]:
            mine[c.key] = found[1].provenance.built_at
        done = [d for d in rec[c.key] if d.provenance.status == "complete"]
        # the document the page shows, else (a page with nothing to draw from) the newest recorded run
        shown[c.key] = found[1] if found else (done[-1] if done else None)
    pages = {key: f"tutorials/models/{stem}" for key, stem in stems.items()}
    return (grid_html(cards, pages, shown, rec, images, lang, this_builds=mine),
            comparison_html(comparison_rows(cards, shown, rec), images, lang))
