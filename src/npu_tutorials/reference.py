"""The CPU reference: the same checkpoint through transformers in fp32.

Loaded once per tutorial and reused; runs in the calling process on the CPU,
whatever the engine's backend.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np


@lru_cache(maxsize=1)
def load_reference(path: str):
    """(tokenizer, model) in fp32 on the CPU, eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return tok, model


def tokenize(path: str | Path, text: str) -> list[int]:
    tok, _ = load_reference(str(path))
    return list(tok(text, add_special_tokens=False)["input_ids"])


def last_logits(path: str | Path, ids: list[int]) -> np.ndarray:
    """fp32 logits over the whole vocabulary at the last position of ``ids``."""
    import torch

    _, model = load_reference(str(path))
    with torch.inference_mode():
        out = model(torch.tensor([ids]))
    return out.logits[0, -1].float().numpy()


def greedy(path: str | Path, ids: list[int], n: int) -> list[int]:
    """``n`` greedy tokens from the reference (no stop token)."""
    import torch

    _, model = load_reference(str(path))
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
    return out[0, len(ids):].tolist()
