"""What each figure of :mod:`.plots` draws, as rows: the data a page offers as a CSV under the figure
(:func:`npu_tutorials.site.render.draw`), from the same inputs the figure is drawn from, in the pass's language.

A figure function attaches its rows to the figure it returns (:func:`attach`); the renderer writes them the way it
writes a table's.  Numbers keep six significant digits (the document has the full values: ``api/documents/``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..core.messages import _

ATTR = "tut_data"  # the attribute of a matplotlib figure that holds its FigureData


@dataclass
class FigureData:
    """A figure's rows, with the columns and ``cells()`` of a :class:`~npu_tutorials.core.tables.Table`."""

    columns: list[str]
    rows: list[list[Any]]

    def cells(self) -> list[list[str]]:
        return [["" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in row]
                for row in self.rows]


def attach(fig, data: FigureData):
    """``fig`` carrying ``data`` (what :func:`of` finds)."""
    setattr(fig, ATTR, data)
    return fig


def of(fig) -> FigureData | None:
    return getattr(fig, ATTR, None)


def _stat(s) -> list[Any]:
    return [None, None, None] if s is None else [s.median, s.q1, s.q3]


def _spread() -> list[str]:
    return [_("median"), _("first quartile"), _("third quartile")]


def latency_distributions(panels: Sequence[tuple[str, Sequence[float]]]) -> FigureData:
    """``panels``: (panel title, the values its histogram counts)."""
    return FigureData([_("panel"), _("sample"), "ms"],
                      [[name, i + 1, float(v)] for name, values in panels for i, v in enumerate(values)])


def logits_error(section, histogram: str, scatter: str) -> FigureData:
    h = section.error_histogram
    rows = [[histogram, float(lo), float(hi), int(n), None, None]
            for lo, hi, n in zip(h.edges, h.edges[1:], h.counts)]
    rows += [[scatter, None, None, None, float(r), float(e)]
             for r, e in zip(section.scatter_reference, section.scatter_engine)]
    return FigureData([_("panel"), _("bin start"), _("bin end"), _("count"), _("reference (fp32, CPU)"), _("engine")],
                      rows)


def series(rows: Sequence[tuple[str, str, str, Any, Any]]) -> FigureData:
    """``rows``: (panel, series, x axis, x, Stat) — a line of medians with interquartile bars per series."""
    return FigureData([_("panel"), _("series"), _("x axis"), "x", *_spread()],
                      [[p, s, xa, x, *_stat(st)] for p, s, xa, x, st in rows])


def greedy_agreement(rows) -> FigureData:
    return FigureData([_("prompt"), _("position-wise match of the greedy tokens (%)"), _("first divergence")],
                      [[r.prompt, 100 * r.match_rate, "" if r.first_divergence is None else r.first_divergence]
                       for r in rows])


def tuning(section) -> FigureData:
    return FigureData([_("configuration"), *(f"TPOT (ms): {c}" for c in _spread()),
                       _("fraction of the measured bandwidth roofline (%)")],
                      [[r.name, *_stat(r.tpot_ms), None if r.fraction is None else 100 * r.fraction]
                       for r in section.rows])


def models_compared(rows) -> FigureData:
    """``rows``: (model, hardware, throughput Stat, TPOT Stat[, document identifier]): each bar's document named."""
    return FigureData([_("model"), _("hardware"), *(f"tokens/s: {c}" for c in _spread()),
                       *(f"TPOT (ms): {c}" for c in _spread()), _("document")],
                      [[m, hw, *_stat(thr), *_stat(tpot), doc_id[0] if doc_id else ""]
                       for m, hw, thr, tpot, *doc_id in rows])


def paired_forest(ratios, labels: list[str]) -> FigureData:
    return FigureData([_("figure"), _("round"), "B/A", _("median"), _("interval"), _("verdict")],
                      [[name, i + 1, float(r), p.median, f"{p.low:.4g}-{p.high:.4g}", _(p.verdict)]
                       for name, p in zip(labels, ratios) for i, r in enumerate(p.ratios)])


def history(series_, figures) -> FigureData:
    """A point (:func:`.plots.history`) is (date, {key: Stat}, commit, versions[, document identifier])."""
    return FigureData([_("figure"), _("machine and weights"), _("date"), _("commit"), _("versions"), *_spread(),
                       _("document")],
                      [[label, kind, d, c, v, *_stat(f[key]), doc_id[0] if doc_id else ""] for key, label in figures
                       for kind, points in series_ for d, f, c, v, *doc_id in points if key in f])
