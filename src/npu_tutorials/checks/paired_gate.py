"""``make check GATE=1 PAIRED=<ref>``: the regression gate as a paired comparison of two checkouts' code.

The recorded-baseline gate sets this build's figures against a document recorded at another hour, maybe on
another host, and its limits have to be as wide as that drift.  Here the gated steps of ``<ref>`` (a git
worktree of it) and of this checkout run alternately on this host, ``k`` rounds, a fresh server per side and
round: each side's round is one independent process running that checkout's own
``npu_tutorials.tutorial.remeasure.measure_gated`` (the same interpreter and packages, only the code
differs), and each headline figure is judged by its ratio this/ref within the rounds
(:mod:`npu_tutorials.measure.paired`).

A figure fails when the interval lies wholly on its worse side (the change is real, at the interval's
coverage) and the median change is at least :data:`MIN_CHANGE` (it matters), and still does after ``k`` more
rounds, judged over all ``2k`` (the gate measures again before it fails, as the recorded-baseline gate does:
an unchanged pair is called worse in ``k = 6`` rounds about once in 64 per figure, and in both halves far more
rarely).  A smaller real change, or one the interval cannot tell from none, is a note.  A ref whose code does
not run in this environment (its requirements differ) is a note too: there is nothing to compare with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..core.errors import TutorialError
from ..measure.paired import ROUNDS_95, interleaved, paired_ratios
from ..record.headline import METRICS, gated_steps
from ..record.results import git_commit, now_utc, read_doc
from ..record.schema_paired import Comparison, Side
from ..inputs.cards import load_card

K = ROUNDS_95  # rounds per side
MIN_CHANGE = 0.05  # a figure fails only when its median change is at least this much
MARK = "PAIRED-FIGURES "
SNIPPET = ("import json, sys\n"
           "from npu_tutorials.tutorial.remeasure import measure_gated\n"
           "from npu_tutorials.record.headline import headline_figures\n"
           "doc = measure_gated(sys.argv[1])\n"
           f"print({MARK!r} + json.dumps({{k: f.value for k, f in headline_figures(doc).items()}}), flush=True)\n")


def resolve(ref: str, repo: Path) -> str:
    """The commit ``ref`` names in ``repo``, or one clear error."""
    p = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise TutorialError(f"PAIRED={ref}: no such commit in {repo.name} (a shallow clone may lack it: "
                            "git fetch --deepen, or name a commit it has)")
    return p.stdout.strip()


def worktree(repo: Path, commit: str, where: Path) -> Path:
    """A detached git worktree of ``commit`` at ``where`` (removed by :func:`drop_worktree`)."""
    p = subprocess.run(["git", "worktree", "add", "--detach", "--force", str(where), commit], cwd=repo,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise TutorialError(f"PAIRED: git worktree add {commit[:12]} failed: {p.stderr.strip().splitlines()[-1:]}")
    return where


def drop_worktree(repo: Path, where: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=repo, capture_output=True)


class RefUnusable(TutorialError):
    """The ref's code failed where this checkout's had not been asked to: nothing to compare with."""


def run_side(checkout: Path, key: str, scratch: Path, timeout: float = 3600) -> dict[str, float]:
    """One round of one side: ``checkout``'s own code measures ``key``'s gated steps in a process of its own
    (its server started and stopped there); the headline figures it prints."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "TUTORIAL_RESULTS_DIR": str(scratch / "results"),
           "TUTORIAL_ARTIFACTS_DIR": str(scratch / "artifacts")}
    env.pop("TUTORIAL_ONLY", None)
    try:
        p = subprocess.run([sys.executable, "-c", SNIPPET, key], cwd=checkout, env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TutorialError(f"PAIRED: {checkout.name}'s run of {key} did not finish within {timeout:.0f} s") from None
    line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith(MARK)), None)
    if p.returncode != 0 or line is None:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-5:])
        raise TutorialError(f"PAIRED: {checkout.name}'s run of {key} failed (exit {p.returncode}):\n{tail}")
    return json.loads(line[len(MARK):])


