"""Fake ``torch_npu.npu``.  Real: torch_npu 2.10.0.post4, Ascend/pytorch tag ``v26.1.0-pytorch2.10.0`` (a release
of the v2.10.0 line), where ``torch_npu/npu/__init__.py`` re-exports ``_backends.py`` and ``utils.py``.  Where each
function this fake offers is defined there (file: name and line):

* ``torch_npu/npu/__init__.py``: ``is_available`` 357, ``_parse_visible_devices`` 363, ``device_count`` 437,
  ``get_device_name`` 480, ``get_device_properties`` 487, ``mem_get_info`` 495 (``device_count`` calls
  ``_device_count_ascend_hal``, 408);
* ``torch_npu/npu/_backends.py``: ``get_soc_version`` 96;
* ``torch_npu/npu/utils.py``: ``synchronize`` 62, ``set_device`` 88, ``current_device`` 94.

SoC numbers from ``torch_npu/csrc/core/npu/NpuVariables.h``.

The device this fake pretends to be is ``$FAKE_NPU_PROFILE``:

* ``a2``  (default): ``Ascend910B3``, SoC version 223, 8 chips.  ``total_memory`` 62432 MiB is what
  ``_NPUDeviceProperties`` printed for an Ascend910B2C (a 64 GB HBM A2 chip) in a captured run
  (``_NPUDeviceProperties(name='Ascend910B2C', total_memory=62432MB)``); the B3 figure is assumed equal.
* ``a3``: ``Ascend910_9391``, SoC 250, 16 chips (2 per NPU); memory assumed as a2.
* ``a3_9363``: ``Ascend910_9363``, SoC 256: outside vllm-ascend's A3 range (250-255).  256 is the number the
  v2.10.0 branch's ``NpuVariables.h`` gives it (added after 2.10.0.post4, in 2.10.0.post5); post4's table ends
  at ``Ascend910_9362`` (255) and does not list it.
* ``310p``: ``Ascend310P3``, SoC 202, 4 chips, ``total_memory=44280.3MB`` (a captured
  ``_NPUDeviceProperties(name='Ascend310P3', total_memory=44280.3MB)``).
* ``a5``: SoC 260 (``Ascend950``: torch_npu takes every SoC name starting with it); the name
  ``Ascend950DT_9582`` follows ``SOC_VERSION=ascend950dt_9582`` of vllm-ascend's ``Dockerfile.a5`` (assumed).
* ``910a``: ``Ascend910A``, SoC 102 (first generation).
* ``none``: no device.

As in the real module:

* ``device_count()`` honours ``ASCEND_RT_VISIBLE_DEVICES`` the way ``_device_count_ascend_hal`` does: the ids
  up to the first character that is neither a digit nor a comma; an empty entry ends the list; ids must be
  in ascending order ("`rts` need ascending order": otherwise the count is 0); the list is cut at the first
  id the host does not have.
* ``get_device_name(i)`` checks ``i`` and then returns ``_npu_getDeviceName()``: the *current* device's name,
  whatever ``i`` is; ``get_device_properties(i)`` is the one that describes device ``i``.
"""

import os
from types import SimpleNamespace

from .. import _record

MiB = 2**20
_PROFILES = {
    "a2": ("Ascend910B3", 223, 8, int(62432 * MiB)),
    "a3": ("Ascend910_9391", 250, 16, int(62432 * MiB)),
    "a3_9363": ("Ascend910_9363", 256, 16, int(62432 * MiB)),
    "310p": ("Ascend310P3", 202, 4, int(44280.3 * MiB)),
    "a5": ("Ascend950DT_9582", 260, 8, int(62432 * MiB)),
    "910a": ("Ascend910A", 102, 8, int(30720 * MiB)),
    "none": ("", -1, 0, 0),
}


def _profile():
    return _PROFILES[os.environ.get("FAKE_NPU_PROFILE", "a2")]


def _parse_visible_devices() -> list:
    """torch_npu's ``_parse_visible_devices``: unset -> every id; else the leading ``[0-9,]*`` part."""
    var = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if var is None:
        return list(range(64))
    head = ""
    for c in var:
        if not (c.isdigit() or c == ","):
            break
        head += c
    out = []
    for elem in head.split(",") if head else []:
        if not elem:
            return out
        out.append(int(elem))
    return out


def device_count() -> int:
    _record("npu.device_count")
    n = _profile()[2]
    visible = _parse_visible_devices()
    if not visible or n == 0:
        return 0
    for idx, val in enumerate(visible):
        if idx > 0 and val <= visible[idx - 1]:  # `rts` need ascending order
            return 0
        if val >= n:
            return idx
    return len(visible)


def _check(device) -> int:
    i = _current if device is None else int(getattr(device, "index", device))
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
    return _current_name()  # torch_npu._C._npu_getDeviceName(): the current device's, not device i's


def _current_name() -> str:
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


_current = 0


def set_device(device) -> None:
    global _current
    _current = _check(device)
    _record(f"npu.set_device({_current})")


def current_device() -> int:
    _record("npu.current_device")
    return _current
