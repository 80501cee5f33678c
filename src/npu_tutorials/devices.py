"""Facts about the accelerators of this host, read without initialising one in this process.

Where each fact comes from:

* the CANN version: ``<toolkit>/latest/<arch>-linux/ascend_toolkit_install.info``, its
  ``version=`` line, as vllm-ascend's ``collect_env.py`` reads it (``ASCEND_TOOLKIT_HOME``,
  when set, is the ``latest`` directory);
* the NPU driver version and each chip's HBM: ``npu-smi info`` (its header and table);
* the NVIDIA driver, names and memory: ``nvidia-smi --query-gpu=... --format=csv,noheader``;
* the names, memory and SoC version of the devices *this build may use* (after
  ``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES``): :func:`npu_probe` /
  :func:`cuda_probe`, which touch the device and therefore only ever run in a
  short-lived child process (:mod:`npu_tutorials.isolated`), never in the build.

This module imports nothing heavy: the child imports ``torch_npu`` / ``torch`` itself.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ASCEND_ROOT_ENV = "TUTORIAL_ASCEND_ROOT"  # where CANN is installed (default /usr/local/Ascend)
DEV_DIR_ENV = "TUTORIAL_DEV_DIR"  # where device nodes live (default /dev; tests point it elsewhere)
VISIBLE_DEVICES_VAR = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}


def ascend_root() -> Path:
    return Path(os.environ.get(ASCEND_ROOT_ENV) or "/usr/local/Ascend")


def looks_like_ascend_host() -> str | None:
    """Why this host looks like an Ascend host (``npu-smi`` on PATH, ``/dev/davinci*``), or None."""
    if shutil.which("npu-smi"):
        return "npu-smi on PATH"
    dev = os.environ.get(DEV_DIR_ENV) or "/dev"
    if glob.glob(os.path.join(dev, "davinci[0-9]*")):
        return f"{dev}/davinci* present"
    return None


# -- CANN --------------------------------------------------------------------------------

def cann_install_info_paths(arch: str | None = None) -> list[Path]:
    """Where vllm-ascend's collect_env.py looks for the toolkit's install info, in order."""
    arch = arch or platform.machine()
    homes = []
    if os.environ.get("ASCEND_TOOLKIT_HOME"):
        homes.append(Path(os.environ["ASCEND_TOOLKIT_HOME"]))
    homes.append(ascend_root() / "ascend-toolkit" / "latest")
    return [h / f"{arch}-linux" / "ascend_toolkit_install.info" for h in homes]


def parse_install_info(text: str) -> dict[str, str]:
    """``key=value`` lines of ``ascend_toolkit_install.info`` (package_name, version, innerversion, ...)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def cann_version(arch: str | None = None) -> str | None:
    for p in cann_install_info_paths(arch):
        try:
            version = parse_install_info(p.read_text(errors="replace")).get("version")
        except OSError:
            continue
        if version:
            return version
    return None


# -- npu-smi -----------------------------------------------------------------------------

@dataclass(frozen=True)
class NpuSmiChip:
    npu: int
    chip: int
    name: str  # npu-smi's short name: "910B3" on A2, "Ascend910" on A3, "310P3" on 300I
    bus_id: str
    memory_used_mib: int | None
    memory_total_mib: int | None  # HBM on 910-class chips


@dataclass(frozen=True)
class NpuSmiInfo:
    version: str | None  # the header's "Version:": the driver (npu-smi ships with it)
    chips: list[NpuSmiChip] = field(default_factory=list)


_BUS = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)\s*$")


def parse_npu_smi_info(text: str) -> NpuSmiInfo:
    """Parse ``npu-smi info``: the header's version and one entry per chip.

    Each chip takes two table rows: ``| NPU  Name | Health | Power Temp Hugepages |`` then
    ``| Chip [Phy-ID] | Bus-Id | AICore Memory-Usage HBM-Usage |``; the process table that
    follows is ignored.
    """
    m = re.search(r"Version:\s*(\S+)", text)
    version = m.group(1) if m else None
    chips: list[NpuSmiChip] = []
    pending: tuple[int, str] | None = None
    for line in text.splitlines():
        if "Process id" in line:
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3:
            continue
        first = cells[0].split()
        if len(first) >= 2 and first[0].isdigit() and not _BUS.match(cells[1]) and not first[1].isdigit():
            pending = (int(first[0]), first[1])  # "0     910B3" | "OK" | ...
        elif pending and first and first[0].isdigit() and _BUS.match(cells[1]):
            pair = _PAIR.search(cells[2])
            chips.append(NpuSmiChip(npu=pending[0], chip=int(first[0]), name=pending[1], bus_id=cells[1],
                                    memory_used_mib=int(pair.group(1)) if pair else None,
                                    memory_total_mib=int(pair.group(2)) if pair else None))
            pending = None
    return NpuSmiInfo(version=version, chips=chips)


def read_npu_smi(timeout: float = 60.0) -> NpuSmiInfo | None:
    """``npu-smi info`` of this host, parsed; None where it is absent or fails."""
    exe = shutil.which("npu-smi")
    if not exe:
        return None
    try:
        p = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return parse_npu_smi_info(p.stdout)


# -- nvidia-smi --------------------------------------------------------------------------

NVIDIA_SMI_QUERY = ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]


@dataclass(frozen=True)
class NvidiaSmiGpu:
    name: str
    memory_total_mib: int | None
    driver: str


def parse_nvidia_smi_query(text: str) -> list[NvidiaSmiGpu]:
    """Lines like ``NVIDIA H100 80GB HBM3, 81559 MiB, 580.126.20``."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0]:
            continue
        mem = re.match(r"(\d+)\s*MiB", parts[1])
        gpus.append(NvidiaSmiGpu(parts[0], int(mem.group(1)) if mem else None, parts[2]))
    return gpus


def read_nvidia_smi(timeout: float = 60.0) -> list[NvidiaSmiGpu] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        p = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return parse_nvidia_smi_query(p.stdout)


# -- probes: these run in a child process only (npu_tutorials.isolated.call) ---------------

def npu_probe() -> dict:
    """Visible NPUs as torch_npu reports them.  Initialises the device: call it through
    ``isolated.call("npu_tutorials.devices:npu_probe")``, never in the build process."""
    import torch_npu  # noqa: F401  (torch_npu.npu.* below)

    npu = torch_npu.npu
    count = int(npu.device_count())
    devices = []
    for i in range(count):
        props = npu.get_device_properties(i)  # _NPUDeviceProperties(name=..., total_memory=bytes)
        devices.append({"index": i, "name": str(props.name), "memory_bytes": int(props.total_memory)})
    soc = int(npu.get_soc_version()) if count else None
    return {"count": count, "devices": devices, "soc_version": soc}


def cuda_probe() -> dict:
    """Visible CUDA devices as torch reports them (child process only, like :func:`npu_probe`)."""
    import torch

    count = int(torch.cuda.device_count())
    devices = []
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": str(props.name), "memory_bytes": int(props.total_memory)})
    return {"count": count, "devices": devices, "soc_version": None}
