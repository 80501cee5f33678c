"""Headline figures of a results document, and how two documents compare.

Used by the "On other hardware" tables, the landing page's support matrix and
the regression gates, so all three read the same numbers the same way.
Metric names follow vLLM's benchmark JSON.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..core.messages import CLAUSE_SEP, LANGS, N_, _
from ..core.messages import current as current_language
from .schema import ResultsDoc, Stat

STALE_AFTER_DAYS = 90

# (key, label, unit, better): "higher" or "lower" is better; the label is a message, shown translated
METRICS = [
    ("output_throughput", N_("output throughput"), "tok/s", "higher"),
    ("median_ttft_ms", N_("median TTFT"), "ms", "lower"),
    ("median_tpot_ms", N_("median TPOT"), "ms", "lower"),
    ("roofline_fraction", N_("roofline fraction"), "", "higher"),
]


@dataclass(frozen=True)
class Figure:
    """One headline figure of a document: its statistic and what the median is taken over."""

    key: str
    label: str
    unit: str
    better: str
    stat: Stat
    over: str       # "3 runs", "24 requests of 3 runs", ... in the language being rendered

    @property
    def value(self) -> float:
        return self.stat.median

    def short(self) -> str:
        """``"median TPOT 43.2 ms"``: the label and the median, as compact cells show it."""
        return _(self.label) + f" {_fmt(self.key, self.stat.median)}{' ' + self.unit if self.unit else ''}"

    def text(self) -> str:
        """``"106 tok/s (IQR 103–108, n=3 runs)"``: the median, its spread and its sample."""
        v = _fmt(self.key, self.stat.median)
        if self.stat.n == 1:  # "one run": the English drops the count, the other languages keep ``over`` whole
            what = self.over.split(' ', 1)[-1].rstrip('s') if current_language() == LANGS[0] else self.over
            return _("{value} (one {what})", value=v, what=what)
        return _("{value} (IQR {q1}–{q3}, n={over})", value=v, q1=_fmt(self.key, self.stat.q1),
                 q3=_fmt(self.key, self.stat.q3), over=self.over)


def _fmt(key: str, v: float) -> str:
    return f"{100 * v:.1f} %" if key == "roofline_fraction" else f"{v:.4g}"


def headline_figures(doc: ResultsDoc) -> dict[str, Figure]:
    """THE headline figures of a document, one definition for every page, table, plot and gate:

    * output throughput: median over the repeated runs of the benchmark at the report's conditions;
    * median TTFT and TPOT: median over every request of those runs (pooled);
    * without that benchmark, the concurrency sweep: throughput at the highest concurrency, TTFT and
      TPOT at concurrency 1, each likewise;
    * roofline fraction: bytes per decode step / (median TPOT at concurrency 1 x measured bandwidth)
      (:func:`roofline_fraction`), its spread from the TPOT's.
    """
    r, out = doc.results, {}
    meta = {k: (label, unit, better) for k, label, unit, better in METRICS}

    def put(key: str, stat: Stat | None, over: str) -> None:
        if stat is not None:
            out[key] = Figure(key, *meta[key], stat, over)

    if r.benchmark:
        b = r.benchmark
        runs = b.repeats
        thr = b.output_throughput or (Stat.of([b.summary["output_throughput"]]) if "output_throughput" in b.summary
                                      else None)
        put("output_throughput", thr, _("{n} runs", n=thr.n) if thr else "")
        for key, samples in (("median_ttft_ms", b.ttft_ms), ("median_tpot_ms", b.tpot_ms)):
            if samples:
                put(key, Stat.of(samples), _("{n} requests of {runs} runs", n=len(samples), runs=runs) if runs > 1
                    else _("{n} requests of {runs} run", n=len(samples), runs=runs))
    elif r.concurrency_sweep:
        top, one = r.concurrency_sweep[-1], r.concurrency_sweep[0]
        put("output_throughput", top.output_throughput,
            _("{n} runs at concurrency {concurrency}", n=top.output_throughput.n, concurrency=top.concurrency))
        put("median_ttft_ms", one.ttft_ms, _("{n} requests at concurrency 1", n=one.ttft_ms.n))
        put("median_tpot_ms", one.tpot_ms, _("{n} requests at concurrency 1", n=one.tpot_ms.n))
    e = r.efficiency
    if e and e.fraction is not None:
        t = e.tpot_ms

        def at(tpot_ms: float) -> float:  # the fraction a step of that TPOT reaches: the slower, the lower
            return roofline_fraction(e.decode_bytes.total, tpot_ms, e.measured_bandwidth)

        put("roofline_fraction", Stat(median=e.fraction, q1=at(t.q3), q3=at(t.q1), min=at(t.max), max=at(t.min),
                                      n=t.n), _("{n} requests at concurrency 1", n=t.n))
    return out


def roofline_fraction(bytes_per_step: float, tpot_ms: float, bandwidth_bytes_per_s: float | None) -> float | None:
    """THE roofline fraction: the bandwidth a decode step achieved (``bytes_per_step`` read in ``tpot_ms``)
    over the device's measured bandwidth; None without a measured bandwidth.

    It lives here, in ``record`` (below ``measure`` in the layers), so that the headline figures and the
    tutorial steps that record the fraction (efficiency, tuning) share one definition."""
    if not bandwidth_bytes_per_s:
        return None
    return (bytes_per_step / (tpot_ms / 1000.0)) / bandwidth_bytes_per_s


def gated_steps(card) -> list[str]:
    """The Tutorial steps that measure a card's headline figures, as its page runs them: the benchmark at
    the report's conditions, or, for a card with sweeps (whose page runs no such benchmark), the
    concurrency sweep and the roofline (``scripts/repeatability.py`` runs these to measure their noise)."""
    return ["concurrency_sweep", "efficiency"] if card.sweeps else ["benchmark"]


def accuracy_verdict(doc: ResultsDoc) -> str:
    """PASS when every engine-vs-reference verdict of the document passed, FAIL when one did not, – when none ran."""
    r = doc.results
    verdicts = [s.passed for s in (r.logits_agreement, r.forward_consistency, r.chat_consistency, r.greedy_agreement,
                                   r.text_consistency)
                if s is not None and s.passed is not None]
    if not verdicts:
        return "–"
    return "PASS" if all(verdicts) else "FAIL"


def age_days(doc: ResultsDoc, now: dt.datetime | None = None) -> float:
    now = now or dt.datetime.now(dt.timezone.utc)
    return (now - dt.datetime.fromisoformat(doc.provenance.built_at)).total_seconds() / 86400


def staleness(doc: ResultsDoc, current: ResultsDoc | None, now: dt.datetime | None = None,
              max_days: int = STALE_AFTER_DAYS) -> str:
    """'' when fresh; else why the recorded document may no longer hold, in the language being rendered."""
    why = []
    days = age_days(doc, now)
    if days > max_days:
        why.append(_("{days:.0f} days old", days=days))
    if current is not None:
        for pkg in ("vllm", "vllm_ascend"):
            a, b = doc.provenance.machine.versions.get(pkg), current.provenance.machine.versions.get(pkg)
            if a and b and a != b:
                why.append(_("{package} {recorded}, this build {current}", package=pkg, recorded=a, current=b))
    return _("stale: {why}", why=CLAUSE_SEP[current_language()].join(why)) if why else ""


def same_conditions(a: ResultsDoc, b: ResultsDoc) -> bool:
    """Comparable: the same kind of machine, weights kind, profile and engine dtype."""
    pa, pb = a.provenance, b.provenance
    return (pa.machine.slug == pb.machine.slug and pa.profile == pb.profile and pa.engine_dtype == pb.engine_dtype
            and (pa.weights and pa.weights.kind) == (pb.weights and pb.weights.kind))


def engine_versions(doc: ResultsDoc) -> str:
    """The engine versions a document was measured with, as pages write them: ``vLLM 0.23.0 / vllm-ascend 0.23.0``
    ('' when none is recorded)."""
    v = doc.provenance.machine.versions
    return " / ".join(f"{name} {v[k]}" for k, name in (("vllm", "vLLM"), ("vllm_ascend", "vllm-ascend")) if v.get(k))