def compare_checkouts(key: str, ref_dir: Path, ref_commit: str, this_dir: Path, machine, k: int = K,
                      run=run_side) -> Comparison:
    """``key``'s gated steps, the ref's code (A) against this checkout's (B), ``k`` rounds alternately, a fresh
    process and server per side and round, after one run of the ref's, discarded (cold caches)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="paired-gate-") as work:
        def side(d: Path, name: str):
            def one(i: int) -> dict[str, float]:
                try:
                    return run(d, key, Path(work) / f"{name}{i}")
                except TutorialError as exc:
                    if name == "A":
                        raise RefUnusable(str(exc)) from None
                    raise
            return one

        side(ref_dir, "A")(-1)  # a warm-up run, discarded: the session's first runs on cold caches
        order, ra, rb = interleaved(side(ref_dir, "A"), side(this_dir, "B"), k)
    card = load_card(key)
    this = git_commit()
    return Comparison(model=key, built_at=now_utc(), git_commit=this, machine=machine, profile="(each side's default)",
                      steps=gated_steps(card), servers="fresh",
                      a=Side(label=f"ref {ref_commit[:12]}", code=ref_commit),
                      b=Side(label=f"this checkout {(this or '?')[:12]}", code=this), order=order, rounds_a=ra,
                      rounds_b=rb, ratios=paired_ratios(ra, rb, METRICS), warmup=True,
                      wall_time_s=round(time.monotonic() - t0, 1))


def extended(first: Comparison, more: Comparison) -> Comparison:
    """Two comparisons of the same sides, one after the other, as one: all rounds, judged again."""
    ra, rb = first.rounds_a + more.rounds_a, first.rounds_b + more.rounds_b
    return first.model_copy(update={"order": first.order + more.order, "rounds_a": ra, "rounds_b": rb,
                                    "ratios": paired_ratios(ra, rb, METRICS),
                                    "wall_time_s": round((first.wall_time_s or 0) + (more.wall_time_s or 0), 1)})


def judge(doc: Comparison) -> tuple[list[str], list[str]]:
    """(notes, regressions): a regression per figure whose interval lies wholly on its worse side with a
    median change of at least :data:`MIN_CHANGE`."""
    notes, bad = [], []
    for r in doc.ratios:
        change = r.median - 1
        worse = r.verdict == "B worse"
        text = (f"{doc.model}: {r.label} this/ref {r.median:.3f} ({100 * change:+.1f} %), interval "
                f"{r.low:.3f}-{r.high:.3f} ({100 * r.confidence:.1f} %, {r.k} paired rounds, a fresh server each)")
        if worse and abs(change) >= MIN_CHANGE:
            bad.append(f"{text}: slower than {doc.a.label}")
        elif worse:
            notes.append(f"{text}: slower, by less than {100 * MIN_CHANGE:.0f} %")
        else:
            notes.append(f"{text}: {r.verdict.replace('B ', 'this checkout ')}")
    return notes, bad


def paired_gate_lines(build: Path, repo: Path, ref: str, models: list[str], k: int = K,
                      out_dir: Path | None = None, compare=compare_checkouts) -> tuple[list[str], list[str]]:
    """``make check GATE=1 PAIRED=<ref>`` for ``models`` (those this build executed): (notes, regressions),
    a figure called worse measured ``k`` rounds more before it counts; each comparison's document written to
    ``out_dir`` (default ``<build>/compare``)."""
    commit = resolve(ref, repo)
    notes, bad = [], []
    out_dir = out_dir or build / "compare"
    with tempfile.TemporaryDirectory(prefix="paired-ref-") as tmp:
        ref_dir = worktree(repo, commit, Path(tmp) / "ref")
        try:
            for key in models:
                path = build / "results" / f"{key}.json"
                machine = read_doc(path).provenance.machine if path.is_file() else None
                if machine is None:
                    notes.append(f"{key}: no results in this build, nothing to compare")
                    continue
                try:
                    doc = compare(key, ref_dir, commit, repo, machine, k)
                    n, b = judge(doc)
                    if b:  # measured again before it fails
                        notes += [f"{key}: called slower in {k} rounds, measuring {k} more: {x}" for x in b]
                        doc = extended(doc, compare(key, ref_dir, commit, repo, machine, k))
                        n, b = judge(doc)
                except RefUnusable as exc:
                    notes.append(f"{key}: the code of {commit[:12]} did not run in this environment, nothing to "
                                 f"compare with: {exc}")
                    continue
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / f"paired-gate-{key}.json").write_text(doc.model_dump_json(indent=1))
                notes += n + [f"{key}: {len(doc.order)} rounds per side took {doc.wall_time_s:.0f} s"]
                bad += b
        finally:
            drop_worktree(repo, ref_dir)
    return notes, bad
