"""Between-run noise: how far apart unchanged runs of a page's gated steps land on one machine kind.

``scripts/repeatability.py`` records it (``results/methods/repeatability-*.json``: each run's headline medians, a
fresh server each); the methods page shows it, and ``scripts/vs_site.py`` widens its ordinary band by it
(:func:`limits_for`).  Speed is judged by paired rounds (:mod:`npu_tutorials.checks.paired_gate`), never by a
limit against a record.

One CPU model name ("AMD EPYC" in a virtual machine) covers several generations that the machine kind (its slug)
does not tell apart, so a record whose runs were on this build's generation is preferred (:func:`fit`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..inputs.cards import Card
from ..record.headline import METRICS
from ..record.results import recorded_dir
from ..record.schema import ResultsDoc, generation_of

DEFAULT_LIMITS = {"output_throughput": 0.95, "median_ttft_ms": 1.15, "median_tpot_ms": 1.15,
                  "roofline_fraction": 0.95}
MIN_RUNS = 5
# A limit is this many times the largest log-ratio seen between two unchanged runs of the record, which gathers
# runs of several sessions (hosts) of the machine kind (scripts/repeatability.py --append): the margin beyond it
# covers the hosts none of its runs met.
SAFETY = 2.0
BETTER = {key: better for key, _, _, better in METRICS}


def noise_limit(values: list[float], better: str) -> float:
    """The ratio one run may fall behind another unchanged one that ``values`` (one figure from several
    unchanged runs) support: :data:`SAFETY` times the largest log-ratio between two of them, in the direction
    that reads as slower (<= 1 where higher is better, >= 1 otherwise)."""
    dev = max(math.log(b / a) if better == "higher" else math.log(a / b) for a in values for b in values)
    return math.exp(-SAFETY * dev) if better == "higher" else math.exp(SAFETY * dev)


def _wider(a: float, b: float, better: str) -> float:
    return min(a, b) if better == "higher" else max(a, b)


def of_runs(runs: list[dict]) -> tuple[frozenset[str], bool]:
    """The CPU generations a repeatability record's runs name, and whether some of them named none."""
    return (frozenset(g for g in (generation_of(r.get("cpu_id")) for r in runs) if g),
            any(not r.get("cpu_id") for r in runs))


def fit(mine: str | None, theirs: set[str] | frozenset[str], unrecorded: bool) -> int:
    """How well a record fits a build of CPU generation ``mine`` (None: not recorded), from the generations
    the record's runs name (``theirs``) and whether some of them named none (``unrecorded``).  2: the same
    generation, or neither recorded one; 1: the record named none; 0: another generation."""
    if not mine:
        return 2 if unrecorded or not theirs else 1
    if mine in theirs:
        return 2
    return 1 if not theirs else 0


@dataclass
class Noise:
    """A repeatability record (``results/methods/repeatability-*.json``) that matches a document."""

    runs: int
    values: dict[str, list[float]]   # per gated metric: each run's headline median
    source: str

    def limit(self, key: str) -> float | None:
        v = self.values.get(key)
        return noise_limit(v, BETTER[key]) if v and len(v) >= 2 and min(v) > 0 else None


class NoiseRecordError(ValueError):
    """A repeatability record this code refuses (no machine slug, too few runs, unreadable)."""


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


def measured_noise(doc: ResultsDoc, directory: Path | None = None, errors: list[str] | None = None) -> Noise | None:
    """The repeatability record for ``doc``'s machine slug, model, profile and engine dtype (where several
    match: one whose runs were on this CPU generation (for a document that recorded none: one with runs that
    recorded none), then one whose runs recorded none, then the newest), or None.  Records this code refuses
    are named in ``errors``."""
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
        rank = (fit(mine, *of_runs(rec.get("runs", []))), p.get("date", ""))
        if found is None or rank > found[0]:
            found = (rank, p, rec, path)
    if found is None:
        return None
    _rank, p, rec, path = found
    n = min(len(v) for v in rec["headline_runs"].values())
    return Noise(runs=n, values=rec["headline_runs"],
                 source=f"results/methods/{path.name} ({str(p.get('date', ''))[:10]}, {n} runs)")


def limits_for(card: Card, noise: Noise | None = None) -> dict[str, float]:
    """Per headline figure: the card's limit (``gates``, or :data:`DEFAULT_LIMITS`), widened to what ``noise``
    supports."""
    limits = {**DEFAULT_LIMITS, **card.gates}
    for key in limits:
        n = noise.limit(key) if noise else None
        if n is not None:
            limits[key] = round(_wider(limits[key], n, BETTER[key]), 3)
    return limits
