"""The recorded-baseline gate: this build's document against the recorded one for the same conditions.

What fails it (``make check GATE=1``), one line each:

* a headline figure (:func:`headline.headline_figures`: throughput, median TTFT and TPOT, the roofline fraction),
  an accuracy check or one of its metrics present in the baseline and missing now;
* an accuracy metric that passed in the baseline and fails now, or whose margin to its threshold shrank to less
  than half of the baseline's (accuracy is gated as numbers, not only the PASS bit);
* a recorded baseline that cannot be read.

Speed is not judged here.  A recorded document was measured by other code on another host (hosts of one machine
kind differ by more than one session's runs show: a CI host served palmyra-mini at 0.87 of its baseline with code
that did not touch the engine), so "slower" is judged one way only: paired rounds of two checkouts, alternately
on one host (:mod:`npu_tutorials.checks.paired_gate`, ``make check GATE=1 PAIRED=<ref>``).  The gate's notes give
each headline figure's ratio to the record, as information.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..inputs.cards import Card
from .accuracy_gate import accuracy_regressions
from ..record.headline import METRICS, accuracy_verdict, headline_figures, same_conditions
from ..record.schema import ResultsDoc
from .noise import fit

_LABEL = {key: label for key, label, _, _ in METRICS}


@dataclass
class GateResult:
    model: str
    baseline: ResultsDoc | None
    ratios: dict[str, float] = field(default_factory=dict)   # headline figure: this build / the baseline (not judged)
    missing: list[str] = field(default_factory=list)       # headline figures of the baseline absent now
    accuracy: list[str] = field(default_factory=list)      # accuracy regressions, one line each
    verdicts: tuple[str, str] | None = None                 # (baseline, this build) accuracy verdicts
    errors: list[str] = field(default_factory=list)        # unreadable baselines
    host: str = ""                                          # where this build ran (device, CPU id)

    @property
    def regressions(self) -> list[str]:
        out = [f"{self.model}: {e}" for e in self.errors]
        b = self.baseline
        if b is None:
            return out
        where = (f"baseline {b.provenance.built_at} {b.provenance.git_commit[:12]} on {host_label(b)}"
                 + (f"; this build on {self.host}" if self.host else ""))
        out += [f"{self.model}: {_LABEL[k]} is in the baseline and missing now; {where}" for k in self.missing]
        out += [f"{self.model}: {line}; {where}" for line in self.accuracy]
        return out

    @property
    def passed(self) -> bool:
        return not self.regressions

    def ratio_text(self) -> str:
        """``throughput 0.93, median TTFT 1.04, ...``: this build's headline figures over the baseline's."""
        return ", ".join(f"{_LABEL[k]} {r:.3f}" for k, r in self.ratios.items())


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
        return fit(mine, {g} if g else set(), not g), d.provenance.built_at

    return max(same, key=rank) if same else None


def gate(current: ResultsDoc, recorded: list[ResultsDoc], errors: list[str] | None = None) -> GateResult:
    """``errors``: recorded files that could not be read (each fails the gate)."""
    base = pick_baseline(current, recorded)
    res = GateResult(current.model, base, errors=list(errors or []), host=host_label(current))
    if base is None:
        return res
    now, then = headline_figures(current), headline_figures(base)
    for key, _label, _unit, _better in METRICS:
        if key in then and key not in now:
            res.missing.append(key)
        elif key in now and key in then and then[key].value:
            res.ratios[key] = now[key].value / then[key].value
    res.accuracy = accuracy_regressions(current, base)
    res.verdicts = (accuracy_verdict(base), accuracy_verdict(current))
    return res
