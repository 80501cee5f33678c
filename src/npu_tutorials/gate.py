"""Regression gates: this build's document against the recorded one for the same conditions.

Defaults (a card's ``gates`` section may override each): throughput and the
roofline fraction at least 0.95x the baseline; TTFT and TPOT at most 1.15x; an
accuracy verdict that passed in the baseline must still pass.

Two rules keep noise from failing an unchanged build:

* **Measured between-build noise.**  Where ``scripts/repeatability.py`` recorded how much
  two builds of the same code differ on this kind of machine, profile and dtype
  (``results/methods/repeatability-*.json``), each limit is widened to the largest ratio
  that difference allows (:func:`measured_noise`).  The three runs inside one build
  understate it: on a 2-core CPU two builds of unchanged code gave 116 and 106 tok/s
  (9 %) with each build's three runs over 108–122 and 103–107 tok/s, interquartile ranges apart.
* **Spread.**  A figure beyond its limit counts as a regression only when the two builds'
  interquartile ranges do not overlap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .cards import Card
from .headline import METRICS, Comparison, accuracy_verdict, headline_stats, same_conditions
from .schema import ResultsDoc

DEFAULT_LIMITS = {"output_throughput": 0.95, "median_ttft_ms": 1.15, "median_tpot_ms": 1.15,
                  "roofline_fraction": 0.95}

# scripts/repeatability.py's figure names for the gated metrics
NOISE_FIGURES = {"output_throughput": "bench output throughput (tok/s)", "median_ttft_ms": "bench median TTFT (ms)",
                 "median_tpot_ms": "bench median TPOT (ms)", "roofline_fraction": "roofline fraction at concurrency 1"}
_BETTER = {key: better for key, _, _, better in METRICS}


@dataclass
class Noise:
    """How much two builds of the same code differed on this kind of machine: relative difference
    ``|a - b| / mean(a, b)`` per gated metric, and where it was measured."""
    differences: dict[str, float]
    source: str

    def ratio(self, key: str) -> float | None:
        """The largest ratio a/b that relative difference allows: (1 + d/2) / (1 - d/2)."""
        d = self.differences.get(key)
        if d is None or d >= 2:
            return None
        return (1 + d / 2) / (1 - d / 2)


def measured_noise(doc: ResultsDoc, directory: Path | None = None) -> Noise | None:
    """The between-build noise recorded by ``scripts/repeatability.py`` for ``doc``'s kind of machine
    (its slug, or for an older record its backend), profile and engine dtype; the largest difference
    per metric when several records match; None when none does."""
    from .results import recorded_dir

    folder = (directory or recorded_dir()) / "methods"
    prov = doc.provenance
    diffs: dict[str, float] = {}
    sources = []
    for path in sorted(folder.glob("repeatability-*.json")):
        try:
            rec = json.loads(path.read_text())
            p = rec["provenance"]
            measured = rec["relative_differences"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        slug = p.get("machine_slug")
        if (slug or p.get("backend")) != (prov.machine.slug if slug else prov.backend):
            continue
        if p.get("profile") != prov.profile or p.get("dtype") != prov.engine_dtype:
            continue
        for key, figure in NOISE_FIGURES.items():
            d = measured.get(figure)
            if isinstance(d, (int, float)):
                diffs[key] = max(diffs.get(key, 0.0), float(d))
        sources.append(f"results/methods/{path.name} ({str(p.get('date', ''))[:10]}, {p.get('model', '?')})")
    return Noise(diffs, "; ".join(sources)) if diffs else None


@dataclass
class GateResult:
    model: str
    baseline: ResultsDoc | None
    comparisons: list[Comparison] = field(default_factory=list)
    accuracy: tuple[str, str] | None = None  # (baseline verdict, this build's)
    noise: Noise | None = None  # the measured between-build noise that widened the limits, if any

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


def limits_for(card: Card, noise: Noise | None = None) -> dict[str, float]:
    """The card's limits (or the defaults), each widened to what ``noise`` allows."""
    limits = {**DEFAULT_LIMITS, **card.gates}
    for key in limits:
        r = noise.ratio(key) if noise else None
        if r is not None:
            limits[key] = round(min(limits[key], 1 / r) if _BETTER[key] == "higher" else max(limits[key], r), 3)
    return limits


def pick_baseline(current: ResultsDoc, recorded: list[ResultsDoc]) -> ResultsDoc | None:
    """The newest recorded document made under the same conditions, if any."""
    same = [d for d in recorded if same_conditions(d, current)]
    return max(same, key=lambda d: d.provenance.built_at) if same else None


def gate(current: ResultsDoc, recorded: list[ResultsDoc], card: Card, noise: Noise | None = None) -> GateResult:
    """``noise``: this machine's measured between-build noise (:func:`measured_noise`), or None for the
    card's limits as they are."""
    base = pick_baseline(current, recorded)
    res = GateResult(current.model, base, noise=noise)
    if base is None:
        return res
    limits = limits_for(card, noise)
    now, then = headline_stats(current), headline_stats(base)
    for key, label, unit, better in METRICS:
        if key in now and key in then and then[key].median:
            a, b = now[key], then[key]
            res.comparisons.append(Comparison(key, label, unit, a.median, b.median, a.median / b.median,
                                              limits[key], better, a, b))
    res.accuracy = (accuracy_verdict(base), accuracy_verdict(current))
    return res
