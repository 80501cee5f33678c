"""Fake ``torch_npu`` for the contract tests.

Follows the real package, torch_npu 2.10.0.post4 (Ascend/pytorch tag ``v26.1.0-pytorch2.10.0``, whose
``version.txt`` says 2.10.0.post4; the ``v2.10.0`` branch has moved on to post5), where this project touches it:

* ``import torch_npu`` fails, as the real one does, with
  ``ImportError: libhccl.so: cannot open shared object file: No such file or directory`` unless
  CANN's ``set_env.sh`` was sourced (here: no ``LD_LIBRARY_PATH`` entry holds ``libhccl.so``).
  That is the error users report when set_env.sh was not sourced.
* ``torch_npu.npu``: ``device_count()``, ``get_device_properties(i)`` (``.name``, ``.total_memory``
  in bytes), ``get_device_name(i)``, ``mem_get_info(i)`` (``(free, total)`` bytes) and ``is_available()``,
  defined in ``torch_npu/npu/__init__.py``; ``get_soc_version()`` (an ``int``), defined in
  ``torch_npu/npu/_backends.py``; ``synchronize()``, ``set_device()`` and ``current_device()``, defined in
  ``torch_npu/npu/utils.py``; ``torch_npu/npu/__init__.py`` re-exports the last two files' functions, so all
  of them are ``torch_npu.npu.<name>``; see ``npu/__init__.py`` here for the lines.
* When ``torch`` is already imported, ``torch.npu`` becomes ``torch_npu.npu`` (the real package
  patches torch the same way).

Every import and call is appended to ``$FAKE_DEVICE_CALL_LOG`` as ``<pid> <what>``, so a test can
tell which process touched the "device".
"""

import os
import sys


def _record(what: str) -> None:
    log = os.environ.get("FAKE_DEVICE_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {what}\n")


_record("import torch_npu")
if not any(os.path.isfile(os.path.join(d, "libhccl.so"))
           for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d):
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

__version__ = "2.10.0.post4"

from . import npu  # noqa: E402

if "torch" in sys.modules:
    sys.modules["torch"].npu = npu
