"""Regression gates: this build's document against the recorded one for the same conditions.

Defaults (a card's ``gates`` section may override each): throughput and the
roofline fraction at least 0.95x the baseline; TTFT and TPOT at most 1.15x; an
accuracy verdict that passed in the baseline must still pass.  A figure beyond
its limit counts as a regression only when the two builds' interquartile ranges
do not overlap: run-to-run noise on a shared 2-core machine is not a regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .cards import Card
from .headline import METRICS, Comparison, accuracy_verdict, headline_stats, same_conditions
from .schema import ResultsDoc

DEFAULT_LIMITS = {"output_throughput": 0.95, "median_ttft_ms": 1.15, "median_tpot_ms": 1.15,
                  "roofline_fraction": 0.95}


@dataclass
class GateResult:
    model: str
    baseline: ResultsDoc | None
    comparisons: list[Comparison] = field(default_factory=list)
    accuracy: tuple[str, str] | None = None  # (baseline verdict, this build's)

    @property
    def regressions(self) -> list[str]:
        out = []
        b = self.baseline
        for c in self.comparisons:
            if c.regressed:
                out.append(f"{self.model}: {c.label} regressed: {c.current:.4g} {c.unit} vs {c.baseline:.4g} "
                           f"(ratio {c.ratio:.3f}, limit {'>=' if c.better == 'higher' else '<='} {c.limit}, "
                           f"interquartile ranges apart); baseline {b.provenance.built_at} "
                           f"{b.provenance.git_commit[:12]} on {b.provenance.device}")
        if self.accuracy and self.accuracy == ("PASS", "FAIL"):
            out.append(f"{self.model}: accuracy verdict regressed: PASS in the baseline "
                       f"({b.provenance.built_at} {b.provenance.git_commit[:12]}), FAIL now")
        return out

    @property
    def passed(self) -> bool:
        return not self.regressions


def limits_for(card: Card) -> dict[str, float]:
    return {**DEFAULT_LIMITS, **card.gates}


def pick_baseline(current: ResultsDoc, recorded: list[ResultsDoc]) -> ResultsDoc | None:
    """The newest recorded document made under the same conditions, if any."""
    same = [d for d in recorded if same_conditions(d, current)]
    return max(same, key=lambda d: d.provenance.built_at) if same else None


def gate(current: ResultsDoc, recorded: list[ResultsDoc], card: Card) -> GateResult:
    base = pick_baseline(current, recorded)
    res = GateResult(current.model, base)
    if base is None:
        return res
    limits = limits_for(card)
    now, then = headline_stats(current), headline_stats(base)
    for key, label, unit, better in METRICS:
        if key in now and key in then and then[key].median:
            a, b = now[key], then[key]
            res.comparisons.append(Comparison(key, label, unit, a.median, b.median, a.median / b.median,
                                              limits[key], better, a, b))
    res.accuracy = (accuracy_verdict(base), accuracy_verdict(current))
    return res
