"""Regression gates: this build's document against the recorded one for the same conditions.

What fails the gate (``make check GATE=1``), one line each:

* a headline figure (:func:`headline.headline_figures`: throughput, median TTFT and TPOT, the
  roofline fraction) beyond its limit;
* a figure, an accuracy check or one of its metrics present in the baseline and missing now;
* an accuracy metric that passed in the baseline and fails now, or whose margin to its threshold
  shrank to less than half of the baseline's (accuracy is gated as numbers, not only the PASS bit);
* a recorded baseline or noise record that cannot be read.

**Limits.**  Each headline figure's limit is the card's (``gates``) or :data:`DEFAULT_LIMITS`, widened
to the between-run noise that ``scripts/repeatability.py`` measured for the same machine kind
(slug), model, profile and dtype from at least :data:`MIN_RUNS` independent runs (a fresh server
each): :data:`SAFETY` times the largest ratio between two of its runs.  That limit is the gate's
*resolution*: the smallest regression it catches.  Noise is discounted once, in the limit.

**Confirmation.**  A headline figure beyond its limit is measured again (``make check GATE=1
CONFIRM=2``: the page's gated steps twice more, a fresh server each, :func:`confirm`), and it fails
when the majority of the measurements (this build's and the reruns') are beyond the limit: the
median of three.  One slow moment of a shared host fails nothing; a regression that every server shows
fails as before.  Accuracy is deterministic and never re-measured.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..inputs.cards import Card
from .accuracy_gate import accuracy_regressions
from ..record.headline import METRICS, accuracy_verdict, headline_figures, same_conditions
from ..record.schema import ResultsDoc
from . import generations
from ..record.results import recorded_dir

DEFAULT_LIMITS = {"output_throughput": 0.95, "median_ttft_ms": 1.15, "median_tpot_ms": 1.15,
                  "roofline_fraction": 0.95}
MIN_RUNS = 5
# make check GATE=1 measures a figure beyond its limit this many times more; the majority decides
CONFIRM = 2
# The limit is this many times the largest log-ratio seen between two unchanged runs of the record, which
# gathers runs of several sessions (hosts) of the machine kind (scripts/repeatability.py --append): the
# margin beyond it covers the hosts none of its runs met.
SAFETY = 2.0
_BETTER = {key: better for key, _, _, better in METRICS}
_LABEL = {key: label for key, label, _, _ in METRICS}


# -- measured noise ----------------------------------------------------------------------
def decision_spread(values: list[float], better: str = "higher", confirm: int = 0) -> float:
    """How far the gate's decision statistic on unchanged runs falls behind one unchanged baseline run, at
    most (a log ratio): with ``confirm`` = 0 a single run against another, else the median of
    ``confirm + 1`` runs (the build's measurement and its confirmations) against a run outside them.  Only
    the direction that would read as a regression counts (below the baseline where higher is better).
    With too few runs for the median, the single-run spread."""
    def behind(m: float, b: float) -> float:
        return math.log(b / m) if better == "higher" else math.log(m / b)

    k = confirm + 1
    if confirm <= 0 or len(values) < k + 1:
        return max(behind(a, b) for a in values for b in values)
    dev = 0.0
    for idx in itertools.combinations(range(len(values)), k):
        m = statistics.median(values[i] for i in idx)
        dev = max(dev, max(behind(m, values[j]) for j in range(len(values)) if j not in idx))
    return dev


def noise_limit(values: list[float], better: str, confirm: int = 0) -> float:
    """The ratio limit that ``values`` (one figure from several unchanged runs) support for a decision on
    ``confirm + 1`` measurements: SAFETY times :func:`decision_spread`, as a ratio (<= 1 for
    higher-is-better, >= 1 otherwise)."""
    dev = decision_spread(values, better, confirm)
    return math.exp(-SAFETY * dev) if better == "higher" else math.exp(SAFETY * dev)


def leave_one_out_false_alarms(values: list[float], better: str, floor: float,
                               confirm: int = 0) -> tuple[int, int]:
    """(false alarms, comparisons): each set of ``confirm + 1`` runs held out in turn (one run where
    ``confirm`` is 0), limits from the others (never tighter than ``floor``), the held-out set's median
    compared against each other run as baseline."""
    k = confirm + 1 if confirm > 0 and len(values) >= confirm + 1 + MIN_RUNS else 1
    alarms = total = 0
    for idx in itertools.combinations(range(len(values)), k):
        rest = [v for i, v in enumerate(values) if i not in idx]
        lim = _wider(noise_limit(rest, better, confirm if k > 1 else 0), floor, better)
        m = statistics.median(values[i] for i in idx)
        for b in rest:
            total += 1
            r = m / b
            alarms += (r < lim) if better == "higher" else (r > lim)
    return alarms, total


def _wider(a: float, b: float, better: str) -> float:
    return min(a, b) if better == "higher" else max(a, b)


@dataclass
class Noise:
    """A repeatability record (``results/methods/repeatability-*.json``) that matches a document."""

    runs: int
    values: dict[str, list[float]]   # per gated metric: each run's headline median
    source: str
    confirm: int = 0                 # the decision these limits are for: on 1 + confirm measurements
    generations: frozenset[str] = frozenset()  # the CPU generations its runs recorded (runs may carry none)

    def limit(self, key: str) -> float | None:
        v = self.values.get(key)
        return noise_limit(v, _BETTER[key], self.confirm) if v and len(v) >= 2 and min(v) > 0 else None


class NoiseRecordError(ValueError):
    """A repeatability record the gate refuses (no machine slug, too few runs, unreadable)."""


def read_noise_record(path: Path) -> dict:
    """A repeatability record, validated: a machine slug, model, profile, dtype and >= MIN_RUNS runs of
    every gated figure.  Raises :class:`NoiseRecordError` with one line otherwise."""
    try:
        rec = json.loads(Path(path).read_text())
        p = rec["provenance"]
        values = rec["headline_runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NoiseRecordError(f"{path.name}: not a repeatability record this code reads ({exc})") from None
    for k in ("machine_slug", "model", "profile", "dtype"):
        if not p.get(k):
            raise NoiseRecordError(f"{path.name}: no {k} in its provenance: refused")
    short = {k: len(v) for k, v in values.items() if len(v) < MIN_RUNS}
    if short or not values:
        raise NoiseRecordError(f"{path.name}: fewer than {MIN_RUNS} independent runs ({short or 'none'}): refused")
    return rec


def earlier_runs(rec: dict, *, slug: str, model: str, profile: str, dtype: str, steps: list[str],
                 name: str = "the record") -> list[dict]:
    """The runs of a repeatability record that new runs may join (``scripts/repeatability.py --append``):
    only one of the same machine kind, model, profile, dtype and steps, else :class:`NoiseRecordError`.
    Runs recorded before runs carried their own date and commit get the record's."""
    p = rec.get("provenance", {})
    if (p.get("machine_slug"), p.get("model"), p.get("profile"), p.get("dtype")) != (slug, model, profile, dtype) \
            or rec.get("steps") != steps:
        raise NoiseRecordError(f"{name}: recorded under other conditions or steps ({p.get('machine_slug')}, "
                               f"{p.get('model')}, {p.get('profile')}, {p.get('dtype')}, {rec.get('steps')}); "
                               "not appending to it")
    return [{"date": p.get("date"), "commit": p.get("git_commit"), **r} for r in rec.get("runs", [])]


def measured_noise(doc: ResultsDoc, directory: Path | None = None, errors: list[str] | None = None,
                   confirm: int = 0) -> Noise | None:
    """The repeatability record for ``doc``'s machine slug, model, profile and engine dtype (where several
    match: one whose runs were on this CPU generation (for a document that recorded none: one with runs that
    recorded none), then one whose runs recorded none, then the newest),
    or None.  Records the gate refuses are named in ``errors``.  ``confirm``: the
    limits are for a decision on the build's measurement and this many confirmations (:func:`confirm`)."""
    prov = doc.provenance
    mine = prov.machine.cpu_generation
    found = None
    for path in sorted(((directory or recorded_dir()) / "methods").glob("repeatability-*.json")):
        try:
            rec = read_noise_record(path)
        except NoiseRecordError as exc:
            if errors is not None:
                errors.append(str(exc))
            continue
        p = rec["provenance"]
        if (p["machine_slug"], p["model"], p["profile"], p["dtype"]) != (prov.machine.slug, doc.model, prov.profile,
                                                                          prov.engine_dtype):
            continue
        rank = (generations.fit(mine, *generations.of_runs(rec.get("runs", []))), p.get("date", ""))
        if found is None or rank > found[0]:
            found = (rank, p, rec, path)
    if found is None:
        return None
    _rank, p, rec, path = found
    n = min(len(v) for v in rec["headline_runs"].values())
    return Noise(runs=n, values=rec["headline_runs"], confirm=confirm,
                 generations=generations.of_runs(rec.get("runs", []))[0],
                 source=f"results/methods/{path.name} ({str(p.get('date', ''))[:10]}, {n} runs"
                        + (f"; limits for the median of {confirm + 1} measurements" if confirm else "") + ")")


def limits_for(card: Card, noise: Noise | None = None) -> dict[str, float]:
    """Per headline figure: the card's limit (or the default), widened to what ``noise`` supports."""
    limits = {**DEFAULT_LIMITS, **card.gates}
    for key in limits:
        n = noise.limit(key) if noise else None
        if n is not None:
            limits[key] = round(_wider(limits[key], n, _BETTER[key]), 3)
    return limits


def resolution(card: Card, noise: Noise) -> dict[str, dict]:
    """Per gated figure of ``noise``: the gate's limit (its resolution: the smallest regression it catches),
    the card's own limit, and the leave-one-out false alarms (alarms, comparisons)."""
    limits, floors = limits_for(card, noise), limits_for(card)
    return {k: {"limit": limits[k], "card": floors[k],
                "false_alarms": leave_one_out_false_alarms(v, _BETTER[k], floors[k], noise.confirm)}
            for k, v in noise.values.items() if k in limits}


# -- the gate ----------------------------------------------------------------------------
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
    reruns: list[float] = field(default_factory=list)  # the ratios of the confirming measurements, if any

    def beyond(self, ratio: float) -> bool:
        return ratio < self.limit if self.better == "higher" else ratio > self.limit

    @property
    def regressed(self) -> bool:
        """Beyond the limit; where it was measured again, in the majority of the measurements."""
        ratios = [self.ratio, *self.reruns]
        return sum(self.beyond(r) for r in ratios) > len(ratios) // 2

    def rerun_text(self) -> str:
        """``""``, or ``"; measured again: 0.95, 0.97 (1 of 3 beyond the limit)"``."""
        if not self.reruns:
            return ""
        ratios = [self.ratio, *self.reruns]
        return (f"; measured again: {', '.join(f'{r:.3f}' for r in self.reruns)} "
                f"({sum(self.beyond(r) for r in ratios)} of {len(ratios)} beyond the limit)")


@dataclass
class GateResult:
    model: str
    baseline: ResultsDoc | None
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)       # headline figures of the baseline absent now
    accuracy: list[str] = field(default_factory=list)      # accuracy regressions, one line each
    verdicts: tuple[str, str] | None = None                 # (baseline, this build) accuracy verdicts
    noise: Noise | None = None
    errors: list[str] = field(default_factory=list)        # unreadable baselines or noise records
    host: str = ""                                          # where this build ran (device, CPU id)
    other_generation: str = ""                              # why speed was not compared (generations.other_generation)

    @property
    def regressions(self) -> list[str]:
        out = [f"{self.model}: {e}" for e in self.errors]
        b = self.baseline
        if b is None:
            return out
        where = (f"baseline {b.provenance.built_at} {b.provenance.git_commit[:12]} on {host_label(b)}"
                 + (f"; this build on {self.host}" if self.host else ""))
        for c in self.comparisons:
            if c.regressed:
                out.append(f"{self.model}: {c.label} regressed: {c.current:.4g} {c.unit} vs {c.baseline:.4g} "
                           f"(ratio {c.ratio:.3f}, limit {'>=' if c.better == 'higher' else '<='} {c.limit}{c.rerun_text()}); "
                           f"{where}")
        out += [f"{self.model}: {_LABEL[k]} is in the baseline and missing now; {where}" for k in self.missing]
        out += [f"{self.model}: {line}; {where}" for line in self.accuracy]
        return out

    @property
    def passed(self) -> bool:
        return not self.regressions

    @property
    def beyond(self) -> list[Comparison]:
        """The headline comparisons beyond their limits in this build's own measurement (what
        :func:`confirm` measures again)."""
        return [c for c in self.comparisons if c.beyond(c.ratio)]


