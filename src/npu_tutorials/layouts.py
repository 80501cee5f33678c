"""Checkpoint layouts: which tensors a checkpoint holds and which tokenizer files it ships.

``qwen2`` is the Hugging Face ``Qwen2ForCausalLM`` layout (Qwen2.5, palmyra-mini).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from .errors import TutorialError


class Layout:
    name: str
    parameters: Callable[[dict[str, Any]], list]

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        raise NotImplementedError


class Qwen2Layout(Layout):
    name = "qwen2"

    @staticmethod
    def parameters(config):
        from .standin import qwen2_parameters

        return qwen2_parameters(config)

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        from .tokenizer import write_qwen2_tokenizer

        tok_cfg = json.loads((out_dir / "tokenizer_config.json").read_text())
        write_qwen2_tokenizer(out_dir, tok_cfg)


LAYOUTS: dict[str, Layout] = {"Qwen2ForCausalLM": Qwen2Layout()}


def for_config(config: dict[str, Any]) -> Layout:
    arch = (config.get("architectures") or [None])[0]
    if arch not in LAYOUTS:
        raise TutorialError(f"no stand-in layout for architecture {arch!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[arch]
