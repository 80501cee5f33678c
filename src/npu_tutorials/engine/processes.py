"""Process-group helpers shared by the server, the benchmark worker and isolated calls.

Children start in a session of their own and die with the build (``PR_SET_PDEATHSIG``);
a group is alive while any of its processes is; vLLM's ZeroMQ socket files go to a private
directory that is removed afterwards (and swept when its maker was killed).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
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
