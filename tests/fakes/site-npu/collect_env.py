"""Fake of vllm-ascend's ``collect_env.py``, beside the fake ``vllm_ascend`` package as the real one is beside
the package in the official image's editable checkout (vllm-ascend v0.23.0 ``Dockerfile``:
``COPY . /vllm-workspace/vllm-ascend/`` then ``pip install -e /vllm-workspace/vllm-ascend/``).

It keeps what the real script (v0.23.0 ``collect_env.py``) does at the boundary this project sees: ``main()``
prints ``Collecting environment information...`` and then ``env_info_fmt`` (lines 355-388), whose NPU
section is ``npu-smi info``'s output (``get_npu_info``, line 292) and whose CANN section is the toolkit's
``ascend_toolkit_install.info`` for the CPU's architecture (``get_cann_info``, line 296; the real one reads it
under ``/usr/local/Ascend``, the fake under ``$TUTORIAL_ASCEND_ROOT`` as the other fakes do).  Its
``ENV Variables`` keep ``ASCEND_`` / ``ATB_`` / ``TORCH`` / ``PYTORCH`` names and drop those with secret-like
terms (``get_env_vars``, line 304).  ``$FAKE_COLLECT_ENV=fail`` ends it as the real one ends where ``import
torch`` raises what its ``except`` does not catch (torch_npu's autoload without CANN's environment:
``RuntimeError``); ``sleep`` makes it hang, with a child process, for the timeout tests.
"""

import os
import platform
import subprocess
import sys
import time
from pathlib import Path


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip() or "Could not collect"
    except (OSError, subprocess.TimeoutExpired):
        return "Could not collect"


def env_vars():
    secret = ("secret", "token", "api", "access", "password")
    keep = ("TORCH", "PYTORCH", "ASCEND_", "ATB_")
    return "\n".join(f"{k}={v}" for k, v in os.environ.items()
                     if k.startswith(keep) and not any(t in k.lower() for t in secret))


def main():
    mode = os.environ.get("FAKE_COLLECT_ENV", "")
    print("Collecting environment information...", flush=True)
    if mode == "fail":
        raise RuntimeError("Failed to load the backend extension: torch_npu. You can disable extension "
                           "auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0.")
    if mode == "sleep":
        subprocess.Popen(["sleep", "300"])
        time.sleep(300)
    root = Path(os.environ.get("TUTORIAL_ASCEND_ROOT") or "/usr/local/Ascend")
    info = root / "ascend-toolkit" / "latest" / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    cann = info.read_text().strip() if info.is_file() else "Could not collect"
    print(f"""PyTorch version: 2.10.0
Is debug build: False

OS: Ubuntu 22.04.5 LTS ({platform.machine()})
Python version: {sys.version.split()[0]}

vLLM Version: 0.23.0
vLLM Ascend Version: 0.23.0

ENV Variables:
{env_vars()}

NPU:
{run(["npu-smi", "info"])}

CANN:
{cann}""")


if __name__ == "__main__":
    main()