def host_label(doc: ResultsDoc) -> str:
    """Where a document was measured, as the gate's lines name it: the device and, on x86, the CPU's
    family/model/stepping."""
    m = doc.provenance.machine
    return doc.provenance.device + (f", {m.cpu_id}" if m.cpu_id else "")


def pick_baseline(current: ResultsDoc, recorded: list[ResultsDoc]) -> ResultsDoc | None:
    """The recorded document made under the same conditions, if any: one of this CPU generation (or, for a
    build that recorded none, one that recorded none) before one that recorded none before one of another
    generation, then the newest."""
    same = [d for d in recorded if same_conditions(d, current)]
    mine = current.provenance.machine.cpu_generation

    def rank(d: ResultsDoc):
        g = d.provenance.machine.cpu_generation
        return generations.fit(mine, {g} if g else set(), not g), d.provenance.built_at

    return max(same, key=rank) if same else None


def gate(current: ResultsDoc, recorded: list[ResultsDoc], card: Card, noise: Noise | None = None,
         errors: list[str] | None = None) -> GateResult:
    """``noise``: this machine kind's measured between-run noise (:func:`measured_noise`), or None for the
    card's limits as they are; ``errors``: recorded files that could not be read (each fails the gate)."""
    base = pick_baseline(current, recorded)
    res = GateResult(current.model, base, noise=noise, errors=list(errors or []), host=host_label(current))
    if base is None:
        return res
    limits = limits_for(card, noise)
    now, then = headline_figures(current), headline_figures(base)
    res.other_generation = generations.other_generation(current, base, noise.generations if noise else frozenset())
    for key, label, unit, better in METRICS:
        if key in then and key not in now:
            res.missing.append(key)
        elif key in now and key in then and then[key].value and not res.other_generation:
            a, b = now[key].value, then[key].value
            res.comparisons.append(Comparison(key, label, unit, a, b, a / b, limits[key], better))
    res.accuracy = accuracy_regressions(current, base)
    res.verdicts = (accuracy_verdict(base), accuracy_verdict(current))
    return res


def confirm(result: GateResult, reruns: list[ResultsDoc]) -> GateResult:
    """``result`` with each headline comparison's ratio in every rerun (documents of the same gated steps,
    measured again on this machine against the same baseline and limits).  A figure then fails when the
    majority of its measurements are beyond the limit (:attr:`Comparison.regressed`)."""
    base = result.baseline
    if base is None or not reruns:
        return result
    then = headline_figures(base)
    for doc in reruns:
        now = headline_figures(doc)
        for c in result.comparisons:
            if c.key in now and then[c.key].value:
                c.reruns.append(now[c.key].value / then[c.key].value)
    return result
