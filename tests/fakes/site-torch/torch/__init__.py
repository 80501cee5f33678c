"""Fake ``torch`` for the *child* processes of the contract tests (never on the test process's path).

Only what this project's device probes call, with the real signatures:
``torch.ones(size, dtype=, device=)``, ``torch.float32``, ``Tensor.sum()``, ``Tensor.numel()``,
``torch.cuda.*`` (see ``cuda/__init__.py``) and ``torch.npu`` (set by torch_npu when imported).
Every tensor creation and reduction is recorded in ``$FAKE_DEVICE_CALL_LOG`` like torch_npu's calls.
"""

import os
import time

__version__ = "2.10.0"
float32 = "torch.float32"


def _record(what: str) -> None:
    log = os.environ.get("FAKE_DEVICE_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {what}\n")


class Tensor:
    def __init__(self, n: int, device: str):
        self._n, self.device = n, device

    def numel(self) -> int:
        return self._n

    def sum(self) -> "Tensor":
        _record(f"sum on {self.device}")
        time.sleep(0.001)  # the fake "reads" at a finite rate
        return Tensor(1, self.device)


def ones(size, dtype=None, device="cpu") -> Tensor:
    kind = str(device).split(":")[0]
    if kind == "cuda" and not cuda.is_available():
        raise RuntimeError("No CUDA GPUs are available")
    if kind == "npu" and not hasattr(__import__("torch"), "npu"):
        raise RuntimeError("Expected one of cpu, cuda, ... device type at start of device string: npu")
    _record(f"ones({size}) on {device}")
    return Tensor(int(size), str(device))


from . import cuda  # noqa: E402
