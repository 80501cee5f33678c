"""Headline figures of a results document, and how two documents compare.

Used by the "On other hardware" tables, the landing page's support matrix and
the regression gates, so all three read the same numbers the same way.
Metric names follow vLLM's benchmark JSON.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .schema import ResultsDoc, Stat

STALE_AFTER_DAYS = 90

# (key, label, unit, better): "higher" or "lower" is better
METRICS = [
    ("output_throughput", "output throughput", "tok/s", "higher"),
    ("median_ttft_ms", "median TTFT", "ms", "lower"),
    ("median_tpot_ms", "median TPOT", "ms", "lower"),
    ("roofline_fraction", "roofline fraction", "", "higher"),
]


def headlines(doc: ResultsDoc) -> dict[str, float]:
    """The document's headline figures: the benchmark at the report's conditions where it ran,
    else the concurrency sweep (throughput at the highest concurrency, latency at 1)."""
    r, out = doc.results, {}
    if r.benchmark:
        s = r.benchmark.summary
        for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms"):
            if k in s:
                out[k] = float(s[k])
    elif r.concurrency_sweep:
        top = r.concurrency_sweep[-1]
        one = r.concurrency_sweep[0]
        out["output_throughput"] = top.output_throughput.median
        out["median_ttft_ms"] = one.ttft_ms.median
        out["median_tpot_ms"] = one.tpot_ms.median
    if r.efficiency and r.efficiency.fraction is not None:
        out["roofline_fraction"] = r.efficiency.fraction
    return out


def headline_stats(doc: ResultsDoc) -> dict[str, Stat]:
    """The headline figures with their spread: throughput over repeated runs, TTFT and TPOT over
    requests, the roofline fraction from the TPOT's quartiles (what the regression gate compares)."""
    r, out = doc.results, {}
    if r.benchmark:
        b = r.benchmark
        if b.output_throughput is not None:
            out["output_throughput"] = b.output_throughput
        elif "output_throughput" in b.summary:
            out["output_throughput"] = Stat.of([b.summary["output_throughput"]])
        if b.ttft_ms:
            out["median_ttft_ms"] = Stat.of(b.ttft_ms)
        if b.tpot_ms:
            out["median_tpot_ms"] = Stat.of(b.tpot_ms)
    elif r.concurrency_sweep:
        out["output_throughput"] = r.concurrency_sweep[-1].output_throughput
        out["median_ttft_ms"] = r.concurrency_sweep[0].ttft_ms
        out["median_tpot_ms"] = r.concurrency_sweep[0].tpot_ms
    e = r.efficiency
    if e and e.fraction is not None:
        t = e.tpot_ms
        f = e.fraction * t.median  # fraction x TPOT is constant: bytes / bandwidth
        out["roofline_fraction"] = Stat(median=e.fraction, q1=f / t.q3, q3=f / t.q1, min=f / t.max, max=f / t.min, n=t.n)
    return out


def accuracy_verdict(doc: ResultsDoc) -> str:
    """PASS when every engine-vs-reference verdict of the document passed, FAIL when one did not, – when none ran."""
    r = doc.results
    verdicts = [s.passed for s in (r.logits_agreement, r.forward_consistency, r.greedy_agreement, r.text_consistency)
                if s is not None and s.passed is not None]
    if not verdicts:
        return "–"
    return "PASS" if all(verdicts) else "FAIL"


def age_days(doc: ResultsDoc, now: dt.datetime | None = None) -> float:
    now = now or dt.datetime.now(dt.timezone.utc)
    return (now - dt.datetime.fromisoformat(doc.provenance.built_at)).total_seconds() / 86400


def staleness(doc: ResultsDoc, current: ResultsDoc | None, now: dt.datetime | None = None,
              max_days: int = STALE_AFTER_DAYS) -> str:
    """'' when fresh; else why the recorded document may no longer hold."""
    why = []
    days = age_days(doc, now)
    if days > max_days:
        why.append(f"{days:.0f} days old")
    if current is not None:
        for pkg in ("vllm", "vllm_ascend"):
            a, b = doc.provenance.machine.versions.get(pkg), current.provenance.machine.versions.get(pkg)
            if a and b and a != b:
                why.append(f"{pkg} {a}, this build {b}")
    return "stale: " + "; ".join(why) if why else ""


@dataclass
class Comparison:
    key: str
    label: str
    unit: str
    current: float
    baseline: float
    ratio: float
    limit: float
    better: str
    current_stat: Stat | None = None
    baseline_stat: Stat | None = None

    @property
    def beyond_limit(self) -> bool:
        return self.ratio < self.limit if self.better == "higher" else self.ratio > self.limit

    @property
    def beyond_noise(self) -> bool:
        """The two interquartile ranges do not overlap in the bad direction (True without spreads)."""
        a, b = self.current_stat, self.baseline_stat
        if a is None or b is None:
            return True
        return a.q3 < b.q1 if self.better == "higher" else a.q1 > b.q3

    @property
    def regressed(self) -> bool:
        """Worse than the limit allows, and not within the run-to-run spread of both builds."""
        return self.beyond_limit and self.beyond_noise


def same_conditions(a: ResultsDoc, b: ResultsDoc) -> bool:
    """Comparable: the same kind of machine, weights kind, profile and engine dtype."""
    pa, pb = a.provenance, b.provenance
    return (pa.machine.slug == pb.machine.slug and pa.profile == pb.profile and pa.engine_dtype == pb.engine_dtype
            and (pa.weights and pa.weights.kind) == (pb.weights and pb.weights.kind))
