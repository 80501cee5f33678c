"""The landing page's matrices, generated from results documents and cards (nothing hand-written).

* Support matrix: models x hardware (this build, then every recorded machine).
  Each cell: status (executed, failed, not run), weights kind, headline figures,
  accuracy verdict, date, and a link to the page.
* Coverage matrix: which checks each tutorial runs, from the cards.
"""

from __future__ import annotations

import re

import datetime as dt

from ..core.messages import N_, _, in_lang
from ..inputs.cards import Card
from ..inputs.weights import kind_label
from ..record.headline import accuracy_verdict, headline_figures, staleness
from ..record.schema import ResultsDoc

CHECKS = [  # (label, predicate on the card)
    (N_("serving benchmark"), lambda c: True),
    (N_("last-position logits vs fp32"), lambda c: c.accuracy.logits is not None),
    (N_("every-position consistency"), lambda c: c.accuracy.consistency is not None),
    (N_("greedy agreement"), lambda c: c.accuracy.greedy is not None),
    (N_("text consistency and QA"), lambda c: c.accuracy.qa is not None),
    (N_("GSM-style problems"), lambda c: c.accuracy.gsm is not None),
    (N_("latency and concurrency sweeps"), lambda c: c.sweeps is not None),
    (N_("roofline and transformers baseline"), lambda c: c.sweeps is not None),
    (N_("tuning (graph mode, knobs)"), lambda c: getattr(c, "tuning", None) is not None),
]
FIGURES = ("output_throughput", "median_ttft_ms", "median_tpot_ms")  # the headline figures a cell shows


@in_lang
def _cell(doc: ResultsDoc | None, link: str, current: ResultsDoc | None, now: dt.datetime | None,
          lang: str | None = None, ids: bool = False) -> str:
    if doc is None:
        return _("not run")
    p = doc.provenance
    if p.status != "complete":
        return _("**failed** ({date})", date=p.built_at[:10])
    h = headline_figures(doc)
    kind = p.weights.kind if p.weights else "?"
    parts = [f"{{doc}}`{_('executed')} </{link}>`" if link else _("executed"),
             kind_label(kind)]
    parts += [h[k].short() for k in FIGURES if k in h]
    verdict = accuracy_verdict(doc)
    if verdict != "–":
        parts.append(_("accuracy {verdict}", verdict=_(verdict)))
    parts.append(p.built_at[:10])
    stale = staleness(doc, current, now) if current is not doc else ""
    if stale:
        parts.append("*" + stale + "*")
    if ids and doc.identifier:
        parts.append(doc.identifier)
    return "<br>".join(x for x in parts)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(out)


def plain(cell: str) -> str:
    """A Markdown cell of :func:`support_rows` as text (its CSV): links as their text, no emphasis, ``; `` for breaks."""
    cell = re.sub(r"\{doc\}`([^<`]*?)\s*<[^>]*>`", r"\1", cell).replace("<br>", "; ")
    return re.sub(r"\*+([^*]+)\*+", r"\1", cell)


@in_lang
def support_rows(cards: list[Card], pages: dict[str, str], this_build: dict[str, ResultsDoc | None],
                 recorded: dict[str, list[ResultsDoc]], now: dt.datetime | None = None, lang: str | None = None,
                 drawn: dict[str, str] | None = None, ids: bool = False) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the support matrix in ``lang``, its cells Markdown: a row per model, a column for this
    build and one per recorded machine.

    ``pages``: model key -> docname of its page; ``this_build``: model key -> this build's document
    (or None: not run); ``recorded``: model key -> recorded documents; ``drawn``: model key -> ``built_at`` of
    the recorded run its page is drawn from (a page this build did not execute), whose cell links the page;
    ``ids``: each cell also names its document's identifier (the matrix's CSV).
    """
    drawn = drawn or {}
    machines: dict[str, str] = {}  # record stem (machine kind and CPU generation) -> label
    for docs in recorded.values():
        for d in docs:
            machines.setdefault(d.provenance.machine.record_stem,
                                f"{d.provenance.device_and_generation} ({d.provenance.backend})")
    here = next((d for d in this_build.values() if d is not None), None)
    here_label = (_("this build: {device} ({backend})", device=here.provenance.device, backend=here.provenance.backend)
                  if here else _("this build"))
    header = [_("model"), here_label] + [machines[s] for s in sorted(machines)]
    rows = []
    for card in cards:
        cur = this_build.get(card.key)
        row = [card.name, _cell(cur, pages.get(card.key, ""), cur, now, lang, ids)]
        by_slug: dict[str, ResultsDoc] = {}
        for d in recorded.get(card.key, []):
            s = d.provenance.machine.record_stem
            if s not in by_slug or d.provenance.built_at > by_slug[s].provenance.built_at:
                by_slug[s] = d
        for slug in sorted(machines):
            d = by_slug.get(slug)
            link = pages.get(card.key, "") if d is not None and drawn.get(card.key) == d.provenance.built_at else ""
            row.append(_cell(d, link, cur, now, lang, ids) if d is not None else _("not recorded"))
        rows.append(row)
    return header, rows


@in_lang
def coverage_matrix(cards: list[Card], lang: str | None = None) -> str:
    """Markdown table in ``lang``: a row per check, a column per model, from the cards."""
    header = [_("check")] + [c.name for c in cards]
    yes = _("yes")
    rows = [[_(label)] + [yes if pred(c) else "–" for c in cards] for label, pred in CHECKS]
    return md_table(header, rows)
