"""Convert a first-generation QWen checkpoint (QWenLMHeadModel) to the Qwen2 layout.

  python scripts/convert_qwen.py SRC DST

SRC is a Qwen-1_8B-Chat-style folder (config.json, qwen.tiktoken, *.safetensors);
DST must not exist.  The result is served by any vLLM without --trust-remote-code.
"""

import argparse
from pathlib import Path

from ..core.errors import TutorialError
from ..inputs.convert import convert_checkpoint
from . import command


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    a = ap.parse_args()
    if a.dst.exists():
        raise TutorialError(f"{a.dst} already exists; give a new folder")

    out = convert_checkpoint(a.src, a.dst)
    print(f"converted {a.src} -> {out} (Qwen2ForCausalLM; serve it without --trust-remote-code)")
    return 0


main = command(run)  # scripts/convert_qwen.py and npu-tutorials-convert-qwen
