"""The landing page's matrices, generated from results documents and cards (nothing hand-written).

* Support matrix: models x hardware (this build, then every recorded machine).
  Each cell: status (executed, failed, not run), weights kind, headline figures,
  accuracy verdict, date, and a link to the page.
* Coverage matrix: which checks each tutorial runs, from the cards.
"""

from __future__ import annotations

import datetime as dt

from ..inputs.cards import Card
from ..record.headline import accuracy_verdict, headline_figures, staleness
from ..record.schema import ResultsDoc

CHECKS = [  # (label, predicate on the card)
    ("serving benchmark", lambda c: True),
    ("last-position logits vs fp32", lambda c: c.accuracy.logits is not None),
    ("every-position consistency", lambda c: c.accuracy.consistency is not None),
    ("greedy agreement", lambda c: c.accuracy.greedy is not None),
    ("text consistency and QA", lambda c: c.accuracy.qa is not None),
    ("GSM-style problems", lambda c: c.accuracy.gsm is not None),
    ("latency and concurrency sweeps", lambda c: c.sweeps is not None),
    ("roofline and transformers baseline", lambda c: c.sweeps is not None),
    ("tuning (graph mode, knobs)", lambda c: getattr(c, "tuning", None) is not None),
]


def _cell(doc: ResultsDoc | None, link: str, current: ResultsDoc | None, now: dt.datetime | None) -> str:
    if doc is None:
        return "not run"
    p = doc.provenance
    if p.status != "complete":
        return f"**failed** ({p.built_at[:10]})"
    h = headline_figures(doc)
    parts = [f"{{doc}}`executed </{link}>`" if link else "executed", p.weights.kind if p.weights else "?"]
    parts += [h[k].short() for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms") if k in h]
    verdict = accuracy_verdict(doc)
    if verdict != "–":
        parts.append(f"accuracy {verdict}")
    parts.append(p.built_at[:10])
    stale = staleness(doc, current, now) if current is not doc else ""
    if stale:
        parts.append(f"*{stale}*")
    return "<br>".join(parts)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
    return "\n".join(out)


def support_matrix(cards: list[Card], pages: dict[str, str], this_build: dict[str, ResultsDoc | None],
                   recorded: dict[str, list[ResultsDoc]], now: dt.datetime | None = None) -> str:
    """Markdown table: a row per model, a column for this build and one per recorded machine.

    ``pages``: model key -> docname of its page; ``this_build``: model key -> this build's document
    (or None: not run); ``recorded``: model key -> recorded documents.
    """
    machines: dict[str, str] = {}  # slug -> label
    for docs in recorded.values():
        for d in docs:
            machines.setdefault(d.provenance.machine.slug, f"{d.provenance.device} ({d.provenance.backend})")
    here = next((d for d in this_build.values() if d is not None), None)
    here_label = f"this build: {here.provenance.device} ({here.provenance.backend})" if here else "this build"
    header = ["model", here_label] + [machines[s] for s in sorted(machines)]
    rows = []
    for card in cards:
        cur = this_build.get(card.key)
        row = [card.name, _cell(cur, pages.get(card.key, ""), cur, now)]
        by_slug: dict[str, ResultsDoc] = {}
        for d in recorded.get(card.key, []):
            s = d.provenance.machine.slug
            if s not in by_slug or d.provenance.built_at > by_slug[s].provenance.built_at:
                by_slug[s] = d
        for slug in sorted(machines):
            row.append(_cell(by_slug.get(slug), "", cur, now) if slug in by_slug else "not recorded")
        rows.append(row)
    return _md_table(header, rows)


def coverage_matrix(cards: list[Card]) -> str:
    header = ["check"] + [c.name for c in cards]
    rows = [[label] + ["yes" if pred(c) else "–" for c in cards] for label, pred in CHECKS]
    return _md_table(header, rows)
