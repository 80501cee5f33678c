"""Stand-in weights that decide like a trained model: a planted next-token map.

Random weights give near-tied logits: the best and second-best tokens are a
rounding error apart, so bf16 against fp32 flips them, and an accuracy check
cannot tell a right engine from a wrong one.  A trained model is decisive: at
most positions its top token leads by far more than bf16's rounding.  These
weights keep the model's exact shapes (so the engine runs the real network
and speed figures keep their meaning) and plant a decisive structure whose
decision passes through every layer:

* **A code per token.**  Each token id gets a codeword of ``digits`` digits
  base ``q`` from a linear code over Z_q (``info`` free digits, the rest
  seeded linear checks), so two tokens' codes agree on at most
  ``digits - min_distance`` digits.  The next-token map adds a fixed codeword
  ``g`` (every free digit + 1): ``next(t)`` is the token whose code is
  ``code(t) + g``.  The chosen codes are whole orbits of that shift, so the map
  is a permutation of the vocabulary made of cycles of length ``q``.
* **The residual stream carries two copies of the code** in orthonormal
  directions of a seeded random basis: an *input* copy (one direction per digit
  and value) that the embedding writes, and an *output* copy that the layers
  write and the head reads, plus one constant direction every embedding row
  holds.
* **Every layer's MLP is a key-value memory** of ``digits * q`` neurons: neuron
  (j, v) fires (gate +G) when digit j of the current token is v and stays off
  (gate -G) otherwise, and writes the output direction of digit j, value
  ``v + g_j``.  Each layer writes 1/L of the next token's output code, so the
  decision is the sum of all layers.
* **Everything else is seeded noise of the same order**: attention (q, k, v,
  o and biases) and the remaining MLP neurons, scaled so that each adds about
  ``noise`` times what a layer's memory adds.  The noise reaches the logits
  and the memories' inputs, so faults there can flip a decision too.
* **The head** (the embedding itself where tied) reads the output code: the
  next token's logit leads every other token's by the code's minimum distance
  (a fraction of ``top``, the planted logit), far above bf16's error.

Deterministic from the seed: one ``numpy`` generator draws the code, one
``torch`` generator the basis and the noise, in a fixed order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import TutorialError

VERSION = 1
BASE = 8            # digits base: the map's cycles have this length
GATE = 4.0          # |gate pre-activation| of a memory neuron: on at +GATE, off at -GATE
NOISE = 0.3         # each noise part's output, relative to one layer's memory output
TOP = 10.0          # the planted logit (the head's scale): top-1 minus a typical logit is ~0.8 of it
EMB_CONST = 0.5     # share of the constant direction in an embedding row (unit norm rows)


@dataclass(frozen=True)
class Code:
    """The token code and the next-token map it plants."""

    base: int
    info: int                      # free digits (base ** info >= vocabulary)
    digits: int                    # all digits, free and check
    min_distance: int              # of the linear code: the runner-up differs in at least this many digits
    shift: np.ndarray = field(repr=False)      # g: code(next(t)) = code(t) + g (mod base)
    codes: np.ndarray = field(repr=False)      # vocab x digits, int16
    next_token: np.ndarray = field(repr=False)  # vocab, int64

    def describe(self) -> dict:
        return {"base": self.base, "free_digits": self.info, "digits": self.digits,
                "min_distance": self.min_distance, "cycle_length": self.base}


def _sizes(vocab: int, hidden: int, intermediate: int) -> tuple[int, int]:
    info = math.ceil(math.log(vocab) / math.log(BASE) - 1e-12)
    # input and output copies (digits * BASE directions each) and the constant direction fit the
    # hidden size; the memories leave at least a quarter of the MLP's neurons to noise
    digits = min((hidden - 1) // (2 * BASE), (3 * intermediate // 4) // BASE)
    if vocab % BASE:
        raise TutorialError(f"a planted stand-in needs a vocabulary divisible by {BASE} (got {vocab})")
    if digits < info + 2:
        raise TutorialError(f"hidden size {hidden} / MLP width {intermediate} is too small for a planted "
                            f"stand-in of a {vocab}-token vocabulary (need {2 * BASE * (info + 2) + 1} / "
                            f"{4 * BASE * (info + 2) // 3 + 1} or more)")
    return info, digits


def token_code(vocab: int, hidden: int, intermediate: int, seed: int) -> Code:
    """The code of every token and the next-token map, deterministic from ``seed``."""
    info, digits = _sizes(vocab, hidden, intermediate)
    rng = np.random.default_rng(seed)
    checks = rng.integers(0, BASE, size=(digits - info, info))
    n = BASE ** info
    free = np.stack([(np.arange(n) // BASE ** i) % BASE for i in range(info)], 1).astype(np.int16)
    words = np.concatenate([free, (free.astype(np.int64) @ checks.T % BASE).astype(np.int16)], 1)
    min_distance = int((words[1:] != 0).sum(1).min())
    shift = np.concatenate([np.ones(info, np.int64), checks.sum(1) % BASE]).astype(np.int16)
    # whole orbits of the shift: the orbit through a word with free digit 0 == 0 holds one word
    # per value of that digit, so choosing vocab / BASE such words chooses vocab / BASE orbits
    starts = rng.choice(np.nonzero(free[:, 0] == 0)[0], size=vocab // BASE, replace=False)
    ordered = np.concatenate([(words[starts] + s * shift) % BASE for s in range(BASE)], 0).astype(np.int16)
    perm = rng.permutation(vocab)  # token perm[i] gets ordered[i]; its successor is ordered[i + vocab/BASE]
    codes = np.empty_like(ordered)
    codes[perm] = ordered
    nxt = np.empty(vocab, np.int64)
    nxt[perm] = perm[(np.arange(vocab) + vocab // BASE) % vocab]
    return Code(BASE, info, digits, min_distance, shift, codes, nxt)


def _silu(x: float) -> float:
    return x / (1.0 + math.exp(-x))


def _silu_rms() -> float:
    """sqrt(E[silu(a)^2]) for a ~ N(0, 1) (the random neurons' gate), by quadrature."""
    a = np.linspace(-10, 10, 200_001)
    w = np.exp(-a * a / 2) / math.sqrt(2 * math.pi)
    s = a / (1 + np.exp(-a))
    return float(math.sqrt((s * s * w).sum() * (a[1] - a[0])))


def qwen2_weights(cfg: dict[str, Any], seed: int, progress=None) -> tuple[dict, dict]:
    """Every tensor of a ``Qwen2ForCausalLM`` with config ``cfg`` (bf16, Hugging Face names) and a
    description of what was planted (for ``STANDIN.json``).  ``progress``: a
    :class:`~npu_tutorials.core.progress.Progress` whose bar counts the layers."""
    import torch

    vocab, h, layers = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    inter, heads = cfg["intermediate_size"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim") or h // heads
    tied = bool(cfg.get("tie_word_embeddings", False))
    code = token_code(vocab, h, inter, seed)
    q, d = code.base, code.digits
    nmem = d * q
    gen = torch.Generator().manual_seed(seed)
    basis, _ = torch.linalg.qr(torch.randn(h, h, generator=gen, dtype=torch.float64))
    basis = basis.T.float().contiguous()               # rows: orthonormal directions
    const, e_in, e_out = basis[0], basis[1:1 + nmem], basis[1 + nmem:1 + 2 * nmem]
    idx = torch.from_numpy(code.codes.astype(np.int64)) + torch.arange(d) * q   # vocab x digits
    # in place where a temporary of vocabulary x hidden floats would be dropped at once (the same operations,
    # so the same bytes): fresh memory is the costly part (see noise_ below)
    in_code = torch.nn.functional.embedding_bag(idx, e_in, mode="sum").div_(math.sqrt(d))
    out_code = torch.nn.functional.embedding_bag(idx, e_out, mode="sum").div_(math.sqrt(d))

    sq = math.sqrt(h)
    top = min(TOP, 0.5 * sq)
    c_u = EMB_CONST
    if tied:  # the head is the embedding: it carries the output code at the planted logit's scale
        c_out = top / sq
        c_in = math.sqrt(1.0 - c_u ** 2 - c_out ** 2)
        gain = max(2.0, 4.0 * c_in ** 2 / c_out)  # the next token's logit must beat the current token's
    else:
        c_out, c_in, gain = 0.0, math.sqrt(1.0 - c_u ** 2), 2.0
    # c_u * const + c_in * in_code + c_out * out_code, in that order, in in_code's memory (not used again)
    embed = in_code.mul_(c_in).add_(c_u * const[None, :])
    tensors = {"model.embed_tokens.weight": embed.add_(c_out * out_code)}
    per_layer = gain / layers           # output-code norm each layer's memory adds (the embedding has norm 1)
    noise = NOISE * per_layer
    target = ((torch.arange(q)[None, :] + torch.from_numpy(code.shift.astype(np.int64))[:, None]) % q
              + torch.arange(d)[:, None] * q).reshape(-1)
    mem_out = e_out[target].T                      # h x nmem: neuron (j, v) writes digit j, value v + g_j
    silu_rms, on = _silu_rms(), _silu(GATE)
    bar = progress.bar(layers, "stand-in layers") if progress is not None else None

    # each layer's fp32 drafts are drawn into the same buffers (converted to bf16 before the next layer draws):
    # fresh memory is the costly part here (the kernel zeroes every new page, and on a VM that returns freed
    # pages to its host each first touch costs more), the draws and their order are the same
    scratch: dict[str, torch.Tensor] = {}  # one buffer per tensor of a layer (every layer has the same shapes)

    def noise_(name: str, *shape: int, std: float):
        buf = scratch.get(name)
        if buf is None:
            buf = scratch[name] = torch.empty(shape)
        return torch.randn(shape, generator=gen, out=buf).mul_(std)  # in place: one tensor, not two

    for i in range(layers):
        p = f"model.layers.{i}."
        # predicted norm of the residual stream at this layer's MLP: embedding, memories so far, noise
        x = math.sqrt(1.0 + (i * per_layer) ** 2 + (2 * i + 1) * noise ** 2)
        t = {
            "input_layernorm.weight": torch.ones(h),
            "self_attn.q_proj.weight": noise_("q", heads * hd, h, std=1 / sq),
            "self_attn.q_proj.bias": noise_("qb", heads * hd, std=0.1),
            "self_attn.k_proj.weight": noise_("k", kv * hd, h, std=1 / sq),
            "self_attn.k_proj.bias": noise_("kb", kv * hd, std=0.1),
            "self_attn.v_proj.weight": noise_("v", kv * hd, h, std=1 / sq),
            "self_attn.v_proj.bias": noise_("vb", kv * hd, std=0.1),
            "self_attn.o_proj.weight": noise_("o", h, heads * hd, std=noise / (sq * math.sqrt(heads * hd))),
            "post_attention_layernorm.weight": torch.ones(h),
        }
        gate, up = noise_("gate", inter, h, std=1 / sq), noise_("up", inter, h, std=1 / sq)
        down = noise_("down", h, inter, std=noise / (silu_rms * math.sqrt((inter - nmem) * h)))
        p_in = c_in / math.sqrt(d) * sq / x      # what the normed input holds along one active digit direction
        p_u = c_u * sq / x                       # ... and along the constant direction
        gate[:nmem] = e_in * (2 * GATE / p_in) - const[None, :] * (GATE / p_u)
        up[:nmem] = const[None, :] / p_u
        down[:, :nmem] = mem_out * (per_layer / (on * math.sqrt(d)))
        t.update({"mlp.gate_proj.weight": gate, "mlp.up_proj.weight": up, "mlp.down_proj.weight": down})
        # bf16 as each layer is made: the fp32 draft of the whole model (7 GB at 1.8 B) is never held
        tensors.update({p + k: v.to(torch.bfloat16) for k, v in t.items()})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    tensors["model.norm.weight"] = torch.ones(h)
    if not tied:
        tensors["lm_head.weight"] = out_code * (top / sq)
    out = {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}
    plan = {"construction": f"npu_tutorials.planted v{VERSION}: a next-token map planted in every layer's MLP",
            **code.describe(), "planted_logit": top, "memory_gain": gain, "noise_per_part": NOISE,
            "memory_neurons_per_layer": nmem}
    return out, plan


def next_tokens(cfg: dict[str, Any], seed: int) -> np.ndarray:
    """The planted map of a Qwen2-layout config: ``next_tokens(cfg, seed)[t]`` is the token a
    stand-in drawn with ``seed`` predicts after ``t``, whatever came before."""
    return token_code(cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], seed).next_token
