"""CPU generations in the regression gate: one CPU model name ("AMD EPYC" in a virtual machine) covers
several generations, and the machine kind (its slug) does not tell them apart, so the gate compares speed
within one generation only (:func:`other_generation`) and prefers records of this one (:func:`fit`)."""

from __future__ import annotations

from ..record.schema import ResultsDoc, generation_of


def of_runs(runs: list[dict]) -> tuple[frozenset[str], bool]:
    """The generations a repeatability record's runs name, and whether some of them named none."""
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


def other_generation(current: ResultsDoc, base: ResultsDoc, noise_generations: frozenset[str] = frozenset()) -> str:
    """``""``, or why this build's speed says nothing against ``base``.  Where this build, and the baseline
    or the runs of its noise record, each recorded a generation and they differ (seen: a family 26 EPYC
    served Qwen-1_8B-Chat's stand-in at 16.5-21 tok/s in 9 of 10 runs, a family 25 one at 12.7-13.6 in 10;
    palmyra-mini's at 24-29 and 19-20.5), its speed is not compared; a generation not recorded is not held
    against it."""
    cur = current.provenance.machine.cpu_generation
    if not cur:
        return ""
    theirs = set(noise_generations)
    base_gen = base.provenance.machine.cpu_generation
    if (base_gen and base_gen != cur) or (theirs and cur not in theirs):
        return (f"this build ran on {cur}, the baseline and its noise record on "
                f"{', '.join(sorted(theirs | ({base_gen} if base_gen else set())))}: another CPU generation")
    return ""
