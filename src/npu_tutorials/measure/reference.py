"""The CPU reference: the same checkpoint through transformers in fp32.

Loaded once per tutorial and reused; runs in the calling process on the CPU,
whatever the engine's backend.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
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
_LOADING = threading.Lock()  # one load at a time: a caller waits for a load under way (loading_meanwhile)


def load_model(path: str):
    """The model in fp32 on the CPU, eval mode (loaded once; tens of seconds at 1.8 B).  Another
    checkpoint's model is dropped first, so two are never held."""
    with _LOADING:
        return _load_model(path)


def _load_model(path: str):
    import torch
    from transformers import AutoModelForCausalLM

    if path not in _MODEL:
        if _MODEL:
            _MODEL.clear()
            trim_memory()
        quiet_transformers()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        model.eval()
        _MODEL[path] = model
    return _MODEL[path]


@contextmanager
def loading_meanwhile(path: str):
    """Load the reference for ``path`` in a thread while the body runs (a server starting in other processes,
    mostly on one core), and wait for it when the body ends, so the load never overlaps a later step.  A
    load that fails is left to the first :func:`load_model` call to report."""

    def load():
        try:
            load_model(path)
        except Exception:  # noqa: BLE001 - the caller's own load_model() raises it where it is needed
            pass

    t = threading.Thread(target=load, name="reference-preload", daemon=True)
    t.start()
    try:
        yield
    except KeyboardInterrupt:
        raise  # do not make Ctrl-C wait for a load
    except BaseException:
        t.join()
        raise
    t.join()


def release() -> None:
    """Drop the loaded reference model (frees its memory before another large load)."""
    with _LOADING:
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


def argmax_continuation(model, prefix: list[int], n: int, stops: set[int]) -> list[int]:
    """Up to ``n`` tokens, each the argmax of the logits (no token is suppressed: the engine's
    ``ignore_eos`` samples an end-of-text token too), with the key-value cache; cut after a stop."""
    import torch

    out, past, x = [], None, list(prefix)
    for _ in range(n):
        o = model(torch.tensor([x]), past_key_values=past, use_cache=True)
        past = o.past_key_values
        t = int(o.logits[0, -1].argmax())
        out.append(t)
        if t in stops:
            break
        x = [t]
    return out


def greedy(path: str | Path, ids: list[int], n: int, stop_ids: list[int] | None = None) -> list[int]:
    """Up to ``n`` greedy tokens from the reference; stops after a token in ``stop_ids`` (kept)."""
    import torch

    model = load_model(str(path))
    with torch.inference_mode():
        return argmax_continuation(model, ids, n, set(stop_ids or ()))


def greedy_along(path: str | Path, prompts: list[list[int]], alongs: list[list[int]], n: int,
                 stop_ids: list[int] | None = None) -> list[tuple[list[int], np.ndarray]]:
    """For each prompt, the reference's own greedy continuation (what :func:`greedy` gives), found
    by checking ``along``, another model's continuation of it, and the reference's fp32 logits on
    the way.

    One forward pass over every ``prompt + along`` (a right-padded batch: with causal attention a
    row's real positions never see the padding after them) gives the reference's choice at every
    position.  While it agrees with ``along``, that is the reference's sequence (each choice saw
    the prefix it would have made itself); from the first position where it chooses otherwise, or
    where ``along`` ends, the reference goes on alone (:func:`greedy`).  So an agreeing engine
    costs one pass over the weights instead of one per token.  Each result is ``(tokens, rows)``:
    ``rows[j]`` holds the logits that chose token ``j``, for every position up to and including
    the first disagreement, where both sides were fed the same prefix.
    """
    import torch

    model = load_model(str(path))
    alongs = [list(a[:n]) for a in alongs]
    seqs = [list(p) + a for p, a in zip(prompts, alongs)]
    width = max(len(x) for x in seqs)
    stops = set(stop_ids or ())
    out = []
    with torch.inference_mode():
        batch = torch.tensor([x + [0] * (width - len(x)) for x in seqs])
        logits = model(batch).logits
        for i, (ids, along) in enumerate(zip(prompts, alongs)):
            rows = logits[i, len(ids) - 1:len(ids) + len(along)].float().numpy()
            toks: list[int] = []
            for j in range(min(len(along) + 1, n)):  # position j was fed ids + along[:j] == ids + toks
                t = int(rows[j].argmax())
                toks.append(t)
                if t in stops:
                    break
                if j == len(along) or t != along[j]:  # the reference's own choice: it goes on alone
                    toks += argmax_continuation(model, list(ids) + toks, n - len(toks), stops)
                    break
            out.append((toks, rows[:j + 1] if n else rows[:0]))
    return out


def chat_ids(path: str | Path, user: str) -> list[int]:
    """Token ids of a one-turn chat prompt through the checkpoint's own chat template."""
    tok = load_tokenizer(str(path))
    ids = tok.apply_chat_template([{"role": "user", "content": user}], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)


def decode(path: str | Path, ids: list[int]) -> str:
    return load_tokenizer(str(path)).decode(ids, skip_special_tokens=True)
