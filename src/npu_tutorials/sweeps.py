"""Latency against input length and throughput against concurrency, with ``vllm bench serve``.

Every point keeps its samples: per-request TTFT/TPOT (every request of every
repeat) and the output throughput of each repeat, with a
:func:`stats.summarize` of each, so a figure on a page can say how many
samples it rests on and how far they spread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import stats
from .bench import run_repeated
from .cards import BenchProfile, Sweep
from .server import VLLMServer


def input_length_sweep(server: VLLMServer, sweep: Sweep, *, model: str, tokenizer: str, out_dir: Path,
                       repeats: int = 1) -> list[dict]:
    """Per input length: one request at a time (prefill latency = TTFT, decode = TPOT), then all
    ``requests_per_point`` at once (TTFT while chunked prefill shares the engine); each ``repeats`` times.

    Row keys: ``input_len``, ``prefill_ms`` (median per-request TTFT alone), ``tpot_ms`` (median
    per-request TPOT alone), ``ttft_concurrent_ms`` (median TTFT all at once),
    ``ttft_concurrent_p99_ms``, ``concurrent_requests``, ``repeats``,
    ``samples`` ({"prefill_ms", "tpot_ms", "ttft_concurrent_ms"}: lists, one value per request) and
    ``summary`` (the same keys, :func:`stats.summarize` of each).
    """
    rows = []
    for n_in in sweep.input_lens:
        alone = run_repeated(server, BenchProfile(num_prompts=sweep.requests_per_point, input_len=n_in,
                                                  output_len=sweep.sweep_output_len, max_concurrency=1),
                             model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"len{n_in}-c1", repeats=repeats)
        together = run_repeated(server, BenchProfile(num_prompts=sweep.requests_per_point, input_len=n_in,
                                                     output_len=sweep.sweep_output_len),
                                model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"len{n_in}-all",
                                repeats=repeats)
        samples = {"prefill_ms": [v for r in alone for v in r.per_request()["ttft_ms"]],
                   "tpot_ms": [v for r in alone for v in r.per_request()["tpot_ms"]],
                   "ttft_concurrent_ms": [v for r in together for v in r.per_request()["ttft_ms"]]}
        summary = {k: stats.summarize(v) for k, v in samples.items()}
        rows.append({"input_len": n_in, "prefill_ms": summary["prefill_ms"]["median"],
                     "tpot_ms": summary["tpot_ms"]["median"],
                     "ttft_concurrent_ms": summary["ttft_concurrent_ms"]["median"],
                     "ttft_concurrent_p99_ms": float(np.percentile(samples["ttft_concurrent_ms"], 99)),
                     "concurrent_requests": sweep.requests_per_point, "repeats": repeats,
                     "samples": samples, "summary": summary})
    return rows


def concurrency_sweep(server: VLLMServer, sweep: Sweep, base: BenchProfile, *, model: str, tokenizer: str,
                      out_dir: Path, repeats: int = 1, min_requests: int = 1) -> list[dict]:
    """Output throughput at each concurrency n: ``max(rounds x n, min_requests)`` requests per run
    (``min_requests`` gives concurrency 1 enough requests for a per-request spread), ``repeats`` runs.

    Row keys: ``concurrency``, ``output_throughput`` (median over runs), ``mean_tpot_ms`` /
    ``mean_ttft_ms`` (mean over every request of every run), ``median_tpot_ms``, ``median_ttft_ms``,
    ``completed`` (requests per run), ``repeats``, ``samples`` ({"output_throughput": one per run,
    "tpot_ms", "ttft_ms": one per request}) and ``summary`` (:func:`stats.summarize` of each).
    """
    rows = []
    for n in sweep.concurrency:
        prof = BenchProfile(num_prompts=max(sweep.rounds * n, min_requests), input_len=base.input_len,
                            output_len=base.output_len, max_concurrency=n)
        runs = run_repeated(server, prof, model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"conc{n}",
                            repeats=repeats)
        samples = {"output_throughput": [r.data["output_throughput"] for r in runs],
                   "tpot_ms": [v for r in runs for v in r.per_request()["tpot_ms"]],
                   "ttft_ms": [v for r in runs for v in r.per_request()["ttft_ms"]]}
        summary = {k: stats.summarize(v) for k, v in samples.items()}
        rows.append({"concurrency": n, "output_throughput": summary["output_throughput"]["median"],
                     "mean_tpot_ms": float(np.mean(samples["tpot_ms"])),
                     "mean_ttft_ms": float(np.mean(samples["ttft_ms"])),
                     "median_tpot_ms": summary["tpot_ms"]["median"], "median_ttft_ms": summary["ttft_ms"]["median"],
                     "completed": runs[0].data["completed"], "repeats": repeats,
                     "samples": samples, "summary": summary})
    return rows
