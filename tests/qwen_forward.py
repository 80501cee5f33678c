"""An independent fp32 forward pass of the first-generation QWen architecture.

Written from the architecture's definition (not from transformers' Qwen2
code) and reading the checkpoint in its original layout, so that comparing it
with transformers' Qwen2 on the converted weights proves the converter exact.

Per layer: x += c_proj(attn(rope(split(c_attn(rms(x)))))); x += mlp(rms(x)),
mlp(h) = c_proj(w1(h) * silu(w2(h))).  RoPE rotates pairs (i, i + d/2) with
inv_freq = base^(-2i/d) over the whole head (rotary_pct 1).  Dynamic NTK and
logn scaling are inactive up to seq_length tokens, so they are not modelled;
the caller must stay within that length.

A test oracle (tests/test_convert.py, tests/test_planted.py), not part of the package: the tests
import it as ``qwen_forward`` (conftest.py puts tests/ on the path).
"""

from __future__ import annotations

import json
from pathlib import Path


def load_qwen(path: str | Path):
    from safetensors.torch import load_file

    path = Path(path)
    cfg = json.loads((path / "config.json").read_text())
    weights = {}
    for f in sorted(path.glob("*.safetensors")):
        weights.update({k: v.float() for k, v in load_file(str(f)).items()})
    return cfg, weights


def qwen_logits(cfg: dict, w: dict, ids: list[int]):
    """fp32 logits, shape (len(ids), vocab), for one unpadded sequence."""
    import torch

    n = len(ids)
    if n > cfg.get("seq_length", 8192):
        raise ValueError("beyond seq_length dynamic NTK / logn scaling would apply; not modelled")
    heads, d, eps = cfg["num_attention_heads"], cfg["kv_channels"], cfg["layer_norm_epsilon"]

    def rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    inv_freq = 1.0 / (cfg["rotary_emb_base"] ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.outer(torch.arange(n, dtype=torch.float64), inv_freq)  # (n, d/2)
    cos = torch.cat([angles.cos(), angles.cos()], -1).float()
    sin = torch.cat([angles.sin(), angles.sin()], -1).float()

    def rope(x):  # x: (heads, n, d)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    x = w["transformer.wte.weight"][torch.tensor(ids)]
    mask = torch.full((n, n), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"transformer.h.{i}."
        h = rms(x, w[p + "ln_1.weight"])
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(n, heads, d).transpose(0, 1) for t in qkv.split(heads * d, dim=-1))
        q, k = rope(q), rope(k)
        att = torch.softmax(q @ k.transpose(-1, -2) / d**0.5 + mask, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(n, heads * d)
        x = x + o @ w[p + "attn.c_proj.weight"].T
        h = rms(x, w[p + "ln_2.weight"])
        a1, a2 = h @ w[p + "mlp.w1.weight"].T, h @ w[p + "mlp.w2.weight"].T
        x = x + (a1 * torch.nn.functional.silu(a2)) @ w[p + "mlp.c_proj.weight"].T
    return rms(x, w["transformer.ln_f.weight"]) @ w["lm_head.weight"].T
