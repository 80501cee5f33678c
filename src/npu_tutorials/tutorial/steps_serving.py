"""Steps that deploy and exercise the model: the offline example, the server, requests, the benchmark.

Each step does the work, records it as a section of ``state.doc.results`` and
returns that section; the tables and plots are views (:mod:`.views`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import statistics

from ..measure import accuracy, reference
from ..engine import bench
from ..engine.commands import format_command
from ..engine.deploy import offline_code, offline_output
from ..engine.memory import kv_cache_from_log
from ..core.errors import TutorialError
from ..engine.isolated import run_group
from ..record.schema import Benchmark, BenchConditions, Functional, Memory, OfflineExample
from ..record import steps
from ..record.schema_base import Message
from ..engine.processes import tail
from ..engine.server import VLLMServer
from .state import TutorialState
from .steps_weights import WeightsSteps
from ..record.schema import Stat


class ServingSteps:
    """The offline example, the server (started, restarted in another dtype, or in another configuration),
    the functional check and vLLM's serving benchmark."""

    def __init__(self, state: TutorialState, weights: WeightsSteps):
        self.s, self.weights = state, weights

    # -- offline Python API ----------------------------------------------------------
    def offline_example_code(self, model: str | None = None) -> str:
        """The report's vllm.LLM example for this build's weights and engine settings (a runnable script:
        the copy-paste one of :func:`npu_tutorials.engine.deploy.offline_code`, with this build's dtype and mode)."""
        s = self.s
        path = self.weights.serving_path()
        return offline_code(s.card, s.backend, model or str(path), dtype=s.dtype, eager=s.eager)

    def run_offline_example(self, timeout: float = 1200) -> OfflineExample:
        """Run :meth:`offline_example_code` as its own Python process (its engine is gone before the
        server starts); record the script (weights path as ``<weights>``) and what it printed."""
        code = self.offline_example_code()
        script = self.s.artifacts / "offline_example.py"
        script.write_text(code)
        log = self.s.artifacts / "offline_example.log"
        # vLLM logs to stdout by default; keep stdout for the example's own print()
        added, why = self.s.platform.offline_env()
        env = {**os.environ, **self.s.run_env, "VLLM_CONFIGURE_LOGGING": "0", **added}
        changes = [Message.of(c.msgid, **dict(c.fields)) for c in why]
        t = time.monotonic()
        with self.s.step(Message.of(steps.OFFLINE_EXAMPLE)):
            proc = run_group([sys.executable, str(script)], env=env, timeout=timeout, what="the offline example")
        log.write_text(proc.stderr)
        if proc.returncode != 0:
            raise TutorialError(f"the offline example failed (exit {proc.returncode}); "
                                f"last lines of {log}:\n{tail(log)}")
        out = OfflineExample(code=self.offline_example_code("<weights>"), prompt=self.s.card.functional.prompt,
                             text=offline_output(self.s.card, proc.stdout), wall_s=round(time.monotonic() - t, 1),
                             build_changes=changes)
        return out

    # -- serving ---------------------------------------------------------------------
    def start_server(self, extra: list[str] | None = None, now: bool = True, checks: bool = True) -> VLLMServer | None:
        """Start the OpenAI-compatible server (with full-vocabulary logits enabled) with ``extra`` flags after
        the card's: the deployment as it is served (the performance role); a later step that needs another
        server (:class:`~.servers.ServerPool`) gets it started then."""
        path = self.weights.serving_path()  # one clear error when prepare_weights() has not run
        # the benchmark worker imports vLLM (seconds of one core) while the server starts, mostly on the other
        # core, so the first benchmark does not wait for it; no benchmark runs before the server is ready
        self.s.bench_worker()
        pool = self.s.servers.open(path, (*accuracy.RAW_LOGITS_FLAGS, *(extra or ())),
                                   self._reference_meanwhile if checks else None)
        return pool.ensure("performance") if now else None

    def _reference_meanwhile(self, dtype: str):
        """While a server in ``dtype`` starts (its processes import and load, mostly on one core), the fp32
        reference that this page's checks compare it with loads here, when they will use that server (it runs
        in the checks' dtype)."""
        acc = self.s.card.accuracy
        uses_reference = acc is not None and any((acc.logits, acc.consistency, acc.qa, acc.greedy))
        if not uses_reference or dtype != self.s.accuracy_dtype:
            return contextlib.nullcontext()
        return reference.loading_meanwhile(str(self.s.serve_path))

    # -- functional check ------------------------------------------------------------
    def record_completion(self, prompt: str, completion) -> Functional:
        """Record an OpenAI completion (or chat completion) object from the functional check."""
        choice = completion.choices[0]
        chat = hasattr(choice, "message")
        u = completion.usage
        out = Functional(endpoint="chat" if chat else "completions", prompt=prompt,
                         text=choice.message.content if chat else choice.text, finish_reason=choice.finish_reason,
                         prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)
        return out

    # -- performance -----------------------------------------------------------------
    def bench_command(self) -> str:
        """``vllm bench serve`` as a reader would run it against this build's server."""
        args = bench.bench_args(self.s.profile, model=self.s.model, tokenizer="<weights>",
                                base_url=self.s.servers.ensure("performance").base_url, seed=bench.run_seed("bench"))
        return format_command(["vllm", "bench", "serve", *args])

    def benchmark(self) -> Benchmark:
        """vLLM's own serving benchmark on the card's conditions for this profile, ``repeats`` runs
        (each with prompts of its own): every figure is the median over the runs."""
        srv = self.s.servers.ensure("performance")
        p = self.s.profile
        runs = []
        with self.s.step(Message.of(steps.BENCH, repeats=p.repeats,
                                     prompts=p.num_prompts)):
            for r in self.s.progress.iterate(range(p.repeats), "benchmark run"):
                runs.append(bench.run_serving_benchmark(srv, p, model=self.s.model,
                                                        tokenizer=str(self.s.serve_path), out_dir=self.s.artifacts,
                                                        name=self.s.run_name("bench" if r == 0 else f"bench-r{r}"),
                                                        worker=self.s.bench_worker()))
        keys = runs[0].summary().keys()
        summary = {k: float(statistics.median(x.summary()[k] for x in runs)) for k in keys}
        out = Benchmark(name="bench", conditions=BenchConditions(**p.model_dump(exclude={"repeats"})),
                        command=self.bench_command(), summary=summary,
                        ttft_ms=[1000 * t for x in runs for t in x.data.get("ttfts", [])],
                        tpot_ms=[t for x in runs for t in x.per_request_tpot_ms()],
                        itl_ms=[1000 * t for x in runs for req in x.data.get("itls", []) for t in req],
                        repeats=len(runs), output_throughput=Stat.of([x.data["output_throughput"] for x in runs]))
        self.s.publish(runs[0].json_path, f"{self.s.card.key}-bench.json")
        return out

    def memory(self) -> Memory:
        """What the served engine (the performance server) has held up to now: the peaks its sampler saw (one
        more sample taken here, the device's too) and the KV cache its log reports
        (:mod:`npu_tutorials.engine.memory`)."""
        srv = self.s.servers.ensure("performance")
        if srv.sampler is not None:
            srv.sampler.sample(device=True)
        peak = srv.memory_peak()
        tokens, gib = kv_cache_from_log(srv.log_path.read_text(errors="replace") if srv.log_path.is_file() else "")
        out = Memory(host_peak_rss_mib=round(peak.host_mib, 1) if peak.samples else None,
                     device_peak_mib=round(peak.device_mib, 1) if peak.device_mib is not None else None,
                     device_source=peak.device_source, kv_cache_tokens=tokens, kv_cache_gib=gib,
                     samples=peak.samples, device_samples=peak.device_samples)
        return out
