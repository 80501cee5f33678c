"""Memory bandwidth of the device this build ran on: measured, with a vendor figure beside it
only where the device name matches a table entry exactly.

The measurement reads a 1 GiB fp32 tensor with ``torch.sum`` (best of 5, after a warm-up)
on the device itself: on an NPU or a GPU in a child process (:mod:`npu_tutorials.engine.isolated`)
so the build process never initialises the device; on the CPU in this process, as before.

Vendor figures are listed only where a datasheet could be cited.  No authoritative figure per
Ascend 910B variant was found (third-party numbers disagree), so the Ascend table is empty
and an NPU page shows the measured bandwidth alone.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import asdict, dataclass

from . import isolated
from .platform import platform_for

GB = 1e9

_H100 = "NVIDIA H100 Tensor Core GPU datasheet (GPU memory bandwidth, H100 SXM / H100 PCIe)"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)"
_A100 = ("NVIDIA A100 Tensor Core GPU datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/"
         "Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)")

# Exact device names (as torch / nvidia-smi report them) -> (bytes/s, source).
NOMINAL_BANDWIDTH: dict[str, tuple[float, str]] = {
    "NVIDIA H100 80GB HBM3": (3.35e12, f"H100 SXM, 3.35 TB/s: {_H100}"),
    "NVIDIA H100 PCIe": (2.0e12, f"H100 PCIe, 2 TB/s: {_H100}"),
    "NVIDIA H200": (4.8e12, f"H200 SXM, 4.8 TB/s: {_H200}"),
    "NVIDIA A100-SXM4-80GB": (2.039e12, f"A100 80GB SXM, 2,039 GB/s: {_A100}"),
    "NVIDIA A100 80GB PCIe": (1.935e12, f"A100 80GB PCIe, 1,935 GB/s: {_A100}"),
    "NVIDIA A100-SXM4-40GB": (1.555e12, f"A100 40GB SXM, 1,555 GB/s: {_A100}"),
    "NVIDIA A100-PCIE-40GB": (1.555e12, f"A100 40GB PCIe, 1,555 GB/s: {_A100}"),
}
# Ascend: none.  No citable per-variant datasheet figure (see the module docstring).
NOMINAL_BANDWIDTH_ASCEND: dict[str, tuple[float, str]] = {}


@dataclass(frozen=True)
class Bandwidth:
    measured_bytes_per_s: float
    how: str  # how it was measured
    nominal_bytes_per_s: float | None = None  # vendor figure, only for an exact name match
    nominal_source: str | None = None

    def text(self) -> str:
        """One table cell: the measured figure, and the vendor figure where there is one."""
        out = f"{self.measured_bytes_per_s / GB:.1f} GB/s measured ({self.how})"
        if self.nominal_bytes_per_s:
            out += f"; nominal (vendor figure): {self.nominal_bytes_per_s / GB:.1f} GB/s, {self.nominal_source}"
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def nominal(device_name: str) -> tuple[float, str] | None:
    """The vendor figure for exactly this device name, or None."""
    name = device_name.strip()
    return NOMINAL_BANDWIDTH.get(name) or NOMINAL_BANDWIDTH_ASCEND.get(name)


def probe(device: str = "cpu", gib: float = 1.0, repeats: int = 5) -> float:
    """Read bandwidth (bytes/s) of ``device`` ("cpu", "cuda:0", "npu:0"): the best of ``repeats``
    ``sum``s over a ``gib`` GiB fp32 tensor there.  On an accelerator this initialises it: run it
    through :func:`measure` (a child process), not in the build process."""
    import torch

    kind = device.split(":")[0]
    for module in platform_for(kind).preload:  # torch_npu registers the npu device and torch.npu
        importlib.import_module(module)
    sync = {"cuda": lambda: torch.cuda.synchronize(), "npu": lambda: torch.npu.synchronize()}.get(kind, lambda: None)
    x = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32, device=device)
    x.sum()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        sync()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best


def measure(backend: str, device_name: str, *, gib: float = 1.0, repeats: int = 5,
            timeout: float = 600.0, env: dict[str, str] | None = None) -> Bandwidth:
    """The device's read bandwidth, measured now, with the vendor figure where the name matches exactly."""
    how = f"torch sum over {gib:g} GiB fp32, best of {repeats}"
    plat = platform_for(backend)
    if not plat.accelerator:
        measured = probe("cpu", gib, repeats)
        how += ", in this build"
    else:
        device = f"{plat.torch_device}:0"
        measured = float(isolated.call("npu_tutorials.engine.bandwidth:probe", device, gib, repeats, timeout=timeout,
                                       env=env, what=f"the {device} bandwidth probe"))
        how += f", on {device} ({device_name}) in a separate process"
    nom = nominal(device_name) if plat.accelerator else None
    return Bandwidth(measured, how, nom[0] if nom else None, nom[1] if nom else None)
