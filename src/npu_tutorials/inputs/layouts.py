"""Checkpoint layouts: which tensors a checkpoint holds, how a stand-in's weights are laid out in
it, and which tokenizer files it ships.

``qwen2`` is the Hugging Face ``Qwen2ForCausalLM`` layout (Qwen2.5, palmyra-mini); ``qwen3`` is
``Qwen3ForCausalLM`` (q_norm/k_norm per layer, an explicit head_dim, no q/k/v biases); ``qwen`` is
first-generation QWen (``QWenLMHeadModel``).  Stand-in weights are planted in the Qwen2 layout
(:mod:`npu_tutorials.inputs.planted`); the QWen layout receives them through the exact inverse of the
converter's mapping, so its conversion serves the planted network unchanged; the Qwen3 layout keeps
them, drops the biases it has no place for and sets its q/k norms to ones (norm weights, as every
other norm of a stand-in).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable
import shutil
from math import prod

from ..core.errors import TutorialError
from .convert import qwen2_config, qwen_parameters, to_qwen_layout
from .planted import qwen2_weights
from .tokenizer import tiktoken_file, write_qwen2_tokenizer


class Layout:
    name: str
    parameters: Callable[[dict[str, Any]], list]

    def weights(self, config: dict[str, Any], seed: int, progress=None) -> tuple[dict, dict]:
        """A planted stand-in's tensors in this layout's names, and what was planted."""
        raise NotImplementedError

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        raise NotImplementedError


class Qwen2Layout(Layout):
    name = "qwen2"

    @staticmethod
    def parameters(config):
        return qwen2_parameters(config)

    def weights(self, config, seed, progress=None):
        return qwen2_weights(config, seed, progress)

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        tok_cfg = json.loads((out_dir / "tokenizer_config.json").read_text())
        write_qwen2_tokenizer(out_dir, tok_cfg)


class Qwen3Layout(Qwen2Layout):
    """``Qwen3ForCausalLM``: the Qwen2 layout with an RMSNorm over each head's queries and keys."""

    name = "qwen3"

    @staticmethod
    def parameters(config):
        return qwen3_parameters(config)

    def weights(self, config, seed, progress=None):
        import torch

        tensors, plan = qwen2_weights(config, seed, progress)  # drawn as for Qwen2: the same stream
        expected = {name for name, _, _ in qwen3_parameters(config)}
        out = {k: v for k, v in tensors.items() if k in expected}
        for name, shape, kind in qwen3_parameters(config):
            if name not in out and kind == "norm":
                out[name] = torch.ones(shape, dtype=torch.bfloat16)
        plan["layout"] = "qwen3: q/k/v biases left out unless attention_bias, q_norm/k_norm ones"
        return out, plan


class LlamaLayout(Qwen2Layout):
    """``LlamaForCausalLM`` (SmolLM2): the Qwen2 layout without q/k/v biases (unless ``attention_bias``).  Its
    tokenizer ships in the card's data folder (``tokenizer.json``, written from the model's GGUF file), so a
    stand-in copies it with the other data files."""

    name = "llama"

    @staticmethod
    def parameters(config):
        return qwen2_parameters(config, bias=bool(config.get("attention_bias", False)))

    def weights(self, config, seed, progress=None):
        tensors, plan = qwen2_weights(config, seed, progress)  # drawn as for Qwen2: the same stream
        expected = {name for name, _, _ in self.parameters(config)}
        plan["layout"] = "llama: q/k/v biases left out unless attention_bias"
        return {k: v for k, v in tensors.items() if k in expected}, plan

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        if not (out_dir / "tokenizer.json").is_file():
            raise TutorialError("a LlamaForCausalLM card ships its tokenizer.json in its data folder")


class QWenLayout(Layout):
    """First-generation QWen (``QWenLMHeadModel``): fused c_attn, w1/w2 MLP, tiktoken tokenizer."""

    name = "qwen"

    @staticmethod
    def parameters(config):
        return qwen_parameters(config)

    def weights(self, config, seed, progress=None):
        tensors, plan = qwen2_weights(qwen2_config(config), seed, progress)
        return to_qwen_layout(tensors), plan

    def write_tokenizer(self, out_dir: Path, config: dict[str, Any]) -> None:
        shutil.copyfile(tiktoken_file(), out_dir / "qwen.tiktoken")


def qwen2_parameters(cfg: dict[str, Any], *, bias: bool = True,
                     qk_norm: bool = False) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, kind) of every tensor of a Qwen2ForCausalLM checkpoint, in file order.

    kind is ``weight``, ``bias`` or ``norm``.  ``bias``: the q/k/v projections have biases (Qwen2
    always); ``qk_norm``: an RMSNorm of head_dim over each head's queries and keys (Qwen3).
    """
    h, inter, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or h // heads
    out: list[tuple[str, tuple[int, ...], str]] = [("model.embed_tokens.weight", (vocab, h), "weight")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.append((p + "input_layernorm.weight", (h,), "norm"))
        for proj, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            out.append((p + f"self_attn.{proj}_proj.weight", (rows, h), "weight"))
            out += [(p + f"self_attn.{proj}_proj.bias", (rows,), "bias")] if bias else []
        out += [(p + f"self_attn.{n}_norm.weight", (hd,), "norm") for n in ("q", "k")] if qk_norm else []
        out += [
            (p + "self_attn.o_proj.weight", (h, heads * hd), "weight"),
            (p + "post_attention_layernorm.weight", (h,), "norm"),
            (p + "mlp.gate_proj.weight", (inter, h), "weight"),
            (p + "mlp.up_proj.weight", (inter, h), "weight"),
            (p + "mlp.down_proj.weight", (h, inter), "weight"),
        ]
    out.append(("model.norm.weight", (h,), "norm"))
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", (vocab, h), "weight"))
    return out


def qwen3_parameters(cfg: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, kind) of a Qwen3ForCausalLM checkpoint (biases only where ``attention_bias``)."""
    return qwen2_parameters(cfg, bias=bool(cfg.get("attention_bias", False)), qk_norm=True)


LAYOUTS: dict[str, Layout] = {"Qwen2ForCausalLM": Qwen2Layout(), "Qwen3ForCausalLM": Qwen3Layout(),
                               "QWenLMHeadModel": QWenLayout(), "LlamaForCausalLM": LlamaLayout()}


def num_parameters(config: dict[str, Any]) -> int:
    """Parameters of a checkpoint with ``config``, counted from its layout's tensor list."""
    return sum(prod(shape) for _name, shape, _kind in for_config(config).parameters(config))


def for_config(config: dict[str, Any]) -> Layout:
    arch = (config.get("architectures") or [None])[0]
    if arch not in LAYOUTS:
        raise TutorialError(f"no stand-in layout for architecture {arch!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[arch]
