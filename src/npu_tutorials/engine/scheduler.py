"""Concurrent tutorials on one runner: each on a disjoint set of devices, on ports of its own.

sphinx-gallery runs the tutorials in parallel worker processes (its ``parallel``
option; ``TUTORIAL_JOBS=N``, or one job per device group on a multi-device
host).  Each tutorial leases the devices its card asks for from the pool this
build was given (``TUTORIAL_DEVICE_POOL``, e.g. ``0,1,2,3``) and runs its
server and device steps with only those visible; its ports are leased the same
way.  Leases are ``flock`` locks in a folder shared by the workers, so they
vanish with a process that dies.  On a 2-core CPU the default stays sequential.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..core.errors import TutorialError
from .platform import platform_for
from .server import free_port


def lease_dir() -> Path:
    d = Path(os.environ.get("TUTORIAL_LEASE_DIR") or Path(os.environ.get("TUTORIAL_BUILD_DIR", "_build")) / "leases")
    d.mkdir(parents=True, exist_ok=True)
    return d


def device_pool() -> list[str]:
    return [x for x in os.environ.get("TUTORIAL_DEVICE_POOL", "").replace(" ", "").split(",") if x]


def jobs_for(backend: str, devices: int, per_tutorial: int, tutorials: int) -> int:
    """How many tutorials run at once: ``TUTORIAL_JOBS``, else one per device group on a
    multi-device accelerator host, else 1 (sequential; always on a CPU build)."""
    value = os.environ.get("TUTORIAL_JOBS", "").strip()
    if value:
        try:
            jobs = int(value)
        except ValueError:
            raise TutorialError(f"TUTORIAL_JOBS={value!r} is not a number") from None
        if jobs < 1:
            raise TutorialError(f"TUTORIAL_JOBS={jobs} must be at least 1")
        return min(jobs, max(1, tutorials))
    if not platform_for(backend).accelerator:
        return 1
    return max(1, min(tutorials, devices // max(1, per_tutorial)))


class Lease:
    """Locks held on a set of names (device ids or ports) until :meth:`release`."""

    def __init__(self, names: list[str], fds: list[int]):
        self.names, self._fds = names, fds

    def release(self) -> None:
        for fd in self._fds:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _try_lock(name: str) -> int | None:
    fd = os.open(lease_dir() / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lease_devices(n: int, pool: list[str] | None = None, *, timeout: float = 6 * 3600,
                  on_wait=None) -> Lease | None:
    """Lease ``n`` devices of the pool (waiting while others hold them); None when there is no pool."""
    pool = device_pool() if pool is None else pool
    if not pool:
        return None
    if n > len(pool):
        raise TutorialError(f"a tutorial needs {n} devices, the pool of this build has {len(pool)}: {','.join(pool)}")
    deadline = time.monotonic() + timeout
    while True:
        got: list[tuple[str, int]] = []
        for dev in pool:
            fd = _try_lock(f"device-{dev}")
            if fd is not None:
                got.append((dev, fd))
                if len(got) == n:
                    return Lease([d for d, _ in got], [f for _, f in got])
        Lease([], [f for _, f in got]).release()  # not enough free: give back and wait
        if time.monotonic() > deadline:
            raise TutorialError(f"no {n} free devices in the pool {','.join(pool)} for {timeout:.0f} s")
        if on_wait is not None:
            on_wait()
        time.sleep(1.0)


def lease_port(host: str = "127.0.0.1") -> tuple[int, Lease]:
    """A free port no other tutorial of this build holds."""
    for _ in range(200):
        port = free_port(host)
        fd = _try_lock(f"port-{port}")
        if fd is not None:
            return port, Lease([str(port)], [fd])
    raise TutorialError("no free port could be leased")
