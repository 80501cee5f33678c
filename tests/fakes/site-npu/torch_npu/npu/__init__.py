"""Fake ``torch_npu.npu`` (real: Ascend/pytorch ``torch_npu/npu/utils.py``).

The device this fake pretends to be is ``$FAKE_NPU_PROFILE``:

* ``a2``  (default): ``Ascend910B3``, SoC version 223 (torch_npu's SoC table,
  ``torch_npu/csrc/core/npu/NpuVariables.cpp``), 8 chips.  ``total_memory`` 62432 MiB is what
  ``_NPUDeviceProperties`` printed for an Ascend910B2C (a 64 GB HBM A2 chip) in a captured run
  (``_NPUDeviceProperties(name='Ascend910B2C', total_memory=62432MB)``); the B3 figure is assumed equal.
* ``a3``: ``Ascend910_9391``, SoC 250, 16 chips (2 per NPU); memory assumed as a2.
* ``310p``: ``Ascend310P3``, SoC 202, 4 chips, ``total_memory=44280.3MB`` (a captured
  ``_NPUDeviceProperties(name='Ascend310P3', total_memory=44280.3MB)``).
* ``910a``: ``Ascend910A``, SoC 102 (first generation).
* ``none``: no device.

``ASCEND_RT_VISIBLE_DEVICES`` limits the count, as the runtime does.
"""

import os
from types import SimpleNamespace

from .. import _record

MiB = 2**20
_PROFILES = {
    "a2": ("Ascend910B3", 223, 8, int(62432 * MiB)),
    "a3": ("Ascend910_9391", 250, 16, int(62432 * MiB)),
    "310p": ("Ascend310P3", 202, 4, int(44280.3 * MiB)),
    "910a": ("Ascend910A", 102, 8, int(30720 * MiB)),
    "none": ("", -1, 0, 0),
}


def _profile():
    return _PROFILES[os.environ.get("FAKE_NPU_PROFILE", "a2")]


def device_count() -> int:
    _record("npu.device_count")
    name, soc, n, mem = _profile()
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip().isdigit() and int(v) < n])
    return n


def _check(i) -> int:
    i = int(getattr(i, "index", i) or 0)
    if i < 0 or i >= device_count():
        raise AssertionError("Invalid device id")
    return i


def get_device_properties(device=None):
    i = _check(device)
    _record(f"npu.get_device_properties({i})")
    name, soc, n, mem = _profile()
    return SimpleNamespace(name=name, total_memory=mem)


def get_device_name(device=None) -> str:
    i = _check(device)
    _record(f"npu.get_device_name({i})")
    return _profile()[0]


def get_soc_version() -> int:
    _record("npu.get_soc_version")
    return _profile()[1]


def mem_get_info(device=None):
    i = _check(device)
    _record(f"npu.mem_get_info({i})")
    mem = _profile()[3]
    return mem - 3397 * MiB, mem


def is_available() -> bool:
    _record("npu.is_available")
    return device_count() > 0


def synchronize(device=None) -> None:
    _record("npu.synchronize")


def current_device() -> int:
    _record("npu.current_device")
    return 0
