"""Process-group helpers shared by the server, the benchmark worker, isolated calls and the browser check.

Children start in a session of their own and die with the build (``PR_SET_PDEATHSIG``);
a group is alive while any of its processes is, and :func:`kill_group` stops it (every caller's one
killer); vLLM's ZeroMQ socket files go to a private directory that is removed afterwards (and swept
when its maker was killed).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path


def parent_death_signal(sig: int):
    """A ``preexec_fn`` (runs in the child between fork and exec): the child receives ``sig`` when the
    process that started it dies (PR_SET_PDEATHSIG), so a SIGKILLed build leaves no engine behind."""
    def preexec() -> None:
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)
        except OSError:
            pass
    return preexec


stop_with_parent = parent_death_signal(signal.SIGTERM)  # servers: a SIGTERM lets vLLM stop its workers
kill_with_parent = parent_death_signal(signal.SIGKILL)  # isolated children hold nothing worth a clean stop


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_group(proc: subprocess.Popen, grace: float = 5.0, *, leader_first: bool = False) -> None:
    """Stop the process group that ``proc`` leads (started with ``start_new_session``) and reap ``proc``.

    ``grace`` > 0: SIGTERM the group, and SIGKILL it unless every process of the group is gone ``grace``
    seconds later (then 10 s more for that).  ``leader_first`` (a vLLM server, whose leader stops its own
    workers): at each signal the leader gets the time to exit, and then the rest of the group as long
    again; otherwise the whole group gets it in all.

    ``grace`` == 0 (nothing in the group worth a clean stop: a benchmark worker, a browser): SIGKILL the
    group at once and reap the leader only.  The rest of the group is not waited for: orphaned, it is
    init's to reap, and where PID 1 reaps nothing its zombies would keep the group "alive".
    """
    pgid = proc.pid  # start_new_session: the child leads its own group
    stages = ([(signal.SIGTERM, grace)] if grace > 0 else []) + [(signal.SIGKILL, 10.0)]
    for sig, wait in stages:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        if grace <= 0:
            break  # the leader only: reaped below
        if leader_first:
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()
            if not group_alive(pgid):
                break
            time.sleep(0.05)
        if not group_alive(pgid):
            break
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def private_rpc_dir(env: dict[str, str]) -> str | None:
    """Point vLLM's ZeroMQ socket files at a fresh private directory, unless the caller chose one.

    vLLM (``vllm/utils/network_utils.py``, ``get_open_zmq_ipc_path``) binds ``ipc://$VLLM_RPC_BASE_PATH/<uuid4>``
    with ``VLLM_RPC_BASE_PATH`` defaulting to the temp dir, and never unlinks those files.  Sets the
    variable in ``env`` and returns the directory to remove afterwards, or None when ``env`` (or this
    process's environment) already names one: the caller's choice is the caller's to clean.
    """
    if env.get("VLLM_RPC_BASE_PATH") or os.environ.get("VLLM_RPC_BASE_PATH"):
        return None
    sweep_stale_rpc_dirs()
    path = tempfile.mkdtemp(prefix=f"{RPC_PREFIX}{os.getpid()}-")
    env["VLLM_RPC_BASE_PATH"] = path
    return path


RPC_PREFIX = "vllm-rpc-"


def sweep_stale_rpc_dirs(base: str | Path | None = None) -> list[Path]:
    """Remove the socket directories of builds that are gone (SIGKILLed: nothing of theirs could clean up).

    A directory is named ``vllm-rpc-<pid of the process that made it>-<random>``; it is stale once
    that process no longer exists (its servers died with it through ``PR_SET_PDEATHSIG``).
    Returns what was removed."""
    removed = []
    for d in Path(base or tempfile.gettempdir()).glob(f"{RPC_PREFIX}*-*"):
        try:
            pid = int(d.name[len(RPC_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # its maker still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def last_lines(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text`` (trailing blank space dropped)."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of the log file at ``path``, or ``(no log)``."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
