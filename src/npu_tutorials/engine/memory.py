"""The memory a vLLM server holds, measured from outside it (nothing here initialises a device).

* host: the resident memory of the server's whole process group (API server, engine core, workers), each
  process's proportional share (``Pss``, shared pages counted once) summed, sampled while it runs, its peak kept;
* NPU: the memory ``npu-smi info`` lists for the server's processes (its process table: ``| NPU Chip |
  Process id | Process name | Process memory(MB) |``, and from npu-smi 26 ``| Process id in container |``; in a
  container, see :func:`npu_process_mib`);
* GPU: ``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`` for its processes;
* the KV cache vLLM reports in the server's log: ``<device> KV cache size: N tokens`` (vLLM's
  ``kv_cache_utils``, every platform), and its memory (``Available KV cache memory: X GiB`` on a GPU,
  ``Explicitly set (X/Y) GiB for KV cache`` on a CPU).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
NVIDIA_APPS = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def group_pids(pgid: int, proc: Path = PROC) -> list[int]:
    """The processes of process group ``pgid`` (field 5 of ``/proc/<pid>/stat``)."""
    out = []
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[2] == str(pgid):
            out.append(int(d.name))
    return sorted(out)


def rss_mib(pids, proc: Path = PROC) -> float:
    """The resident memory of ``pids`` together, in MiB: each one's proportional share (``Pss`` of
    ``/proc/<pid>/smaps_rollup``: a page shared by the group's processes, such as the libraries every worker maps,
    counts once), else its ``VmRSS`` (``/proc/<pid>/status``); a process gone meanwhile counts 0."""
    total_kib = 0
    for pid in pids:
        d = proc / str(pid)
        try:
            m = re.search(r"^Pss:\s+(\d+)\s+kB", (d / "smaps_rollup").read_text(), re.M)
        except OSError:
            m = None
        if m is None:
            try:
                m = re.search(r"^VmRSS:\s+(\d+)\s+kB", (d / "status").read_text(), re.M)
            except OSError:
                continue
        total_kib += int(m.group(1)) if m else 0
    return total_kib / 1024


def npu_process_mib(text: str, pids) -> float | None:
    """The memory ``npu-smi info``'s process table lists for ``pids`` (MB as it says); None where it lists
    none of them (no process, or only PIDs of another PID namespace).

    The columns are read from the table's header.  A row is one of ``pids``' when its ``Process id`` is, or its
    ``Process id in container``: the column npu-smi 26 adds (vllm-ascend issue #12980, npu-smi 26.0.rc2; ``NA``
    for a process in no container).  In a container, ``Process id`` is whatever PID the driver reports: the
    container's own where it converts them (hicann/driver@ef377e9
    ``src/sdk_driver/dms/devmng/drv_devmng/drv_devmng_host/ascend910/devdrv_resource_info.c:250-269``,
    ``devdrv_trans_ordinary_container_pid``, for an ordinary container), else the host's (DCMI's
    ``dcmi_get_device_resource_info``: "the process ID on the host"; a driver that does not convert, a privileged
    container).  A host PID cannot be mapped back from inside the container: ``NSpid:`` in
    ``/proc/<pid>/status`` lists the PIDs from the namespace of that ``/proc`` mount inwards (Linux
    ``fs/proc/array.c``, ``task_state()``: ``for (g = ns->level; g <= pid->level; g++)``), so the container's
    ``/proc`` shows only the container's PID (checked with ``unshare --pid --mount-proc``).  What works is the
    container column where npu-smi prints it, and a job container that shares the host's PID namespace
    (``--pid=host``, as ``.github/workflows/ascend-site.yml`` starts it), whose PIDs are the host's."""
    want, total, found, cols = set(pids), 0.0, False, None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "Process id" in cells and "Process memory(MB)" in cells:
            cols = cells  # NPU Chip | Process id | Process name | Process memory(MB) [| Process id in container]
            continue
        if cols is None or len(cells) != len(cols):
            continue  # the chip table, a separator, "No running processes found in NPU n"
        row = dict(zip(cols, cells))
        ids = {row.get("Process id", ""), row.get("Process id in container", "")}
        mem = row.get("Process memory(MB)", "")
        if mem.isdigit() and any(i.isdigit() and int(i) in want for i in ids):
            total += float(mem)
            found = True
    return total if found else None


def nvidia_process_mib(text: str, pids) -> float | None:
    """The memory ``nvidia-smi --query-compute-apps=pid,used_memory`` lists for ``pids`` (MiB)."""
    want, total, found = set(pids), 0.0, False
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in want and parts[1].isdigit():
            total += float(parts[1])
            found = True
    return total if found else None


# The command that lists the device memory each process holds, per accelerator backend
DEVICE_MEMORY = {"npu": ("npu-smi", ["info"], npu_process_mib), "cuda": ("nvidia-smi", NVIDIA_APPS, nvidia_process_mib)}


def read_device_mib(backend: str, pids, run=subprocess.run) -> tuple[float | None, str]:
    """(the device memory ``pids`` hold, the command that said so) on ``backend``; (None, '') on a CPU or where
    the command is missing or fails."""
    exe, args, parse = DEVICE_MEMORY.get(backend, (None, [], None))
    path = shutil.which(exe) if exe else None
    if not path:
        return None, ""
    try:
        p = run([path, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, ""
    if p.returncode != 0:
        return None, ""
    return parse(p.stdout, pids), " ".join([exe, *args])


_KV_TOKENS = re.compile(r"\b(\w+)(?: \+ host)? KV cache size: ([\d,]+) tokens")
_KV_GIB = (re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
           re.compile(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache"))


def kv_cache_from_log(text: str) -> tuple[int | None, float | None]:
    """(KV cache tokens, KV cache GiB) as the server's log reports them (the last report of each)."""
    tokens = [int(m.group(2).replace(",", "")) for m in _KV_TOKENS.finditer(text)]
    gib = [float(m.group(1)) for rx in _KV_GIB for m in rx.finditer(text)]
    return (tokens[-1] if tokens else None), (gib[-1] if gib else None)


@dataclass
class MemoryPeak:
    host_mib: float = 0.0
    device_mib: float | None = None
    device_source: str = ""
    samples: int = 0
    device_samples: int = 0


class MemorySampler:
    """Samples a server's process group while it runs: host RSS every ``every`` seconds, device memory every
    ``device_every`` (its command takes a while), keeping the peaks."""

    def __init__(self, pgid: int, backend: str, every: float = 0.5, device_every: float = 5.0,
                 proc: Path = PROC, run=subprocess.run):
        self.pgid, self.backend, self.every, self.device_every = pgid, backend, every, device_every
        self.proc, self.run = proc, run
        self.peak = MemoryPeak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"memory-{pgid}")

    def start(self) -> "MemorySampler":
        self._thread.start()
        return self

    def sample(self, device: bool = False) -> None:
        pids = group_pids(self.pgid, self.proc)
        if not pids:
            return
        self.peak.host_mib = max(self.peak.host_mib, rss_mib(pids, self.proc))
        self.peak.samples += 1
        if device and self.backend in DEVICE_MEMORY:
            mib, source = read_device_mib(self.backend, pids, self.run)
            if mib is not None:
                self.peak.device_mib = max(self.peak.device_mib or 0.0, mib)
                self.peak.device_source = source
                self.peak.device_samples += 1

    def _loop(self) -> None:
        last_device = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            device = now - last_device >= self.device_every
            try:
                self.sample(device)
            except OSError:
                pass
            if device:
                last_device = now
            self._stop.wait(self.every)

    def stop(self) -> MemoryPeak:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=35)
        return self.peak
