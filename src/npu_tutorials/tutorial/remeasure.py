"""A model's gated figures measured again, apart from any page.

* :func:`measure_gated`: one independent run of the steps its page runs for them
  (:func:`npu_tutorials.record.headline.gated_steps`), a fresh ``Tutorial`` and server, results in a scratch
  folder.  ``scripts/repeatability.py`` runs it to measure the noise, and each side of the paired gate
  (``make check GATE=1 PAIRED=<ref>``) runs it in its own checkout.
* :func:`measure_paired`: two configurations of those steps, A and B, measured alternately on this host
  (:mod:`npu_tutorials.measure.paired`), for ``make compare``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

from ..core.errors import TutorialError
from ..engine.backend import interpreter_versions
from ..engine.container import image_versions
from ..inputs.cards import load_card
from ..measure.paired import interleaved_sides, paired_ratios
from ..record.headline import METRICS, gated_steps, headline_figures
from ..record.results import git_commit, now_utc
from ..record.schema import ResultsDoc
from ..record.schema_paired import Comparison, Side
from .facade import Tutorial, detach


@contextlib.contextmanager
def scratch_env(**values: str):
    """Set environment variables for the block and put back what was there."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def measure_gated(key: str) -> ResultsDoc:
    """One independent run of card ``key``'s gated steps; its results document.  Everything it started
    is stopped, after success or error; the build's own results are untouched."""
    steps = gated_steps(load_card(key))
    with tempfile.TemporaryDirectory(prefix="remeasure-") as work, scratch_env(
            TUTORIAL_RESULTS_DIR=str(Path(work) / "results")):
        tut = Tutorial(key)
        try:
            tut.prepare_weights()
            tut.start_server(checks=False)  # the gated steps compare with no reference
            for step in steps:
                getattr(tut, step)()
            tut.finish()
        except BaseException:
            tut.stop()
            raise
    return tut.doc


KEPT_MIN = 2  # a comparison cut short by a failing round is kept from this many completed rounds on


def _side_tutorial(key: str, side: Side, work: Path, fresh: bool, python: str | None = None) -> Tutorial:
    """Side ``side``'s tutorial: its flags after the page's, its environment added to the build's, its servers
    run by ``python`` (default: this build's interpreter) or in its image, its working files in a folder of
    its own; its server started now unless each round starts one (``fresh``)."""
    with scratch_env(TUTORIAL_ARTIFACTS_DIR=str(work / side.label / "artifacts"),
                     TUTORIAL_RESULTS_DIR=str(work / side.label / "results")):
        tut = detach(Tutorial(key))  # the other side's Tutorial must not stop this one
    try:
        tut.state.device_env.update(side.env)
        tut.state.servers.python, tut.state.servers.image = python, side.image
        tut.prepare_weights()
        tut.start_server(extra=list(side.flags), now=not fresh, checks=False)
    except BaseException:
        tut.stop()
        raise
    return tut


SERVERS = ("fresh", "shared")


def measure_paired(key: str, a: Side, b: Side, k: int = 6, servers: str = "fresh",
                   control: bool = False, after_round=None,
                   pythons: dict[str, str] | None = None, warmup: bool = True) -> Comparison:
    """Card ``key``'s gated steps under configurations ``a`` and ``b``, ``k`` rounds, alternately on this host.

    Each round runs the gated steps once per side, the side going first alternating, with prompts of that
    round's own; the figures of a round are the page's headline figures.  ``servers``: ``fresh`` (default),
    each side starts a server of its own in every round and stops it after, so one server runs at a time
    (device memory as the page has it) and the rounds sample what differs between two starts of one
    configuration too; ``shared``: both servers start first and serve every round (cheaper; a difference
    between those two servers' starts then counts as the configurations' difference).  ``control``: side A
    runs a second time in every round, as C, the three in the six orders in turn, and the document keeps the
    ratios C/A (two identical sides: what the host's noise alone calls a change).  ``after_round(order,
    rounds)``: called after each round with what it measured so far.  ``warmup``: one run of side A first,
    discarded (a session's first server start and benchmark run on cold caches; measured here, a session's
    first run gave 29 % less throughput than the same configuration's next one).  A round that fails (a server
    or benchmark error) after :data:`KEPT_MIN` rounds or more ends the comparison with the rounds completed before
    it, the document's ``stopped`` saying so; sooner, the error is raised.  Everything started is stopped
    afterwards, after success, error or Ctrl-C."""
    if servers not in SERVERS:
        raise ValueError(f"servers must be one of {', '.join(SERVERS)}, not {servers!r}")
    if a.label == b.label:
        raise ValueError(f"the two sides need distinct labels (both are {a.label!r})")
    card = load_card(key)
    steps = gated_steps(card)
    fresh = servers == "fresh"
    t0 = time.monotonic()
    stopped = None
    tuts: dict[str, Tutorial] = {}
    with tempfile.TemporaryDirectory(prefix="compare-") as work:
        try:
            sides = {"A": a, "B": b} | ({"C": a.model_copy(update={"label": "C"})} if control else {})
            py = dict(pythons or {})
            if control and "A" in py:
                py["C"] = py["A"]  # the control is side A, served alike
            for name, side in sides.items():
                tuts[name] = _side_tutorial(key, side, Path(work), fresh, py.get(name))

            def measure(name: str):
                def one_round(i: int) -> dict[str, float]:
                    tut = tuts[name]
                    tut.state.round = i + 1  # round 0 is a page's: its prompts stay the page's own
                    for step in steps:
                        getattr(tut, step)()
                    if fresh:
                        tut.state.servers.stop()
                    return {fk: f.value for fk, f in headline_figures(tut.doc).items()}
                return one_round

            if warmup:
                measure("A")(-1)  # discarded: a session's first server start and benchmark run cold
            seen: dict = {}

            def keep(order_so_far: list[str], rounds_so_far: dict) -> None:  # what a failing round leaves
                seen["order"], seen["rounds"] = list(order_so_far), {s: list(r) for s, r in rounds_so_far.items()}
                if after_round:
                    after_round(order_so_far, rounds_so_far)

            try:
                order, rounds = interleaved_sides({name: measure(name) for name in sides}, k, keep)
            except TutorialError as exc:  # a round failed: the rounds completed before it are still a comparison
                if len(seen.get("order", [])) < KEPT_MIN:
                    raise
                order, rounds = seen["order"], seen["rounds"]
                why = (str(exc).strip() or type(exc).__name__).splitlines()[0]
                stopped = f"after round {len(order)} of {k}: {why}"
        finally:
            for tut in tuts.values():
                tut.stop()
    ref = tuts["A"].doc.provenance
    for side, name in ((a, "A"), (b, "B")):
        side.versions = (interpreter_versions(pythons[name]) if name in (pythons or {})
                         else image_versions(side.image) if side.image
                         else dict(tuts[name].doc.provenance.machine.versions))
    ra, rb, rc = rounds["A"], rounds["B"], rounds.get("C", [])
    return Comparison(model=key, built_at=now_utc(), git_commit=git_commit(), machine=ref.machine,
                      weights=ref.weights, profile=ref.profile, steps=steps, servers=servers, a=a, b=b,
                      order=order, rounds_a=ra, rounds_b=rb, ratios=paired_ratios(ra, rb, METRICS),
                      rounds_c=rc, control=paired_ratios(ra, rc, METRICS) if rc else [], warmup=warmup,
                      stopped=stopped, wall_time_s=round(time.monotonic() - t0, 1))
