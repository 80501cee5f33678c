"""Fake ``torch.cuda`` (real: pytorch ``torch/cuda/__init__.py``): ``device_count()``,
``is_available()``, ``get_device_properties(i)`` (``.name``, ``.total_memory`` bytes),
``get_device_name(i)``, ``synchronize(device=None)``.

The card is ``$FAKE_CUDA_PROFILE`` (``h100``: ``NVIDIA H100 80GB HBM3``, 81559 MiB, the figures
nvidia-smi printed in a captured run; ``rtx4090``: ``NVIDIA GeForce RTX 4090``, 24564 MiB) and
``$FAKE_CUDA_COUNT`` of them (default 2); ``CUDA_VISIBLE_DEVICES`` limits the count, as CUDA does.
"""

import os
from types import SimpleNamespace

from .. import _record

MiB = 2**20
_PROFILES = {"h100": ("NVIDIA H100 80GB HBM3", 81559 * MiB), "rtx4090": ("NVIDIA GeForce RTX 4090", 24564 * MiB)}


def device_count() -> int:
    _record("cuda.device_count")
    n = int(os.environ.get("FAKE_CUDA_COUNT", "2"))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip().isdigit() and int(v) < n])
    return n


def is_available() -> bool:
    return device_count() > 0


def get_device_properties(device) -> SimpleNamespace:
    i = int(getattr(device, "index", device) or 0)
    if i >= device_count():
        raise AssertionError("Invalid device id")
    _record(f"cuda.get_device_properties({i})")
    name, mem = _PROFILES[os.environ.get("FAKE_CUDA_PROFILE", "h100")]
    return SimpleNamespace(name=name, total_memory=mem)


def get_device_name(device=None) -> str:
    return get_device_properties(device or 0).name


def synchronize(device=None) -> None:
    _record("cuda.synchronize")
