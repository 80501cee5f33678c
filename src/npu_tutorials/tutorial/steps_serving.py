"""Steps that deploy and exercise the model: the offline example, the server, requests, the benchmark.

Each step does the work, records it as a section of ``state.doc.results`` and
returns that section; the tables and plots are views (:mod:`.views`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from ..measure import accuracy, reference
from ..engine import bench
from ..engine import commands as C
from ..engine.commands import format_command, server_argv
from ..core.errors import TutorialError
from ..engine.isolated import run_group
from ..record.results import scrub
from ..record.schema import Benchmark, BenchConditions, Functional, Memory, OfflineExample, Server
from ..record.schema_base import Message
from ..engine.processes import tail
from ..engine.server import HOST, VLLMServer
from .state import TutorialState
from .steps_weights import WeightsSteps

# What each server role runs in (ServingSteps.server_for): "performance" and "task" the build's engine dtype,
# "accuracy" the card's
ROLES = ("performance", "task", "accuracy")


class ServingSteps:
    """The offline example, the server (started, restarted in another dtype, or in another configuration),
    the functional check and vLLM's serving benchmark."""

    def __init__(self, state: TutorialState, weights: WeightsSteps):
        self.s, self.weights = state, weights

    # -- offline Python API ----------------------------------------------------------
    def offline_example_code(self, model: str | None = None) -> str:
        """The report's vllm.LLM example for this build's weights and engine settings (a runnable script:
        the copy-paste one of :func:`npu_tutorials.engine.deploy.offline_code`, with this build's dtype and mode)."""
        from ..engine.deploy import offline_code

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
        env = {**os.environ, **self.s.run_env, "VLLM_CONFIGURE_LOGGING": "0"}
        changes = []
        if self.s.backend == "cpu":
            env.update(C.IN_PROCESS_ENV)
            changes.append(Message.of(C.CPU_OFFLINE_IN_PROCESS))
        t = time.monotonic()
        with self.s.step("offline example (vllm.LLM in its own process)"):
            proc = run_group([sys.executable, str(script)], env=env, timeout=timeout, what="the offline example")
        log.write_text(proc.stderr)
        if proc.returncode != 0:
            raise TutorialError(f"the offline example failed (exit {proc.returncode}); "
                                f"last lines of {log}:\n{tail(log)}")
        from ..engine.deploy import offline_output

        out = OfflineExample(code=self.offline_example_code("<weights>"), prompt=self.s.card.functional.prompt,
                             text=offline_output(self.s.card, proc.stdout), wall_s=round(time.monotonic() - t, 1),
                             build_changes=changes)
        self.s.results.offline_example = out
        return out

    # -- serving ---------------------------------------------------------------------
    def start_server(self, extra: list[str] | None = None, *, first: str = "performance") -> VLLMServer:
        """Start the OpenAI-compatible server (with full-vocabulary logits enabled) and wait for it.
        ``first``: the role of the steps right after it, one of ``ROLES``.  On a CPU without native bf16 the
        accuracy steps run in another dtype than the others (:meth:`server_for`): a page whose accuracy steps
        come first starts in theirs, and restarts once for the performance steps instead of twice."""
        self.weights.serving_path()  # one clear error when prepare_weights() has not run
        self.s.extra_flags = list(extra or [])
        # the benchmark worker imports vLLM (seconds of one core) while the server starts, mostly on the other
        # core, so the first benchmark does not wait for it; no benchmark runs before the server is ready
        self.s.bench_worker()
        dtype = self._dtype_for(first)
        self.launch(dtype, "server start", meanwhile=self._reference_meanwhile(dtype))
        srv = self.s.server
        self.s.results.server = Server(command=self._shown_command(), base_url=srv.base_url,
                                       startup_s=round(srv.startup_s, 1), models=srv.models())
        return srv

    def server_argv(self, dtype: str) -> tuple[list[str], int, list[str]]:
        """This build's server command in ``dtype`` (on a leased port), the port, and how it differs from the
        card's copy-paste command, each with its reason."""
        port = self.s.port()
        extra = accuracy.RAW_LOGITS_FLAGS + self.s.extra_flags
        changes = []
        if self.s.backend == "cpu" and not self.s.card.serve.enforce_eager:
            # torch.compile on the CPU adds minutes to every page build; the copy-paste commands keep graphs
            extra.append("--enforce-eager")
            changes.append(Message.of(C.CPU_EAGER))
        elif self.s.eager_required and not self.s.card.serve.enforce_eager:
            extra.append("--enforce-eager")
            changes.append(Message.of(C.EAGER_FOR, why=self.s.dtype_note))
        max_len = self.s.card.serve.cpu_max_model_len if self.s.backend == "cpu" else None
        if max_len:
            changes.append(Message.of(C.CPU_MAX_LEN, max_len=max_len))
        if dtype != self.s.card.serve.dtype:
            changes.append(Message.of(C.DTYPE_FOR, dtype=dtype, why=self.s.dtype_note))
        if self.s.eager_only:
            changes.append(Message.of(C.CPU_NO_COMPILE))
        argv = server_argv(self.s.card, self.s.serve_path, self.s.backend, host=HOST, port=port, extra=extra,
                           native=True, dtype=dtype, max_model_len=max_len)
        return argv, port, changes

    def _reference_meanwhile(self, dtype: str):
        """While a server in ``dtype`` starts (its processes import and load, mostly on one core), the fp32
        reference that this page's checks compare it with loads here, when they will use that server (it runs
        in the checks' dtype)."""
        acc = self.s.card.accuracy
        uses_reference = acc is not None and any((acc.logits, acc.consistency, acc.qa, acc.greedy))
        if not uses_reference or dtype != self.s.accuracy_dtype:
            return contextlib.nullcontext()
        return reference.loading_meanwhile(str(self.s.serve_path))

    def launch(self, dtype: str, step: str, *, graphs: bool = False, flags: list[str] = (),
               env: dict[str, str] | None = None, model=None, label: str = "",
               meanwhile=contextlib.nullcontext()) -> VLLMServer:
        """Start a server in ``dtype`` (the one running is replaced); ``graphs``: without --enforce-eager
        (graph mode), ``flags`` and ``env`` added, ``model`` instead of the served checkpoint (the tuning steps);
        ``meanwhile``: a context the start runs in (its work, done in this process, is part of the step)."""
        argv, port, changes = self.server_argv(dtype)
        if graphs:
            argv = [a for a in argv if a != "--enforce-eager"]
        if model is not None:
            argv[argv.index("--model") + 1] = str(model)
        argv += list(flags)
        if self.s.backend == "cpu" and dtype != self.s.dtype:  # the checks' engine alone: it measures no speed
            env = {**C.IN_PROCESS_ENV, **(env or {})}
            changes += [Message.of(C.ACCURACY_ENGINE, want=dtype, dtype=self.s.dtype),
                        Message.of(C.CPU_CHECKS_IN_PROCESS, want=dtype)]
        for change in changes:  # each server's own, once (a restart in another dtype can add --dtype's)
            if change not in self.s.results.conditions.build_changes:
                self.s.results.conditions.build_changes.append(change)
        self.s.server_dtype = dtype
        verbose = os.environ.get("TUTORIAL_VERBOSE", "") not in ("", "0")
        self.s.server = VLLMServer(
            argv, host=HOST, port=port, env={**self.s.run_env, **(env or {})},
            log_path=self.s.artifacts / f"server-{dtype}{label}.log",
            on_wait=lambda secs, line: self.s.progress.say(f"  waiting for the server ({secs:.0f} s): {line}"),
            stream=self.s.progress.out if verbose else None, backend=self.s.backend)
        with self.s.step(step), meanwhile:
            self.s.server.start()
        return self.s.server

    def _shown_command(self) -> str:
        shown = ["python", *self.s.server.argv[1:]]
        return scrub(format_command(shown, self.s.server.env), self.s.path_placeholders())

    def need_server(self) -> VLLMServer:
        """The running server, or one clear error that ``start_server()`` has not run."""
        if self.s.server is None:
            raise TutorialError("the server is not running: call start_server() first")
        return self.s.server

    def server_for(self, role: str) -> VLLMServer:
        """The running server in the dtype ``role`` needs: "performance" and "task" (task scores measure the
        deployment as it is served) use the build's engine dtype, "accuracy" (the engine-vs-reference checks)
        the card's; on a CPU without native bf16 a bf16 engine is started for the checks, the other is stopped
        first (the two never share the RAM)."""
        want = self._dtype_for(role)
        srv = self.need_server()
        if self.s.server_dtype == want:
            return srv
        srv.stop()
        self.launch(want, f"server restart in {want} for the {role} steps",
                    meanwhile=self._reference_meanwhile(want) if role == "accuracy" else contextlib.nullcontext())
        return self.s.server

    def _dtype_for(self, role: str) -> str:
        if role not in ROLES:
            raise TutorialError(f"unknown server role {role!r}: {', '.join(map(repr, ROLES))}")
        return self.s.accuracy_dtype if role == "accuracy" else self.s.dtype

    # -- functional check ------------------------------------------------------------
    def record_completion(self, prompt: str, completion) -> Functional:
        """Record an OpenAI completion (or chat completion) object from the functional check."""
        choice = completion.choices[0]
        chat = hasattr(choice, "message")
        u = completion.usage
        out = Functional(endpoint="chat" if chat else "completions", prompt=prompt,
                         text=choice.message.content if chat else choice.text, finish_reason=choice.finish_reason,
                         prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)
        self.s.results.functional = out
        return out

    # -- performance -----------------------------------------------------------------
    def bench_command(self) -> str:
        """``vllm bench serve`` as a reader would run it against this build's server."""
        args = bench.bench_args(self.s.profile, model=self.s.model, tokenizer="<weights>",
                                base_url=self.need_server().base_url, seed=bench.run_seed("bench"))
        return format_command(["vllm", "bench", "serve", *args])

    def benchmark(self) -> Benchmark:
        """vLLM's own serving benchmark on the card's conditions for this profile, ``repeats`` runs
        (each with prompts of its own): every figure is the median over the runs."""
        import statistics

        from ..record.schema import Stat

        srv = self.server_for("performance")
        p = self.s.profile
        runs = []
        with self.s.step(f"vllm bench serve ({p.repeats} runs of {p.num_prompts} requests)"):
            for r in self.s.progress.iterate(range(p.repeats), "benchmark run"):
                runs.append(bench.run_serving_benchmark(srv, p, model=self.s.model,
                                                        tokenizer=str(self.s.serve_path), out_dir=self.s.artifacts,
                                                        name="bench" if r == 0 else f"bench-r{r}",
                                                        worker=self.s.bench_worker()))
        keys = runs[0].summary().keys()
        summary = {k: float(statistics.median(x.summary()[k] for x in runs)) for k in keys}
        out = Benchmark(name="bench", conditions=BenchConditions(**p.model_dump(exclude={"repeats"})),
                        command=self.bench_command(), summary=summary,
                        ttft_ms=[1000 * t for x in runs for t in x.data.get("ttfts", [])],
                        tpot_ms=[t for x in runs for t in x.per_request_tpot_ms()],
                        itl_ms=[1000 * t for x in runs for req in x.data.get("itls", []) for t in req],
                        repeats=len(runs), output_throughput=Stat.of([x.data["output_throughput"] for x in runs]))
        self.s.results.benchmark = out
        self.record_memory(srv)
        self.s.publish(runs[0].json_path, f"{self.s.card.key}-bench.json")
        return out

    def record_memory(self, srv: VLLMServer) -> Memory:
        """What the served engine has held up to now: the peaks its sampler saw (one more sample taken here,
        the device's too) and the KV cache its log reports (:mod:`npu_tutorials.engine.memory`)."""
        from ..engine.memory import kv_cache_from_log

        if srv.sampler is not None:
            srv.sampler.sample(device=True)
        peak = srv.memory_peak()
        tokens, gib = kv_cache_from_log(srv.log_path.read_text(errors="replace") if srv.log_path.is_file() else "")
        out = Memory(host_peak_rss_mib=round(peak.host_mib, 1) if peak.samples else None,
                     device_peak_mib=round(peak.device_mib, 1) if peak.device_mib is not None else None,
                     device_source=peak.device_source, kv_cache_tokens=tokens, kv_cache_gib=gib,
                     samples=peak.samples, device_samples=peak.device_samples)
        self.s.results.memory = out
        return out
