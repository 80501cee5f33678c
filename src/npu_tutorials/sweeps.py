"""Latency against input length and throughput against concurrency, with ``vllm bench serve``."""

from __future__ import annotations

from pathlib import Path

from .bench import run_serving_benchmark
from .cards import BenchProfile, Sweep
from .server import VLLMServer


def input_length_sweep(server: VLLMServer, sweep: Sweep, *, model: str, tokenizer: str, out_dir: Path) -> list[dict]:
    """Per input length: one request at a time (prefill latency = TTFT, decode = TPOT), then all
    ``requests_per_point`` at once (TTFT while chunked prefill shares the engine)."""
    rows = []
    for n_in in sweep.input_lens:
        alone = run_serving_benchmark(server, BenchProfile(num_prompts=sweep.requests_per_point, input_len=n_in,
                                                           output_len=sweep.sweep_output_len, max_concurrency=1),
                                      model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"len{n_in}-c1")
        together = run_serving_benchmark(server, BenchProfile(num_prompts=sweep.requests_per_point, input_len=n_in,
                                                              output_len=sweep.sweep_output_len),
                                         model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"len{n_in}-all")
        a, b = alone.data, together.data
        rows.append({"input_len": n_in, "prefill_ms": a["median_ttft_ms"], "tpot_ms": a["mean_tpot_ms"],
                     "ttft_concurrent_ms": b["mean_ttft_ms"], "ttft_concurrent_p99_ms": b["p99_ttft_ms"],
                     "concurrent_requests": sweep.requests_per_point})
    return rows


def concurrency_sweep(server: VLLMServer, sweep: Sweep, base: BenchProfile, *, model: str, tokenizer: str,
                      out_dir: Path) -> list[dict]:
    """Output throughput at each concurrency (``rounds`` x concurrency requests, all sent at once)."""
    rows = []
    for n in sweep.concurrency:
        prof = BenchProfile(num_prompts=sweep.rounds * n, input_len=base.input_len, output_len=base.output_len, max_concurrency=n)
        r = run_serving_benchmark(server, prof, model=model, tokenizer=tokenizer, out_dir=out_dir, name=f"conc{n}")
        rows.append({"concurrency": n, "output_throughput": r.data["output_throughput"],
                     "mean_tpot_ms": r.data["mean_tpot_ms"], "mean_ttft_ms": r.data["mean_ttft_ms"],
                     "completed": r.data["completed"]})
    return rows
