"""Serving benchmarks with vLLM's own ``vllm bench serve`` against a running server.

Results are vLLM's JSON (``--save-result --save-detailed``), read back and
summarised; nothing here times requests itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from .cards import BenchProfile
from .errors import TutorialError
from .server import VLLMServer, tail

PERCENTILES = "50,99"


def bench_args(profile: BenchProfile, *, model: str, tokenizer: str, base_url: str,
               result_dir: str | None = None, result_file: str | None = None, seed: int = 0) -> list[str]:
    """Arguments of ``vllm bench serve`` for one profile (random dataset: no download)."""
    args = ["--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(profile.input_len),
            "--random-output-len", str(profile.output_len), "--num-prompts", str(profile.num_prompts),
            "--request-rate", str(profile.request_rate), "--ignore-eos", "--seed", str(seed),
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", PERCENTILES]
    if profile.max_concurrency:
        args += ["--max-concurrency", str(profile.max_concurrency)]
    if result_dir:
        args += ["--save-result", "--save-detailed", "--result-dir", result_dir, "--result-filename", result_file]
    return args


# (label, key in vLLM's JSON, unit)
SUMMARY_ROWS = [
    ("Benchmark duration", "duration", "s"),
    ("Successful requests", "completed", ""),
    ("Failed requests", "failed", ""),
    ("Request throughput", "request_throughput", "req/s"),
    ("Output token throughput", "output_throughput", "tok/s"),
    ("Peak output token throughput", "max_output_tokens_per_s", "tok/s"),
    ("Total token throughput", "total_token_throughput", "tok/s"),
    ("Mean TTFT", "mean_ttft_ms", "ms"),
    ("Median TTFT", "median_ttft_ms", "ms"),
    ("P99 TTFT", "p99_ttft_ms", "ms"),
    ("Mean TPOT", "mean_tpot_ms", "ms"),
    ("Median TPOT", "median_tpot_ms", "ms"),
    ("P99 TPOT", "p99_tpot_ms", "ms"),
    ("Mean ITL", "mean_itl_ms", "ms"),
    ("Median ITL", "median_itl_ms", "ms"),
    ("P99 ITL", "p99_itl_ms", "ms"),
]


@dataclass
class BenchResult:
    profile: BenchProfile
    data: dict  # vLLM's result JSON
    json_path: Path
    command: list[str]

    def summary(self) -> dict[str, float]:
        return {key: self.data[key] for _, key, _ in SUMMARY_ROWS if key in self.data}

    def per_request_tpot_ms(self) -> list[float]:
        """TPOT of each request: (latency - ttft) / (output_len - 1), as vLLM defines it."""
        out = []
        for lat, ttft, n in zip(self.data.get("latencies", []), self.data.get("ttfts", []),
                                self.data.get("output_lens", [])):
            if n > 1:
                out.append(1000.0 * (lat - ttft) / (n - 1))
        return out


def run_seed(name: str) -> int:
    """The random-prompt seed of the run called ``name`` (distinct runs, distinct prompts)."""
    return zlib.crc32(name.encode())


def run_serving_benchmark(server: VLLMServer, profile: BenchProfile, *, model: str, tokenizer: str,
                          out_dir: Path, name: str, timeout: float = 3600) -> BenchResult:
    """Run ``vllm bench serve`` in a subprocess; raise with its output's tail if it fails.

    Each run draws its random prompts with a seed of its own (from ``name``): runs against
    the same server must not share prompts, or vLLM's prefix cache would serve later runs'
    prefills from earlier ones and flatter their TTFT.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result_file = f"{name}.json"
    argv = [sys.executable, "-m", "npu_tutorials.vllm_bench",
            *bench_args(profile, model=model, tokenizer=tokenizer, base_url=server.base_url,
                        result_dir=str(out_dir), result_file=result_file, seed=run_seed(name))]
    log = out_dir / f"{name}.log"
    with open(log, "wb") as fh:
        try:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise TutorialError(f"vllm bench serve did not finish within {timeout:.0f} s; see {log}") from None
    path = out_dir / result_file
    if proc.returncode != 0 or not path.is_file():
        raise TutorialError(f"vllm bench serve failed (exit {proc.returncode}); last lines of {log}:\n{tail(log)}")
    data = json.loads(path.read_text())
    if data.get("failed", 0) or data.get("completed", 0) == 0:
        errors = [e for e in data.get("errors", []) if e][:1]
        raise TutorialError(f"vllm bench serve: {data.get('failed', 0)} of {profile.num_prompts} requests failed "
                            f"({errors[0] if errors else 'no error text'}); the server's log tail:\n{tail(server.log_path)}")
    return BenchResult(profile, data, path, argv)
