"""First-generation QWen (``QWenLMHeadModel``) -> ``Qwen2ForCausalLM`` layout, no remote code.

vLLM removed ``QWenLMHeadModel`` after 0.23.0.  The network is mathematically
a Qwen2 model with as many KV heads as heads, MLP width ``intermediate_size / 2``,
``rope_theta = rotary_emb_base`` and an untied ``lm_head`` (dynamic NTK and
logn scaling only act beyond ``seq_length``).  This module rewrites the
weights (splitting the fused ``c_attn``), the config, and the tokenizer (a
``tokenizer.json`` from ``qwen.tiktoken`` with QWen's special tokens and a
ChatML chat template), so every vLLM serves it without ``--trust-remote-code``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..core.errors import TutorialError
from .cache import cache_root
from .tokenizer import build_tokenizer_json

# Architectures that current vLLM no longer serves natively, and the layout this module converts them to.
CONVERTED_ARCHS = {"QWenLMHeadModel": "Qwen2ForCausalLM"}

QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
CHATML_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
MARKER = "CONVERTED.json"
CONVERTER_VERSION = 1


def _refuse(src: Path, why: str) -> TutorialError:
    return TutorialError(f"{src}: cannot convert: {why}")


def qwen_parameters(cfg: dict[str, Any]) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, kind) of a first-generation QWen checkpoint, in file order."""
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


