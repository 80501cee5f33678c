"""How close decoding gets to the memory-bandwidth roofline, and the plain-transformers baseline.

Decoding one token at concurrency 1 reads every weight matrix once, one row of
an untied input embedding, and the KV cache so far (:func:`decode_bytes`), so
``bytes read / TPOT`` is the bandwidth the engine achieved; over the device's
bandwidth it is the roofline fraction (:func:`npu_tutorials.record.headline.roofline_fraction`,
in ``record`` so that the headline figures use it too).  The bandwidth is measured by a probe on
the device in the same build (:mod:`npu_tutorials.engine.bandwidth`).
"""

from __future__ import annotations

import time
from pathlib import Path
import hashlib
import json

from . import stats
from ..engine.bench import random_prompt_ids
from ..inputs.layouts import for_config
from .reference import quiet_transformers

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

EMBEDDING_NAMES = ("model.embed_tokens.weight", "transformer.wte.weight")
LM_HEAD_NAME = "lm_head.weight"


def _kv_shape(config: dict) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a Qwen2ForCausalLM or first-generation QWen config."""
    heads = config["num_attention_heads"]
    if "kv_channels" in config:  # QWenLMHeadModel: no GQA
        return config["num_hidden_layers"], heads, config["kv_channels"]
    kv = config.get("num_key_value_heads") or heads
    return config["num_hidden_layers"], kv, config.get("head_dim") or config["hidden_size"] // heads


def decode_bytes(config: dict, dtype: str, context_len: float = 0, kv_dtype: str | None = None) -> dict:
    """Bytes one decoding step of one sequence reads, from the config (the checkpoint's tensor list,
    :mod:`layouts`) and the engine's dtype.

    Every weight matrix in full, biases and norms (``vectors``), one row of an untied input
    embedding (``embedding_row``; a decode step looks up one token), ``lm_head`` in full (the
    tied embedding table counted once, in full, here), and the KV cache of ``context_len``
    tokens: 2 x layers x kv_heads x head_dim x context_len x bytes (``kv_dtype`` defaults to
    ``dtype``, as vLLM's ``--kv-cache-dtype auto``).

    Returns ``{"matrices", "vectors", "embedding_row", "lm_head", "weights" (the sum of those four),
    "kv_cache", "total", "context_len", "dtype", "kv_dtype", "tied"}`` (byte counts as numbers;
    ``kv_cache`` and ``total`` are floats when ``context_len`` is a mean).
    """
    if dtype not in DTYPE_BYTES or (kv_dtype or dtype) not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}")
    b = DTYPE_BYTES[dtype]
    matrices = vectors = embedding_row = lm_head = 0
    emb_shape = None
    for name, shape, _ in for_config(config).parameters(config):
        n = 1
        for d in shape:
            n *= d
        if name in EMBEDDING_NAMES:
            emb_shape = shape
        elif name == LM_HEAD_NAME:
            lm_head = n * b
        elif len(shape) >= 2:
            matrices += n * b
        else:
            vectors += n * b
    if emb_shape is None:
        raise ValueError("the layout has no input embedding")
    tied = lm_head == 0
    if tied:
        lm_head = emb_shape[0] * emb_shape[1] * b  # the shared table, read in full by the output projection
    else:
        embedding_row = emb_shape[1] * b
    layers, kv_heads, head_dim = _kv_shape(config)
    kv = 2 * layers * kv_heads * head_dim * context_len * DTYPE_BYTES[kv_dtype or dtype]
    weights = matrices + vectors + embedding_row + lm_head
    return {"matrices": matrices, "vectors": vectors, "embedding_row": embedding_row, "lm_head": lm_head,
            "weights": weights, "kv_cache": kv, "total": weights + kv, "context_len": context_len,
            "dtype": dtype, "kv_dtype": kv_dtype or dtype, "tied": tied}


def checkpoint_decode_bytes(path: str | Path, dtype: str, context_len: float = 0) -> dict:
    """:func:`decode_bytes` for the checkpoint at ``path`` (its config.json)."""
    return decode_bytes(json.loads((Path(path) / "config.json").read_text()), dtype, context_len)


def mean_decode_context(input_len: int, output_len: int) -> float:
    """Mean context length over the decode steps TPOT averages (tokens 2..output_len):
    input_len + 1 ... input_len + output_len - 1, i.e. input_len + output_len / 2."""
    return input_len + output_len / 2


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("npu"):
        torch.npu.synchronize()  # type: ignore[attr-defined]


def hf_generate_throughput_points(path: str | Path, points: list[dict], device: str = "cpu", dtype: str = "bfloat16",
                                  *, repeats: int = 3, seed: int = 0, threads: int | None = None) -> list[dict]:
    """Output tokens/s of plain transformers ``generate`` under stated conditions, repeated, for several
    conditions with one model load: ``points`` holds each condition's ``batch``, ``input_len``, ``output_len``,
    ``prompt_ids``, ``bench_seed``, ``bench_num_prompts``; one result per point, in order.
    The prompts are, in order of precedence: ``prompt_ids`` (``batch`` rows of token ids; rows of
    unequal length are left-padded with an attention mask); the first ``batch`` prompts that
    ``vllm bench serve --dataset-name random --seed bench_seed --num-prompts bench_num_prompts``
    sends for ``input_len`` / ``output_len`` (imports vLLM; pass that run's ``--num-prompts`` as
    ``bench_num_prompts``, default ``batch``: vLLM draws the random lengths and offsets of all
    prompts before building the first); or ``batch`` seeded random sequences of ``input_len`` ids.
    Every row generates exactly ``output_len`` tokens (greedy, EOS ignored, like ``--ignore-eos``),
    ``repeats`` times after one warm-up run of the same shapes.  Arguments and result are JSON-able
    (run it in a process of its own with :func:`npu_tutorials.engine.isolated.call`).

    Each point's result: ``{"conditions": {"batch", "input_len", "input_lens", "output_len", "dtype", "device",
    "prompt_source", "prompt_sha256", "repeats", "torch_threads", "torch", "transformers"},
    "seconds": [per run],
    "output_tokens_per_s_runs": [per run], "summary": stats.summarize(tokens/s),
    "output_tokens_per_s": median, "batch", "input_len", "new_tokens"}`` (the last three for
    callers of the old result).
    """
    import torch
    from transformers import AutoModelForCausalLM

    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    if threads:
        torch.set_num_threads(int(threads))
    prompts = [_baseline_rows(path, seed=seed, **pt) for pt in points]  # all checked before the load
    if device.startswith("npu"):
        import torch_npu  # noqa: F401

    quiet_transformers()
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype)).to(device).eval()
    try:
        return [_measure_generate(model, rows, source, pt["output_len"], device, dtype, repeats)
                for pt, (rows, source) in zip(points, prompts)]
    finally:
        del model


def _baseline_rows(path, *, batch: int, input_len: int | None = None, output_len: int | None = None,
                   prompt_ids: list[list[int]] | None = None, bench_seed: int | None = None,
                   bench_num_prompts: int | None = None, seed: int = 0) -> tuple[list[list[int]], str]:
    """The prompt rows of one baseline point and where they came from (see :func:`hf_generate_throughput_points`)."""
    import torch

    if output_len is None or output_len < 1:
        raise ValueError("output_len (tokens generated per row) is required")
    if prompt_ids is not None:
        rows = [list(map(int, r)) for r in prompt_ids]
        source = "given token ids"
    elif bench_seed is not None and input_len:
        n = bench_num_prompts or batch
        rows = random_prompt_ids(str(path), num_prompts=n, input_len=input_len, output_len=output_len,
                                 seed=bench_seed)[:batch]
        source = (f"vllm bench serve random dataset, seed {bench_seed}, {n} prompts: the first {batch} "
                  "(the prompts that benchmark run sends)")
    elif input_len:
        gen = torch.Generator().manual_seed(seed)
        rows = torch.randint(100, 20000, (batch, input_len), generator=gen).tolist()
        source = f"random token ids 100..19999, torch seed {seed}"
    else:
        raise ValueError("give prompt_ids, or input_len (with bench_seed for the benchmark's own prompts)")
    if len(rows) != batch or not all(rows):
        raise ValueError(f"need {batch} non-empty prompt rows, got {len(rows)}")
    return rows, source


def _measure_generate(model, rows: list[list[int]], source: str, output_len: int, device: str, dtype: str,
                      repeats: int) -> dict:
    """Time ``generate`` on ``rows`` (left-padded), ``repeats`` times after one warm-up of the same shapes."""
    import torch
    import transformers

    batch = len(rows)
    width = max(len(r) for r in rows)
    pad = 0
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
    kw = dict(max_new_tokens=output_len, min_new_tokens=output_len, do_sample=False, pad_token_id=pad,
              eos_token_id=None, attention_mask=mask)
    seconds = []
    with torch.inference_mode():
        model.generate(ids, **kw)  # warm-up, same shapes
        for _ in range(repeats):
            _sync(device)
            t = time.perf_counter()
            out = model.generate(ids, **kw)
            _sync(device)
            seconds.append(time.perf_counter() - t)
            if out.shape[1] - width != output_len:
                raise RuntimeError(f"generate made {out.shape[1] - width} tokens, not {output_len}")
    tps = [batch * output_len / s for s in seconds]
    summ = stats.summarize(tps)
    in_lens = [len(r) for r in rows]
    return {"conditions": {"batch": batch, "input_len": max(in_lens), "input_lens": in_lens, "output_len": output_len,
                           "dtype": dtype, "device": device, "prompt_source": source,
                           "prompt_sha256": prompt_sha256(rows), "repeats": repeats,
                           "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                           "transformers": transformers.__version__},
            "seconds": seconds, "output_tokens_per_s_runs": tps, "summary": summ,
            "output_tokens_per_s": summ["median"], "batch": batch, "input_len": max(in_lens),
            "new_tokens": output_len}


def prompt_sha256(rows: list[list[int]]) -> str:
    """A fingerprint of token-id prompts (to show two measurements used the same ones)."""
    return hashlib.sha256(json.dumps([list(map(int, r)) for r in rows]).encode()).hexdigest()


def scaling(throughputs: dict[int, float]) -> dict[int, dict]:
    """Speedup and efficiency relative to concurrency 1: thr(n) / (n * thr(1))."""
    base = throughputs[1]
    return {n: {"speedup": t / base, "efficiency": t / (n * base)} for n, t in throughputs.items()}
