"""Facts about the accelerators of this host, read without initialising one in this process.

Where each fact comes from:

* the CANN version: ``<toolkit>/latest/<arch>-linux/ascend_toolkit_install.info``, its
  ``version=`` line, as vllm-ascend's ``collect_env.py`` reads it (``ASCEND_TOOLKIT_HOME``,
  when set, is the ``latest`` directory);
* the NPU driver version and each chip's HBM: ``npu-smi info`` (its header and table);
* the NVIDIA driver, names and memory: ``nvidia-smi --query-gpu=... --format=csv,noheader``;
* the device family of a SoC number (:func:`npu_family`), by vllm-ascend's own ranges, and the
  family the installed vllm-ascend was built for (:func:`image_build_type`, read from
  ``vllm_ascend/_build_info.py`` as a file: nothing is imported);
* the names, memory and SoC version of the devices *this build may use* (after
  ``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES``): :func:`npu_probe` /
  :func:`cuda_probe`, which touch the device and therefore only ever run in a
  short-lived child process (:mod:`npu_tutorials.engine.isolated`), never in the build.

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
import importlib.util

from ..core.errors import TutorialError

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


# -- device families ---------------------------------------------------------------------

@dataclass(frozen=True)
class NpuFamily:
    """One device family vllm-ascend builds an image for.

    ``socs``: the SoC numbers (``torch_npu.npu.get_soc_version()``) of the family, inclusive, as
    vllm-ascend v0.23.0 ``vllm_ascend/utils.py`` ``check_ascend_device_type()`` classifies them (torch_npu's
    numbering: ``torch_npu/csrc/core/npu/NpuVariables.h``).  ``build_type``: ``__device_type__`` that
    vllm-ascend's ``setup.py`` (``gen_build_info``) writes into ``vllm_ascend/_build_info.py`` for the image's
    ``SOC_VERSION`` (``Dockerfile``, ``Dockerfile.a3``, ``Dockerfile.310p``, ``Dockerfile.a5``); the worker
    asserts the two agree.  ``tag_suffix``: the image tag's suffix (``docs/source/installation.md``'s image
    table).  ``chips``: the ``/dev/davinciN`` of one host (installation.md's docker line: Atlas A2
    ``davinci[0-7]``, A3 ``davinci[0-15]``, 950DT ``davinci[0-7]``; 300I DUO: the chips of its cards).
    ``chips_per_card``: A3 and 300I DUO cards carry two chips each (npu-smi lists Chip 0 and 1 per NPU);
    None where this project has no source for it.
    ``dtype``: what the engine serves in when the family has no bfloat16 (None: the card's dtype)."""

    key: str
    label: str
    socs: tuple[int, int]
    build_type: str
    tag_suffix: str
    chips: int | None
    chips_per_card: int | None
    dtype: str | None = None

    def has(self, soc: int) -> bool:
        return self.socs[0] <= soc <= self.socs[1]

    @property
    def series(self) -> str:
        """The ``hardware`` label of vllm-ascend's e2e accuracy configs ("Atlas A2 Series")."""
        return f"{self.label} Series"

    @property
    def runner_label(self) -> str:
        """The self-hosted runner label of a runner with this family's NPUs (the CI workflow)."""
        return f"ascend-{self.key}"


NPU_FAMILIES = (
    NpuFamily("a2", "Atlas A2", (220, 225), "A2", "", 8, 1),
    NpuFamily("a3", "Atlas A3", (250, 255), "A3", "-a3", 16, 2),
    NpuFamily("310p", "Atlas 300I DUO", (200, 205), "_310P", "-310p", None, 2, dtype="float16"),
    NpuFamily("a5", "Atlas 950DT", (260, 260), "A5", "-a5", 8, None),
)
FAMILY = {f.key: f for f in NPU_FAMILIES}
FIRST_GEN_910_SOCS = (100, 104)  # Ascend910PremiumA .. Ascend910B (NpuVariables.h): the first Ascend 910


def npu_family(soc: int | None, name: str = "") -> NpuFamily:
    """The family of SoC number ``soc``; one-line :class:`TutorialError` where vllm-ascend refuses the chip."""
    what = f"{name} (SoC {soc})" if name else f"SoC {soc}"
    if soc is None:
        raise TutorialError(f"{name or 'this NPU'}: torch_npu reported no SoC version, so its device family "
                            "(Atlas A2, A3, 300I DUO, 950DT) is unknown")
    for f in NPU_FAMILIES:
        if f.has(soc):
            return f
    if FIRST_GEN_910_SOCS[0] <= soc <= FIRST_GEN_910_SOCS[1]:
        raise TutorialError(f"{what} is a first-generation Ascend 910, which vllm-ascend does not support "
                            "(it supports Atlas A2, A3, 300I DUO and 950DT); build on one of those")
    ranges = ", ".join(f"{f.socs[0]}-{f.socs[1]} {f.label}" if f.socs[0] != f.socs[1] else f"{f.socs[0]} {f.label}"
                       for f in NPU_FAMILIES)
    raise TutorialError(f"{what} is not a chip vllm-ascend supports: its check_ascend_device_type() accepts "
                        f"SoC {ranges} and refuses the rest at start-up")


def image_build_type(package_dir: str | Path | None = None) -> str | None:
    """``__device_type__`` of the installed vllm-ascend (``A2``, ``A3``, ``_310P``, ``A5``), read from
    ``vllm_ascend/_build_info.py`` as text: nothing is imported, no device is touched.  Like vllm-ascend's
    ``_init_ascend_device_type``, a build info without it falls back to ``__soc_version__`` (310P or A2).
    None where vllm-ascend or its build info is not installed."""
    if package_dir is None:
        try:
            spec = importlib.util.find_spec("vllm_ascend")
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        package_dir = list(spec.submodule_search_locations)[0]
    try:
        text = (Path(package_dir) / "_build_info.py").read_text(errors="replace")
    except OSError:
        return None
    values = dict(re.findall(r"^(__\w+__)\s*=\s*['\"]([^'\"]*)['\"]", text, re.M))
    if "__device_type__" in values:
        return values["__device_type__"]
    return "_310P" if "310P" in values.get("__soc_version__", "ASCEND910B1").upper() else "A2"


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


# -- probes: these run in a child process only (npu_tutorials.engine.isolated.call) ---------------

def npu_probe() -> dict:
    """Visible NPUs as torch_npu reports them.  Initialises the device: call it through
    ``isolated.call("npu_tutorials.engine.devices:npu_probe")``, never in the build process."""
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


# -- vllm-ascend's image per family ----------------------------------------------------------------
# vllm-ascend's official images (vllm-project/vllm-ascend docs/source/installation.md, "Set up using Docker");
# the tag suffix per family: NPU_FAMILIES (installation.md's image table).
VLLM_ASCEND_IMAGE = "quay.io/ascend/vllm-ascend"
VLLM_ASCEND_TAG = "v0.23.0"  # the release facts.md pairs with vLLM 0.23.0, CANN 9.1.0 (its images: Python 3.12)
IMAGE_VARIANTS = {f.key: f.tag_suffix for f in NPU_FAMILIES}


def ascend_image(variant: str = "a2", tag: str = VLLM_ASCEND_TAG) -> str:
    """vllm-ascend's image for the family ``variant`` at ``tag``."""
    if variant not in IMAGE_VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(IMAGE_VARIANTS)}, not {variant!r}")
    return f"{VLLM_ASCEND_IMAGE}:{tag}{IMAGE_VARIANTS[variant]}"

