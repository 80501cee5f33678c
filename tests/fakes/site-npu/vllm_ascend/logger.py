"""Fake ``vllm_ascend.logger``: what importing the real one sets off, without vLLM or torch.

The real module (vllm-project/vllm-ascend v0.23.0, ``vllm_ascend/logger.py``) starts with
``from vllm import envs`` (line 18) and ``from vllm.logging_utils import ColoredFormatter, NewLineFormatter``
(line 19).  Importing the ``vllm`` package runs its ``__init__``, which imports ``vllm.env_override`` first
(vLLM 0.23.0 sdist from PyPI: ``vllm/__init__.py:14``), and that module imports torch (``vllm/env_override.py:87``).
``import torch`` loads every ``torch.backends`` entry point unless ``TORCH_DEVICE_BACKEND_AUTOLOAD`` is not
``1`` (``torch/__init__.py``: ``_is_device_backend_autoload_enabled`` / ``_import_device_backends``), and
torch_npu registers one (Ascend/pytorch, tag v26.1.0-pytorch2.10.0 = torch_npu 2.10.0.post4, ``setup.py:774-775``:
``'torch.backends': ['torch_npu = torch_npu:_autoload']``).  So ``import vllm_ascend`` imports torch_npu, and
without CANN's environment fails with torch's wrapper around torch_npu's ``ImportError``: ``RuntimeError:
Failed to load the backend extension: torch_npu. You can disable extension auto-loading with
TORCH_DEVICE_BACKEND_AUTOLOAD=0.``  With the autoload off it imports (torch's CPU part needs no CANN).

This fake does the part of that chain this project can observe: it records ``import vllm -> torch`` in
``$FAKE_DEVICE_CALL_LOG`` and, with the autoload on, imports the fake torch_npu, raising torch's error if that
fails.  It imports neither vLLM nor torch (the test interpreters may lack them, or carry a CPU vLLM that is not
the image's).
"""

import os
import sys


def _record(what: str) -> None:
    log = os.environ.get("FAKE_DEVICE_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {what}\n")


_record("import vllm -> torch")
if os.getenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "1" and "torch_npu" not in sys.modules:
    try:
        import torch_npu  # noqa: F401  (torch's autoload of the torch.backends entry point)
    except Exception as err:
        raise RuntimeError("Failed to load the backend extension: torch_npu. "
                           "You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.") from err