def qwen2_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The Qwen2 config equivalent to a first-generation QWen config."""
    heads = cfg["num_attention_heads"]
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"] // 2,
        "num_hidden_layers": cfg["num_hidden_layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": cfg["kv_channels"],
        "hidden_act": "silu",
        "max_position_embeddings": cfg.get("seq_length", cfg.get("max_position_embeddings")),
        "rope_theta": float(cfg["rotary_emb_base"]),
        "rms_norm_eps": cfg["layer_norm_epsilon"],
        "vocab_size": cfg["vocab_size"],
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "sliding_window": None,
        "attention_dropout": 0.0,
        "initializer_range": cfg.get("initializer_range", 0.02),
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "transformers_version": _transformers_version(),
    }


def _transformers_version() -> str:
    try:
        import importlib.metadata as md

        return md.version("transformers")
    except Exception:
        return "5.0.0"


def check_qwen_checkpoint(src: Path) -> dict[str, Any]:
    """Validate a first-generation QWen folder; return its config or raise one clear line."""
    src = Path(src)
    if not (src / "config.json").is_file():
        raise _refuse(src, "no config.json")
    try:
        cfg = json.loads((src / "config.json").read_text())
    except json.JSONDecodeError as exc:
        raise _refuse(src, f"config.json is not JSON ({exc.msg})") from None
    arch = cfg.get("architectures")
    if arch != ["QWenLMHeadModel"]:
        raise _refuse(src, f"architectures is {arch}, not ['QWenLMHeadModel'] (first-generation QWen)")
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers", "kv_channels", "intermediate_size",
                "rotary_emb_base", "layer_norm_epsilon", "vocab_size"):
        if not isinstance(cfg.get(key), (int, float)):
            raise _refuse(src, f"config.json lacks a numeric {key}")
    if cfg.get("rotary_pct", 1.0) != 1.0:
        raise _refuse(src, f"rotary_pct {cfg['rotary_pct']} (only 1.0 has a Qwen2 equivalent)")
    if not (src / "qwen.tiktoken").is_file():
        raise _refuse(src, "no qwen.tiktoken (the tokenizer's BPE ranks)")
    if not sorted(src.glob("*.safetensors")):
        raise _refuse(src, "no *.safetensors weights")
    return cfg


# QWen name -> Qwen2 name(s): the top-level tensors, and each layer's (after "transformer.h.N.")
_TOP = {"transformer.wte.weight": ["model.embed_tokens.weight"], "transformer.ln_f.weight": ["model.norm.weight"],
        "lm_head.weight": ["lm_head.weight"]}
_LAYER = {
    "ln_1.weight": ["input_layernorm.weight"],
    "ln_2.weight": ["post_attention_layernorm.weight"],
    "attn.c_attn.weight": ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"],
    "attn.c_attn.bias": ["self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"],
    "attn.c_proj.weight": ["self_attn.o_proj.weight"],
    "mlp.w2.weight": ["mlp.gate_proj.weight"],  # forward: c_proj(w1(x) * silu(w2(x)))
    "mlp.w1.weight": ["mlp.up_proj.weight"],
    "mlp.c_proj.weight": ["mlp.down_proj.weight"],
}


def _rename(name: str) -> list[str]:
    m = re.fullmatch(r"transformer\.h\.(\d+)\.(.+)", name)
    if not m:
        return _TOP[name]
    i, rest = m.groups()
    return [f"model.layers.{i}.{n}" for n in _LAYER[rest]]


def to_qwen_layout(tensors: dict) -> dict:
    """The exact inverse of :func:`convert_weights`' mapping: Qwen2-layout tensors under QWen's names
    (q, k and v concatenated into ``c_attn``), so that converting them back gives the same tensors."""
    import torch

    top = {new[0]: old for old, new in _TOP.items()}
    layer = {n: (old, k) for old, new in _LAYER.items() for k, n in enumerate(new)}
    out: dict = {}
    fused: dict[str, list] = {}
    for name, t in tensors.items():
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if not m and name in top:
            out[top[name]] = t
            continue
        if not m or m.group(2) not in layer:
            raise TutorialError(f"no QWen name for the tensor {name!r}")
        old, k = layer[m.group(2)]
        qname = f"transformer.h.{m.group(1)}.{old}"
        parts = fused.setdefault(qname, [None] * len(_LAYER[old]))
        parts[k] = t
    for qname, parts in fused.items():
        out[qname] = parts[0] if len(parts) == 1 else torch.cat(parts, 0).contiguous()
    return out


def convert_weights(src: Path, cfg: dict[str, Any]) -> dict:
    from safetensors import safe_open

    expected = {name: shape for name, shape, _ in qwen_parameters(cfg)}
    seen: dict[str, Any] = {}
    for f in sorted(Path(src).glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for name in st.keys():
                if name not in expected:
                    raise _refuse(src, f"unexpected tensor {name} in {f.name}")
                t = st.get_tensor(name)
                if tuple(t.shape) != expected[name]:
                    raise _refuse(src, f"{name} has shape {tuple(t.shape)}, config implies {expected[name]}")
                seen[name] = t
    missing = sorted(set(expected) - set(seen))
    if missing:
        raise _refuse(src, f"{len(missing)} tensors missing, first {missing[0]}")
    out = {}
    for name, t in seen.items():
        new = _rename(name)
        parts = t.chunk(3, dim=0) if len(new) == 3 else [t]
        for n, part in zip(new, parts):
            out[n] = part.contiguous()
    return out


def write_tokenizer(dst: Path, src: Path) -> None:
    specials = {151643 + i: (tok, True) for i, tok in enumerate(QWEN_SPECIAL)}
    (dst / "tokenizer.json").write_text(build_tokenizer_json(specials, str(src / "qwen.tiktoken")), encoding="utf-8")
    (dst / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "model_max_length": 8192, "clean_up_tokenization_spaces": False,
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "chat_template": CHATML_TEMPLATE,
    }, indent=2, ensure_ascii=False) + "\n")


def convert_checkpoint(src: Path, dst: Path) -> Path:
    """Convert ``src`` (QWen layout) into a new folder ``dst`` (Qwen2 layout)."""
    from safetensors.torch import save_file

    src, dst = Path(src), Path(dst)
    cfg = check_qwen_checkpoint(src)
    dst.mkdir(parents=True, exist_ok=False)
    tensors = convert_weights(src, cfg)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(qwen2_config(cfg), indent=2) + "\n")
    gen = json.loads((src / "generation_config.json").read_text()) if (src / "generation_config.json").is_file() else {}
    (dst / "generation_config.json").write_text(json.dumps({
        "bos_token_id": 151643, "pad_token_id": 151643,
        # ChatML: a reply ends at <|im_end|>; QWen also stops at <|im_start|> and <|endoftext|>
        "eos_token_id": [151643, 151645, 151644],
        **{k: gen[k] for k in ("top_p", "top_k", "repetition_penalty", "max_new_tokens") if k in gen},
    }, indent=2) + "\n")
    write_tokenizer(dst, src)
    (dst / MARKER).write_text(json.dumps({"converted_from": str(src), "converter": CONVERTER_VERSION}, indent=2) + "\n")
    return dst


def _source_key(src: Path) -> str:
    h = hashlib.sha256(f"v{CONVERTER_VERSION}".encode())
    for p in sorted(src.iterdir()):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def converted_path(src: Path, cache_dir: Path | None = None) -> Path:
    """Where :func:`ensure_converted` keeps (or will keep) the conversion of ``src``."""
    src = Path(src)
    return Path(cache_dir or cache_root()) / "converted" / f"{src.name}-qwen2-{_source_key(src)}"


def ensure_converted(src: Path, cache_dir: Path | None = None) -> Path:
    """The cached Qwen2-layout conversion of ``src`` (converted once)."""
    src = Path(src)
    check_qwen_checkpoint(src)
    final = converted_path(src, cache_dir)
    root = final.parent
    if (final / MARKER).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        convert_checkpoint(src, tmp / "out")
        try:
            (tmp / "out").rename(final)
        except OSError:
            if not (final / MARKER).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def as_read(architecture: str, path: Path) -> Path:
    """The checkpoint at ``path`` as engine and reference read it: itself, or its cached conversion where
    ``architecture`` is one current vLLM (and transformers without remote code) no longer has."""
    return ensure_converted(path) if architecture in CONVERTED_ARCHS else Path(path)
