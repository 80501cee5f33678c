"""Steps that deploy and exercise the model: the offline example, the server, requests, the benchmark.

Each step does the work, records it as a section of ``self.doc.results`` and
returns that section; the tables and plots are views (:mod:`.views`).
"""

from __future__ import annotations

import os
import sys
import time

from ..measure import accuracy
from ..engine import bench
from ..engine.commands import format_command, server_argv
from ..core.errors import TutorialError
from ..engine.isolated import run_group
from ..record.results import scrub
from ..record.schema import Benchmark, BenchConditions, Functional, OfflineExample, Server
from ..engine.processes import tail
from ..engine.server import HOST, VLLMServer


class ServingSteps:
    # -- offline Python API ----------------------------------------------------------
    def offline_example_code(self, model: str | None = None) -> str:
        """The report's vllm.LLM example for this build's weights and engine settings (a runnable script:
        the copy-paste one of :func:`npu_tutorials.engine.deploy.offline_code`, with this build's dtype and mode)."""
        from ..engine.deploy import offline_code

        if self.serve_path is None:
            self.prepare_serving_checkpoint()
        return offline_code(self.card, self.backend, model or str(self.serve_path), dtype=self.dtype, eager=self._eager)

    def run_offline_example(self, timeout: float = 1200) -> OfflineExample:
        """Run :meth:`offline_example_code` as its own Python process (its engine is gone before the
        server starts); record the script (weights path as ``<weights>``) and what it printed."""
        code = self.offline_example_code()
        script = self.artifacts / "offline_example.py"
        script.write_text(code)
        log = self.artifacts / "offline_example.log"
        # vLLM logs to stdout by default; keep stdout for the example's own print()
        env = {**os.environ, **self.run_env, "VLLM_CONFIGURE_LOGGING": "0"}
        t = time.monotonic()
        with self.step("offline example (vllm.LLM in its own process)"):
            proc = run_group([sys.executable, str(script)], env=env, timeout=timeout, what="the offline example")
        log.write_text(proc.stderr)
        if proc.returncode != 0:
            raise TutorialError(f"the offline example failed (exit {proc.returncode}); last lines of {log}:\n{tail(log)}")
        from ..engine.deploy import offline_output

        out = OfflineExample(code=self.offline_example_code("<weights>"), prompt=self.card.functional.prompt,
                             text=offline_output(self.card, proc.stdout), wall_s=round(time.monotonic() - t, 1))
        self.results.offline_example = out
        return out

    # -- serving ---------------------------------------------------------------------
    def start_server(self, extra: list[str] | None = None) -> VLLMServer:
        """Start the OpenAI-compatible server (with full-vocabulary logits enabled) and wait for it."""
        self._need_weights()
        if self.serve_path is None:
            self.prepare_serving_checkpoint()
        self._extra = list(extra or [])
        # the benchmark worker imports vLLM (seconds of one core) while the server starts, mostly on the other
        # core, so the first benchmark does not wait for it; no benchmark runs before the server is ready
        self.bench_worker  # noqa: B018 - starts the worker process
        self._launch(self.dtype, "server start")
        self.results.server = Server(command=self._shown_command(), base_url=self.server.base_url,
                                     startup_s=round(self.server.startup_s, 1), models=self.server.models())
        return self.server

    def _argv(self, dtype: str) -> tuple[list[str], int, list[str]]:

        port = self.port()
        extra = accuracy.RAW_LOGITS_FLAGS + self._extra
        changes = []
        if self.backend == "cpu" and not self.card.serve.enforce_eager:
            # torch.compile on the CPU adds minutes to every page build; the copy-paste commands keep graphs
            extra.append("--enforce-eager")
            changes.append("--enforce-eager on the CPU build (graph compilation would add minutes "
                           "to every build); accelerator builds compile graphs as the card says")
        elif self.eager_required and not self.card.serve.enforce_eager:
            extra.append("--enforce-eager")
            changes.append(f"--enforce-eager: {self.dtype_note}")
        max_len = self.card.serve.cpu_max_model_len if self.backend == "cpu" else None
        if max_len:
            changes.append(f"--max-model-len {max_len} on the CPU build (the server's KV cache and the "
                           "fp32 reference must share this machine's RAM)")
        if dtype != self.card.serve.dtype:
            changes.append(f"--dtype {dtype}: {self.dtype_note}")
        argv = server_argv(self.card, self.serve_path, self.backend, host=HOST, port=port, extra=extra,
                           native=True, dtype=dtype, max_model_len=max_len)
        return argv, port, changes

    def _launch(self, dtype: str, step: str, *, graphs: bool = False, flags: list[str] = (),
                env: dict[str, str] | None = None, model=None, label: str = "") -> VLLMServer:
        """Start a server in ``dtype``; ``graphs``: without --enforce-eager (graph mode), ``flags`` and
        ``env`` added, ``model`` instead of the served checkpoint (the tuning steps)."""

        argv, port, changes = self._argv(dtype)
        if graphs:
            argv = [a for a in argv if a != "--enforce-eager"]
        if model is not None:
            argv[argv.index("--model") + 1] = str(model)
        argv += list(flags)
        if not self.build_changes:
            self.build_changes = changes
            self.results.conditions.build_changes = list(changes)
        self.server_dtype = dtype
        verbose = os.environ.get("TUTORIAL_VERBOSE", "") not in ("", "0")
        self.server = VLLMServer(
            argv, host=HOST, port=port, env={**self.run_env, **(env or {})},
            log_path=self.artifacts / f"server-{dtype}{label}.log",
            on_wait=lambda s, line: self.progress.say(f"  waiting for the server ({s:.0f} s): {line}"),
            stream=self.progress.out if verbose else None)
        with self.step(step):
            self.server.start()
        return self.server

    def _shown_command(self) -> str:
        shown = ["python", *self.server.argv[1:]]
        return scrub(format_command(shown, self.run_env), self.path_placeholders())

    def _need_server(self) -> VLLMServer:
        if self.server is None:
            raise TutorialError("the server is not running: call start_server() first")
        return self.server

    def _server_for(self, role: str) -> VLLMServer:
        """The running server in the dtype ``role`` needs: "performance" uses the build's engine dtype,
        "accuracy" the card's (on a CPU without native bf16 a bf16 engine is started for the checks;
        the other is stopped first, the two never share the RAM)."""
        want = self.accuracy_dtype if role == "accuracy" else self.dtype
        srv = self._need_server()
        if self.server_dtype == want:
            return srv
        srv.stop()
        self._launch(want, f"server restart in {want} for the {role} steps")
        if role == "accuracy":
            note = (f"the engine-vs-reference checks ran on a {want} engine started for them (the same command "
                    f"with --dtype {want}); the performance figures come from the {self.dtype} engine")
            if note not in self.results.conditions.build_changes:
                self.results.conditions.build_changes.append(note)
        return self.server

    # -- functional check ------------------------------------------------------------
    def record_completion(self, prompt: str, completion) -> Functional:
        """Record an OpenAI completion (or chat completion) object from the functional check."""
        choice = completion.choices[0]
        chat = hasattr(choice, "message")
        u = completion.usage
        out = Functional(endpoint="chat" if chat else "completions", prompt=prompt,
                         text=choice.message.content if chat else choice.text, finish_reason=choice.finish_reason,
                         prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens)
        self.results.functional = out
        return out

    record_chat = record_completion

    # -- performance -----------------------------------------------------------------
    def bench_command(self) -> str:
        """``vllm bench serve`` as a reader would run it against this build's server."""
        args = bench.bench_args(self.profile, model=self.card.serve.served_model_name, tokenizer="<weights>",
                                base_url=self._need_server().base_url, seed=bench.run_seed("bench"))
        return format_command(["vllm", "bench", "serve", *args])

    def benchmark(self) -> Benchmark:
        """vLLM's own serving benchmark on the card's conditions for this profile, ``repeats`` runs
        (each with prompts of its own): every figure is the median over the runs."""
        import statistics

        from ..record.schema import Stat

        srv = self._server_for("performance")
        p = self.profile
        runs = []
        with self.step(f"vllm bench serve ({p.repeats} runs of {p.num_prompts} requests)"):
            for r in self.progress.iterate(range(p.repeats), "benchmark run"):
                runs.append(bench.run_serving_benchmark(srv, p, model=self.card.serve.served_model_name,
                                                        tokenizer=str(self.serve_path), out_dir=self.artifacts,
                                                        name="bench" if r == 0 else f"bench-r{r}",
                                                        worker=self.bench_worker))
        keys = runs[0].summary().keys()
        summary = {k: float(statistics.median(x.summary()[k] for x in runs)) for k in keys}
        out = Benchmark(name="bench", conditions=BenchConditions(**p.model_dump(exclude={"repeats"})),
                        command=self.bench_command(), summary=summary,
                        ttft_ms=[1000 * t for x in runs for t in x.data.get("ttfts", [])],
                        tpot_ms=[t for x in runs for t in x.per_request_tpot_ms()],
                        itl_ms=[1000 * t for x in runs for req in x.data.get("itls", []) for t in req],
                        repeats=len(runs), output_throughput=Stat.of([x.data["output_throughput"] for x in runs]))
        self.results.benchmark = out
        self._publish(runs[0].json_path, f"{self.card.key}-bench.json")
        return out
