"""The CPU reference: the same checkpoint through transformers in fp32.

Loaded once per tutorial and reused; runs in the calling process on the CPU,
whatever the engine's backend.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
from ..core.memory import trim_memory


def quiet_transformers() -> None:
    """No per-tensor progress bars or advice in the pages' output."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


@lru_cache(maxsize=1)
def load_tokenizer(path: str):
    """The checkpoint's tokenizer (seconds; the model itself is :func:`load_model`)."""
    from transformers import AutoTokenizer

    quiet_transformers()
    return AutoTokenizer.from_pretrained(path)


_MODEL: dict[str, object] = {}  # at most one model: path -> model
_MODEL_LOCK = threading.Lock()  # one load at a time: a call during a prefetch waits for it, never loads twice


def load_model(path: str):
    """The model in fp32 on the CPU, eval mode (loaded once; tens of seconds at 1.8 B).  Another
    checkpoint's model is dropped first, so two are never held."""
    import torch
    from transformers import AutoModelForCausalLM

    with _MODEL_LOCK:
        if path not in _MODEL:
            if _MODEL:
                _MODEL.clear()
                trim_memory()
            quiet_transformers()
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            model.eval()
            _MODEL[path] = model
        return _MODEL[path]


def prefetch(path: str | Path) -> threading.Thread:
    """Load the reference in a background thread (the tutorial starts it while the server starts, whose
    imports keep one core busy and leave the other free).  A later :func:`load_model` waits for it; a
    failed prefetch leaves nothing behind, and that later call loads again and raises the error itself."""

    def load() -> None:
        try:
            load_tokenizer(str(path))
            load_model(str(path))
        except Exception:  # noqa: BLE001 - the step that needs the reference reports it
            pass

    t = threading.Thread(target=load, name="reference-prefetch", daemon=True)
    t.start()
    return t


def release() -> None:
    """Drop the loaded reference model (frees its memory before another large load)."""
    with _MODEL_LOCK:
        _MODEL.clear()
        load_tokenizer.cache_clear()
    trim_memory()


def tokenize(path: str | Path, text: str) -> list[int]:
    return list(load_tokenizer(str(path))(text, add_special_tokens=False)["input_ids"])


def last_logits(path: str | Path, ids: list[int]) -> np.ndarray:
    """fp32 logits over the whole vocabulary at the last position of ``ids``."""
    import torch

    model = load_model(str(path))
    with torch.inference_mode():
        out = model(torch.tensor([ids]))
    return out.logits[0, -1].float().numpy()


def all_logits(path: str | Path, ids: list[int]) -> np.ndarray:
    """fp32 logits at every position of ``ids``, shape (len(ids), vocab)."""
    import torch

    model = load_model(str(path))
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def greedy(path: str | Path, ids: list[int], n: int, stop_ids: list[int] | None = None) -> list[int]:
    """Up to ``n`` greedy tokens from the reference; stops after a token in ``stop_ids`` (kept)."""
    import torch

    model = load_model(str(path))
    kw = {"eos_token_id": stop_ids} if stop_ids else {"min_new_tokens": n}
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, pad_token_id=0,
                             attention_mask=torch.ones(1, len(ids), dtype=torch.long), **kw)
    return out[0, len(ids):].tolist()


def greedy_batch(path: str | Path, prompts: list[list[int]], n: int,
                 stop_ids: list[int] | None = None) -> list[list[int]]:
    """:func:`greedy` for several prompts in one left-padded batch (one pass over the weights per
    token for all of them).  Each row is cut after its first token in ``stop_ids`` (kept)."""
    import torch

    model = load_model(str(path))
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    kw = {"eos_token_id": stop_ids} if stop_ids else {"min_new_tokens": n}
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=0, **kw)
    rows = []
    for row in out[:, width:].tolist():
        if stop_ids:
            cut = next((i for i, t in enumerate(row) if t in stop_ids), None)
            row = row if cut is None else row[:cut + 1]
        rows.append(row)
    return rows


def chat_ids(path: str | Path, user: str) -> list[int]:
    """Token ids of a one-turn chat prompt through the checkpoint's own chat template."""
    tok = load_tokenizer(str(path))
    ids = tok.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def decode(path: str | Path, ids: list[int]) -> str:
    return load_tokenizer(str(path)).decode(ids, skip_special_tokens=True)
