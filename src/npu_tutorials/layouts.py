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


class QWenLayout(Layout):
    """First-generation QWen (``QWenLMHeadModel``): fused c_attn, w1/w2 MLP, tiktoken tokenizer."""

    name = "qwen"

    @staticmethod
    def parameters(config):
        return qwen_parameters(config)

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        import shutil

        from .tokenizer import tiktoken_file

        shutil.copyfile(tiktoken_file(), out_dir / "qwen.tiktoken")


def qwen_parameters(cfg: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, kind) of a first-generation QWen checkpoint, in draw order."""
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    proj = cfg["kv_channels"] * cfg["num_attention_heads"]
    ff = cfg["intermediate_size"] // 2
    out: list[tuple[str, tuple[int, ...], str]] = [("transformer.wte.weight", (vocab, h), "weight")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"transformer.h.{i}."
        out += [
            (p + "ln_1.weight", (h,), "norm"),
            (p + "attn.c_attn.weight", (3 * proj, h), "weight"),
            (p + "attn.c_attn.bias", (3 * proj,), "bias"),
            (p + "attn.c_proj.weight", (h, proj), "weight"),
            (p + "ln_2.weight", (h,), "norm"),
            (p + "mlp.w1.weight", (ff, h), "weight"),
            (p + "mlp.w2.weight", (ff, h), "weight"),
            (p + "mlp.c_proj.weight", (h, ff), "weight"),
        ]
    out += [("transformer.ln_f.weight", (h,), "norm"), ("lm_head.weight", (vocab, h), "weight")]
    return out


LAYOUTS: dict[str, Layout] = {"Qwen2ForCausalLM": Qwen2Layout(), "QWenLMHeadModel": QWenLayout()}


def for_config(config: dict[str, Any]) -> Layout:
    arch = (config.get("architectures") or [None])[0]
    if arch not in LAYOUTS:
        raise TutorialError(f"no stand-in layout for architecture {arch!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[arch]
