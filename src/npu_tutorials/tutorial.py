"""One object per tutorial run: the card, the backend, the weights, the server, the results.

A gallery script reads like a report: each cell calls one step of a
:class:`Tutorial` and shows what it returns.  Every step records what it
measured; :meth:`Tutorial.finish` stops the server and writes the results
JSON with its provenance.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from functools import cached_property
from pathlib import Path

from . import accuracy, bench, consistency, efficiency, plots, reference, sweeps, tasks
from .backend import describe_environment, detect_backend, engine_dtype
from .cards import BenchProfile, load_card
from .commands import CONVERTED_ARCHS, build_env, format_command, server_argv
from .errors import TutorialError
from .results import artifacts_dir, git_commit, now_utc, write_results
from .server import VLLMServer, check_port_free, free_port, tail
from .tables import Table, fmt
from .weights import Weights, resolve_weights, weights_mode

PROFILES = ("full", "quick")
HOST = "127.0.0.1"


def select_profile(card, backend: str, requested: str | None = None) -> str:
    value = (requested or os.environ.get("TUTORIAL_PROFILE") or "").strip().lower()
    if value and value not in PROFILES:
        raise TutorialError(f"TUTORIAL_PROFILE={value!r} is not one of full, quick")
    if value:
        return value
    return "full" if backend in ("npu", "cuda") else card.benchmark.cpu_default


def choose_port() -> int:
    if os.environ.get("TUTORIAL_PORT"):
        try:
            port = int(os.environ["TUTORIAL_PORT"])
        except ValueError:
            raise TutorialError(f"TUTORIAL_PORT={os.environ['TUTORIAL_PORT']!r} is not a port number") from None
        check_port_free(HOST, port)
        return port
    return free_port(HOST)


def _vllm_supports(arch: str) -> bool:
    """Whether the installed vLLM registers ``arch`` (asked in a subprocess: importing vLLM here
    would print its start-up chatter into the page)."""
    code = ("import sys; from vllm.model_executor.models import ModelRegistry; "
            f"sys.exit(0 if {arch!r} in ModelRegistry.get_supported_archs() else 3)")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


class Tutorial:
    def __init__(self, key: str):
        self.t0 = time.monotonic()
        self.built_at = now_utc()
        self.card = load_card(key)
        self.backend = detect_backend()
        self.env = describe_environment(self.backend)
        self.profile_name = select_profile(self.card, self.backend)
        self.dtype, self.dtype_note = engine_dtype(self.card.serve.dtype, self.backend)
        self.mode = weights_mode()
        self.weights: Weights | None = None
        self.server: VLLMServer | None = None
        self.serve_path: Path | None = None  # what the engine loads (converted, where needed)
        self.route = "as is"
        self.results: dict = {}
        self.artifacts = artifacts_dir() / self.card.key
        shutil.rmtree(self.artifacts, ignore_errors=True)  # nothing stale from an earlier run
        self.artifacts.mkdir(parents=True)

    # -- environment -----------------------------------------------------------------
    def environment_table(self) -> Table:
        self.results["environment"] = self.env.to_dict()
        return Table(["item", "value"], self.env.rows(), caption=f"Where this page was built ({self.built_at})")

    @property
    def profile(self) -> BenchProfile:
        return self.card.benchmark.profiles[self.profile_name]

    def conditions_table(self) -> Table:
        p = self.profile
        full = self.card.benchmark.profiles["full"]
        rows = [["profile", self.profile_name, "full"],
                ["requests", p.num_prompts, full.num_prompts],
                ["input tokens", p.input_len, full.input_len],
                ["output tokens", p.output_len, full.output_len],
                ["request rate (req/s)", str(p.request_rate), str(full.request_rate)],
                ["dtype", self.dtype, self.card.serve.dtype],
                ["eager mode", self.card.serve.enforce_eager or self.backend == "cpu", self.card.serve.enforce_eager]]
        notes = [] if self.profile_name == "full" else [
            "This build ran the reduced 'quick' profile; the report's conditions are the 'full' column."]
        if self.dtype_note:
            notes.append(f"dtype {self.dtype}: {self.dtype_note}.")
        note = " ".join(notes)
        return Table(["condition", "this build", "report"], rows, caption="Benchmark conditions", note=note)

    # -- weights ---------------------------------------------------------------------
    def prepare_weights(self) -> Weights:
        self.weights = resolve_weights(self.card, self.mode)
        self.results["weights"] = self.weights.to_dict()
        return self.weights

    def weights_table(self) -> Table:
        w = self._need_weights()
        cfg = json.loads((w.path / "config.json").read_text())
        rows = [["weights", w.label()], ["mode (TUTORIAL_WEIGHTS)", self.mode], ["path", str(w.path)],
                ["architecture", ", ".join(cfg.get("architectures", []))]]
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "intermediate_size", "vocab_size", "max_position_embeddings", "tie_word_embeddings",
                    "rope_theta", "torch_dtype"):
            if key in cfg:
                rows.append([key, fmt(cfg[key])])
        note = ("" if w.is_real else
                "Stand-in weights: generated text is random and task accuracy means nothing; "
                "speed and engine-vs-reference agreement are still real measurements of this network's shape.")
        return Table(["item", "value"], rows, caption="Weights used by this build", note=note)

    def properties_table(self) -> Table:
        """The model's property table, from the card and its config (inferred fields marked)."""
        cfg = self.card.config
        inferred = set(self.card.stand_in.inferred_fields)
        def val(key):  # noqa: E306
            return f"{cfg[key]} (inferred)" if key in inferred else cfg[key]
        kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        from math import prod

        from .layouts import for_config

        nparams = sum(prod(shape) for _, shape, _ in for_config(cfg).parameters(cfg))
        rows = [["architecture", self.card.architecture],
                ["parameters (counted from the config)", f"{nparams / 1e9:.3f} B"],
                ["hidden size", val("hidden_size")], ["attention heads", f"{cfg['num_attention_heads']} ({kv} KV)"],
                ["layers", val("num_hidden_layers")],
                ["max position embeddings", val("max_position_embeddings")],
                ["vocabulary", val("vocab_size")], ["model type", "causal language model (decoder only)"],
                ["weights source", " / ".join(f"{h}: {r.id}" for h, r in
                                              (("ModelScope", self.card.hub.modelscope),
                                               ("Hugging Face", self.card.hub.huggingface)) if r)]]
        note = (f"Fields marked inferred are not in the model's published config: {', '.join(sorted(inferred))}."
                if inferred else "")
        return Table(["property", "value"], rows, caption=f"{self.card.name}", note=note)

    def prepare_serving_checkpoint(self) -> Table:
        """Decide how the engine loads the weights: as is, natively with remote code, or converted."""
        w = self._need_weights()
        arch = self.card.architecture
        why = ""
        self.serve_path, self.route = w.path, "as is"
        if arch in CONVERTED_ARCHS:
            from .convert import ensure_converted

            native_ok = _vllm_supports(arch)
            if native_ok and w.is_real:
                self.route = "native (--trust-remote-code)"
                why = f"the installed vLLM still registers {arch} and the real checkpoint ships its remote code"
            else:
                self.serve_path, self.route = ensure_converted(w.path), f"converted to {CONVERTED_ARCHS[arch]}"
                reference.trim_memory()
                why = (f"the installed vLLM has no {arch} (removed after 0.23.0)" if not native_ok else
                       "stand-in checkpoints carry no remote code")
        self.results["serving_checkpoint"] = {"route": self.route, "path": str(self.serve_path), "why": why}
        rows = [["route", self.route], ["engine loads", str(self.serve_path)]] + ([["why", why]] if why else [])
        return Table(["", ""], rows, caption="How this build serves the checkpoint")

    @cached_property
    def reference_path(self) -> Path:
        """The checkpoint the fp32 CPU reference loads: the converted one where there is one.

        (tests/test_convert.py proves transformers' Qwen2 on converted weights equals an
        independent forward of the original architecture.)"""
        if self.card.architecture in CONVERTED_ARCHS:
            from .convert import ensure_converted

            return ensure_converted(self._need_weights().path)
        return self._need_weights().path

    def _need_weights(self) -> Weights:
        if self.weights is None:
            raise TutorialError("call prepare_weights() first")
        return self.weights

    # -- offline Python API ----------------------------------------------------------
    def offline_example_code(self) -> str:
        """The report's vllm.LLM example, for this build's weights (a runnable script)."""
        s, f = self.card.serve, self.card.functional
        if self.serve_path is None:
            self.prepare_serving_checkpoint()
        args = [f'model="{self.serve_path}"', f'dtype="{self.dtype}"', f"max_model_len={s.max_model_len}"]
        if s.enforce_eager or self.backend == "cpu":
            args.append("enforce_eager=True")
        if s.trust_remote_code and self.route.startswith("native"):
            args.append("trust_remote_code=True")
        if self.backend != "cpu" and s.gpu_memory_utilization:
            args.append(f"gpu_memory_utilization={s.gpu_memory_utilization}")
        lines = [
            "from vllm import LLM, SamplingParams",
            "",
            'if __name__ == "__main__":  # vLLM starts its engine in a spawned process',
            "    llm = LLM(",
            *[f"        {a}," for a in args],
            "    )",
            f"    sampling_params = SamplingParams(temperature={f.temperature}, max_tokens={f.max_tokens})",
            f"    outputs = llm.generate([{f.prompt!r}], sampling_params)",
            "    print(outputs[0].outputs[0].text)",
        ]
        return "\n".join(lines) + "\n"

    def run_offline_example(self, timeout: float = 1200) -> dict:
        """Run :meth:`offline_example_code` as its own Python process; return its output."""
        code = self.offline_example_code()
        script = self.artifacts / "offline_example.py"
        script.write_text(code)
        log = self.artifacts / "offline_example.log"
        # vLLM logs to stdout by default; keep stdout for the example's own print()
        env = {**os.environ, **build_env(self.card, self.backend), "VLLM_CONFIGURE_LOGGING": "0"}
        t = time.monotonic()
        with open(log, "wb") as err:
            try:
                proc = subprocess.run([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=err, env=env,
                                      timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)
            except subprocess.TimeoutExpired:
                raise TutorialError(f"the offline example did not finish in {timeout:.0f} s; see {log}") from None
        if proc.returncode != 0:
            raise TutorialError(f"the offline example failed (exit {proc.returncode}); last lines of {log}:\n{tail(log)}")
        out = {"text": proc.stdout.decode(errors="replace").strip(), "wall_s": time.monotonic() - t,
               "prompt": self.card.functional.prompt}
        self.results["offline_example"] = out
        return out

    # -- serving ---------------------------------------------------------------------
    def start_server(self, extra: list[str] | None = None) -> VLLMServer:
        """Start the OpenAI-compatible server (with full-vocabulary logits enabled) and wait for it."""
        self._need_weights()
        if self.serve_path is None:
            self.prepare_serving_checkpoint()
        port = choose_port()
        extra = accuracy.RAW_LOGITS_FLAGS + list(extra or [])
        self.build_changes = []
        if self.backend == "cpu" and not self.card.serve.enforce_eager:
            # torch.compile on the CPU adds minutes to every page build; the copy-paste commands keep graphs
            extra.append("--enforce-eager")
            self.build_changes.append("--enforce-eager on the CPU build (graph compilation would add minutes "
                                      "to every build); accelerator builds compile graphs as the card says")
        max_len = self.card.serve.cpu_max_model_len if self.backend == "cpu" else None
        if max_len:
            self.build_changes.append(f"--max-model-len {max_len} on the CPU build (the server's KV cache and the "
                                      "fp32 reference must share this machine's RAM)")
        argv = server_argv(self.card, self.serve_path, self.backend, host=HOST, port=port, extra=extra,
                           native=self.route.startswith("native") or self.card.architecture not in CONVERTED_ARCHS,
                           dtype=self.dtype, max_model_len=max_len)
        if self.dtype_note:
            self.build_changes.append(f"--dtype {self.dtype}: {self.dtype_note}")
        self.server = VLLMServer(argv, host=HOST, port=port, env=build_env(self.card, self.backend),
                                 log_path=self.artifacts / "server.log")
        self.server.start()
        self.results["server"] = {"command": self.server_command(), "startup_s": self.server.startup_s,
                                  "models": self.server.models(), "build_changes": self.build_changes}
        return self.server

    def server_command(self) -> str:
        argv = list(self._need_server().argv)
        argv[0] = "python"
        text = format_command(argv, build_env(self.card, self.backend))
        notes = ["# --max-logprobs -1 --logprobs-mode raw_logits: for the accuracy checks on this page"]
        notes += [f"# {c}" for c in getattr(self, "build_changes", [])]
        return text + "\n" + "\n".join(notes)

    def _need_server(self) -> VLLMServer:
        if self.server is None or not self.server.running:
            raise TutorialError("the server is not running: call start_server() first")
        return self.server

    def curl_command(self) -> str:
        f = self.card.functional
        body = {"model": self.card.serve.served_model_name, "max_tokens": f.max_tokens, "temperature": f.temperature}
        if f.endpoint == "chat":
            body = {"model": body["model"], "messages": [{"role": "user", "content": f.prompt}], **body}
            path = "/v1/chat/completions"
        else:
            body = {"model": body["model"], "prompt": f.prompt, **body}
            path = "/v1/completions"
        base = self._need_server().base_url
        text = json.dumps(body, ensure_ascii=False, indent=2)
        return (f"# readiness\ncurl -sf {base}/v1/models\n# request\ncurl -s {base}{path} \\\n"
                f"  -H 'Content-Type: application/json' \\\n  -d {shlex.quote(text)}")

    def record_completion(self, prompt: str, completion) -> Table:
        """Record an OpenAI completion object from the functional check; show prompt, text, usage."""
        text = completion.choices[0].text
        u = completion.usage
        self.results["functional"] = {"prompt": prompt, "model": completion.model, "text": text,
                                      "finish_reason": completion.choices[0].finish_reason,
                                      "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
        rows = [["prompt", prompt], ["completion", text],
                ["finish reason", completion.choices[0].finish_reason],
                ["usage", f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens"]]
        note = "" if self._need_weights().is_real else "Stand-in weights: the text is random tokens by design."
        return Table(["", ""], rows, caption="Functional check through the OpenAI client", note=note)

    def record_chat(self, prompt: str, completion) -> Table:
        """Record an OpenAI chat completion from the functional check; show prompt, reply, usage."""
        text = completion.choices[0].message.content
        u = completion.usage
        self.results["functional"] = {"prompt": prompt, "model": completion.model, "text": text,
                                      "finish_reason": completion.choices[0].finish_reason,
                                      "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
        reported = self.card.reported.figures.get("chat", {}).get("reply")
        rows = [["user", prompt], ["assistant (this build)", text],
                ["finish reason", completion.choices[0].finish_reason],
                ["usage", f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens"]]
        if reported:
            rows.append([f"assistant (reported, {self.card.reported.hardware})", reported])
        note = "" if self._need_weights().is_real else "Stand-in weights: the reply is random tokens by design."
        return Table(["", ""], rows, caption="Chat request through the OpenAI client", note=note)

    # -- performance -----------------------------------------------------------------
    def bench_command(self) -> str:
        w = self._need_weights()
        args = bench.bench_args(self.profile, model=self.card.serve.served_model_name, tokenizer=str(self.serve_path or w.path),
                                base_url=self._need_server().base_url, seed=bench.run_seed("bench"))
        return format_command(["vllm", "bench", "serve", *args])

    def benchmark(self) -> bench.BenchResult:
        w = self._need_weights()
        res = bench.run_serving_benchmark(self._need_server(), self.profile, model=self.card.serve.served_model_name,
                                          tokenizer=str(self.serve_path or w.path), out_dir=self.artifacts, name="bench")
        self.results["benchmark"] = {"profile": self.profile_name, "conditions": self.profile.model_dump(),
                                     "summary": res.summary(), "json": res.json_path.name}
        self._publish(res.json_path, f"{self.card.key}-bench.json")
        return res

    def bench_table(self, res: bench.BenchResult, reported_key: str | None = None) -> Table:
        reported = self.card.reported.figures.get(reported_key or "bench", {})
        cols = ["metric", "this build", "unit"] + ([f"reported ({self.card.reported.hardware})"] if reported else [])
        rows = []
        for label, key, unit in bench.SUMMARY_ROWS:
            if key in res.data:
                row = [label, res.data[key], unit]
                if reported:
                    row.append(reported.get(key))
                rows.append(row)
        note = (f"'reported' figures are cited from the original evaluation ({self.card.reported.source}); "
                "they were not measured by this build." if reported else "")
        return Table(cols, rows, caption=f"vllm bench serve, {self.profile_name} profile, on {self.env.device_name}",
                     note=note)

    def bench_plot(self, res: bench.BenchResult):
        return plots.latency_distributions(res, f"{self.card.name} on {self.backend}: per-request latency "
                                                f"({res.profile.num_prompts} requests, {res.profile.input_len} in / "
                                                f"{res.profile.output_len} out)")

    # -- accuracy --------------------------------------------------------------------
    def logits_agreement(self) -> accuracy.LogitsReport:
        check = self.card.accuracy.logits
        if check is None:
            raise TutorialError(f"cards/{self.card.key}.yaml has no accuracy.logits section")
        w = self._need_weights()
        rep = accuracy.logits_agreement(self._need_server(), self.card.serve.served_model_name, w.path, check,
                                        self.card.vocab_size, w.is_real)
        self.results["logits_agreement"] = {"per_prompt": rep.rows, "summary": rep.summary,
                                            "thresholds": rep.thresholds, "passed": rep.verdict().passed,
                                            "meaningful_for_model_quality": w.is_real}
        return rep

    def logits_table_with_reported(self, rep: accuracy.LogitsReport) -> Table:
        ours = rep.summary
        rep_fig = self.card.reported.figures.get("logits", {})
        rows = [["normalized MSE (%)", ours["nmse_pct"], rep_fig.get("nmse_pct")],
                ["cosine similarity", fmt(ours["cosine"], 6), rep_fig.get("cosine")],
                ["top-1 agreement (%)", ours["top1_pct"], rep_fig.get("top1_pct")],
                ["top-5 overlap (%)", ours["top5_pct"], rep_fig.get("top5_pct")],
                ["KL divergence (nats)", ours["kl_nats"], rep_fig.get("kl_nats")]]
        return Table(["metric", f"this build ({self.backend} engine, {self.dtype}, vs fp32 CPU)",
                      f"reported ({self.card.reported.hardware})"], rows,
                     caption="Summary beside the report's figures",
                     note=f"Reported figures are cited from {self.card.reported.source}, not measured here.")

    def logits_plot(self, rep: accuracy.LogitsReport):
        return plots.logits_error(rep, f"{self.card.name}: {self.backend} engine ({self.dtype}) "
                                       "vs fp32 CPU reference")

    def forward_consistency(self) -> consistency.ConsistencyReport:
        check = self.card.accuracy.consistency
        w = self._need_weights()
        rep = consistency.forward_consistency(self._need_server(), self.card.serve.served_model_name,
                                              self.reference_path, check, self.card.vocab_size, w.is_real)
        self.results["forward_consistency"] = rep.to_dict()
        return rep

    def consistency_table_with_reported(self, rep: consistency.ConsistencyReport) -> Table:
        r = self.card.reported.figures.get("consistency", {})
        rows = [["top-1 agreement, all positions (%)", rep.top1_pct, r.get("top1_pct")],
                ["perplexity relative difference (%)", rep.ppl_rel_diff_pct, r.get("ppl_rel_diff_pct")],
                ["cosine (full-vocabulary logits)", fmt(rep.cosine, 7), "–"],
                ["hidden-state cosine", "not measured", r.get("hidden_cosine")],
                ["KL divergence (nats)", rep.kl_nats, r.get("kl")]]
        return Table(["metric", f"this build ({self.backend} engine, {self.dtype}, vs fp32 CPU)",
                      f"reported ({self.card.reported.hardware})"], rows,
                     caption=f"One forward pass over {rep.num_tokens} tokens",
                     note="The server does not expose hidden states, so this build compares the logits "
                          "(the last layer's hidden state times lm_head) instead. Reported figures are "
                          f"cited from {self.card.reported.source}, not measured here.")

    def _stop_ids(self) -> list[int] | None:
        p = self.serve_path or self._need_weights().path
        gen = json.loads((p / "generation_config.json").read_text()) if (p / "generation_config.json").is_file() else {}
        eos = gen.get("eos_token_id")
        return eos if isinstance(eos, list) else ([eos] if eos is not None else None)

    def text_consistency(self) -> list[consistency.TextRow]:
        qa = self.card.accuracy.qa
        rows = consistency.text_consistency(self._need_server(), self.card.serve.served_model_name,
                                            self.reference_path, [i.prompt for i in qa.items], qa.max_tokens,
                                            chat=True, stop_ids=self._stop_ids())
        exact = sum(r.exact for r in rows)
        similar = sum((not r.exact) and r.similarity >= 0.5 for r in rows)
        self.results["text_consistency"] = {"rows": [r.to_dict() for r in rows], "exact": exact,
                                            "similar": similar, "total": len(rows)}
        return rows

    def text_table(self, rows) -> Table:
        t = consistency.text_table(rows, self._need_weights().is_real, self.dtype)
        r = self.card.reported.figures.get("text_consistency")
        exact = sum(x.exact for x in rows)
        t.caption += f": {exact} / {len(rows)} exact"
        if r:
            t.caption += f" (reported: {r['exact']} / {r['total']} exact, {r['similar']} similar)"
        return t

    def qa_scores(self, rows) -> Table:
        qa = self.card.accuracy.qa
        table, correct = tasks.qa_table(qa.items, [r.engine_text for r in rows], self._need_weights().is_real)
        rep = self.card.reported.figures.get("qa")
        if rep:
            table.caption += f" (reported: {rep['correct']} / {rep['total']})"
        self.results["qa"] = {"correct": correct, "total": len(qa.items),
                              "meaningful_for_model_quality": self._need_weights().is_real}
        return table

    def gsm(self) -> Table:
        g = self.card.accuracy.gsm
        size = g.profiles[self.profile_name]
        source, problems = tasks.gsm_problems(size.num_problems, g.seed)
        srv, model = self._need_server(), self.card.serve.served_model_name
        outs = consistency.parallel(lambda p: srv.post("/v1/chat/completions", {
            "model": model, "messages": [{"role": "user", "content": tasks.GSM_INSTRUCTION + p.question}],
            "temperature": 0.0, "max_tokens": size.max_tokens})["choices"][0]["message"]["content"], problems, 20)
        ok = [tasks.gsm_correct(o, p.answer) for o, p in zip(outs, problems)]
        real = self._need_weights().is_real
        self.results["gsm"] = {"source": source, "correct": sum(ok), "total": len(ok), "max_tokens": size.max_tokens,
                               "accuracy_pct": 100 * sum(ok) / len(ok), "meaningful_for_model_quality": real}
        rep = self.card.reported.figures.get("gsm8k", {})
        rows = [["problems", source, "GSM8K, first 20"], ["answered correctly", f"{sum(ok)} / {len(ok)}",
                 f"{rep.get('correct')} / {rep.get('total')}"],
                ["accuracy", f"{100 * sum(ok) / len(ok):.1f} %", f"{rep.get('accuracy_pct')} %"],
                ["max new tokens", size.max_tokens, "–"]]
        note = ("Stand-in (random) weights: 0 % here is expected and says nothing about the model; "
                "the pipeline (problems, generation, answer extraction, scoring) is what ran. "
                if not real else "") + f"Reported figures are cited from {self.card.reported.source}."
        return Table(["", "this build", f"reported ({self.card.reported.hardware})"], rows,
                     caption="GSM-style math word problems, greedy", note=note)

    def gsm_examples(self, n: int = 2) -> Table:
        g = self.card.accuracy.gsm
        _, problems = tasks.gsm_problems(g.profiles[self.profile_name].num_problems, g.seed)
        return Table(["question", "answer"], [[p.question, p.answer] for p in problems[:n]],
                     caption="The first problems of the set")

    def e2e_config(self) -> str:
        from .e2e import e2e_config

        text = e2e_config(self.card)
        path = self.artifacts / f"{self.card.name}.yaml"
        path.write_text(text)
        self._publish(path, path.name)
        self.results["e2e_config"] = path.name
        return text

    # -- greedy agreement, sweeps, efficiency ---------------------------------------------
    def greedy_agreement(self) -> list[consistency.TextRow]:
        g = self.card.accuracy.greedy
        rows = consistency.text_consistency(self._need_server(), self.card.serve.served_model_name,
                                            self.reference_path, g.prompts, g.num_tokens, chat=False)
        self.results["greedy_agreement"] = {
            "num_tokens": g.num_tokens, "rows": [r.to_dict() for r in rows],
            "first_token_agreement_pct": 100 * sum(r.engine_ids[:1] == r.reference_ids[:1] for r in rows) / len(rows),
            "mean_match_rate_pct": 100 * sum(r.to_dict()["match_rate"] for r in rows) / len(rows)}
        return rows

    def greedy_table(self, rows) -> Table:
        t = Table(["prompt", "first token", f"{self.card.accuracy.greedy.num_tokens}-token match",
                   "first divergence", "ref. top-1/top-2 gap there", "max |logit err| at the first token"],
                  [[r.prompt, "same" if r.engine_ids[:1] == r.reference_ids[:1] else "differs",
                    f"{100 * r.to_dict()['match_rate']:.0f} %",
                    "–" if r.first_divergence is None else f"token {r.first_divergence}", r.margin_at_divergence,
                    self._typical_err] for r in rows],
                  caption=f"Greedy decoding: engine ({self.dtype}) vs fp32 CPU reference")
        s = self.results["greedy_agreement"]
        t.caption += (f": first-token agreement {s['first_token_agreement_pct']:.0f} %, "
                      f"mean match {s['mean_match_rate_pct']:.0f} %")
        if all(r.first_divergence is None for r in rows):
            t.note = (f"Every sequence is identical. The engine computes in {self.dtype} here"
                      + (" like the reference, so this checks the kernels, not reduced precision."
                         if self.dtype == "float32" else "."))
        elif not self._need_weights().is_real:
            t.note = ("Stand-in (random) weights: next-token distributions are nearly flat, so the best two logits "
                      "are often closer than the engine's numerical error; where the gap at the divergence point is "
                      "below that error, the flip is rounding, not a wrong kernel. After the first "
                      "different token the two continue from different texts.")
        return t

    @property
    def _typical_err(self) -> float | None:
        """Largest |engine - reference| logit error at the first greedy position (measured here)."""
        if not hasattr(self, "_err_cache"):
            g = self.card.accuracy.greedy
            ids = reference.tokenize(self.reference_path, g.prompts[0])
            eng = accuracy.engine_last_logits(self._need_server(), self.card.serve.served_model_name, ids,
                                              self.card.vocab_size)
            ref = reference.last_logits(self.reference_path, ids)[: self.card.vocab_size]
            self._err_cache = float(abs(eng - ref).max())
            self.results.setdefault("greedy_agreement", {})["typical_max_abs_err"] = self._err_cache
        return self._err_cache

    @property
    def sweep(self):
        if not self.card.sweeps:
            raise TutorialError(f"cards/{self.card.key}.yaml has no sweeps section")
        return self.card.sweeps[self.profile_name]

    def input_length_sweep(self) -> list[dict]:
        reference.release()  # the engine needs the memory under load more than the reference does now
        rows = sweeps.input_length_sweep(self._need_server(), self.sweep, model=self.card.serve.served_model_name,
                                         tokenizer=str(self.serve_path), out_dir=self.artifacts / "sweeps")
        self.results["input_length_sweep"] = rows
        return rows

    def concurrency_sweep(self) -> list[dict]:
        reference.release()
        rows = sweeps.concurrency_sweep(self._need_server(), self.sweep, self.profile,
                                        model=self.card.serve.served_model_name, tokenizer=str(self.serve_path),
                                        out_dir=self.artifacts / "sweeps")
        sc = efficiency.scaling({r["concurrency"]: r["output_throughput"] for r in rows})
        for r in rows:
            r.update(sc[r["concurrency"]])
        self.results["concurrency_sweep"] = rows
        return rows

    def length_table(self, rows) -> Table:
        return Table(["input tokens", "prefill latency (ms)", "TPOT (ms)",
                      f"TTFT, {rows[0]['concurrent_requests']} at once (ms)", "p99 of that (ms)"],
                     [[r["input_len"], r["prefill_ms"], r["tpot_ms"], r["ttft_concurrent_ms"],
                       r["ttft_concurrent_p99_ms"]] for r in rows],
                     caption=f"Latency against input length ({self.sweep.sweep_output_len} output tokens, "
                             f"{self.profile_name} profile)")

    def concurrency_table(self, rows) -> Table:
        rep = self.card.reported.figures.get("scaling", {})
        last = rows[-1]
        note = (f"Reported ({self.card.reported.hardware}): {rep['speedup_16']}x at 16, "
                f"{rep['efficiency_16_pct']} % efficiency; cited from {self.card.reported.source}, not measured here."
                if rep else "")
        return Table(["concurrency", "output tok/s", "speedup vs 1", "efficiency", "mean TPOT (ms)", "mean TTFT (ms)"],
                     [[r["concurrency"], r["output_throughput"], f"{r['speedup']:.2f}x",
                       f"{100 * r['efficiency']:.1f} %", r["mean_tpot_ms"], r["mean_ttft_ms"]] for r in rows],
                     caption=f"Throughput against concurrency: {last['speedup']:.2f}x at {last['concurrency']} "
                             f"({100 * last['efficiency']:.1f} % efficiency)", note=note)

    def sweep_plot(self, length_rows, conc_rows):
        return plots.sweeps(length_rows, conc_rows, f"{self.card.name} on {self.backend} ({self.dtype}, "
                                                    f"chunked prefill, {self.profile_name} profile)")

    def greedy_plot(self, rows):
        return plots.greedy_agreement(rows, f"{self.card.name}: greedy {self.card.accuracy.greedy.num_tokens} tokens, "
                                            f"{self.backend} engine vs fp32 CPU")

    def efficiency(self, conc_rows: list[dict]) -> Table:
        """Roofline fraction at concurrency 1, and the speedup over plain transformers ``generate``."""
        w = self._need_weights()
        bw, bw_source = efficiency.device_bandwidth(self.backend, self.env.device_name)
        wb = efficiency.weight_bytes(self.serve_path or w.path, self.dtype)
        one = next(r for r in conc_rows if r["concurrency"] == 1)
        roof = efficiency.roofline(wb, one["mean_tpot_ms"], bw)
        device = {"cpu": "cpu", "cuda": "cuda", "npu": "npu"}[self.backend]
        top = max(r["concurrency"] for r in conc_rows)
        reference.release()  # the baseline loads the model again; do not hold two copies
        base = {}
        for batch in sorted({1, top}):
            base[batch] = efficiency.hf_generate_throughput(self.serve_path or w.path, batch, self.profile.input_len,
                                                            self.sweep.baseline_new_tokens, device, self.dtype)
        vllm_thr = {r["concurrency"]: r["output_throughput"] for r in conc_rows}
        speedup = {b: vllm_thr[b] / base[b]["output_tokens_per_s"] for b in base}
        self.results["efficiency"] = {"roofline": roof, "bandwidth_source": bw_source, "hf_baseline": base,
                                      "speedup_vs_transformers": speedup}
        gb = 1e9
        rows = [["weights read per decoded token", f"{wb / gb:.2f} GB ({self.dtype})"],
                ["TPOT at concurrency 1 (vLLM)", f"{one['mean_tpot_ms']:.1f} ms"],
                ["achieved weight bandwidth", f"{roof['achieved_bytes_per_s'] / gb:.1f} GB/s"],
                ["device bandwidth", f"{bw / gb:.1f} GB/s ({bw_source})" if bw else bw_source],
                ["roofline (tokens/s at concurrency 1)", fmt(roof["roofline_tokens_per_s"])],
                ["fraction of the roofline reached",
                 f"{100 * roof['fraction']:.1f} %" if roof["fraction"] is not None else "–"]]
        for b in sorted(base):
            rows.append([f"transformers generate, batch {b} ({self.dtype})",
                         f"{base[b]['output_tokens_per_s']:.2f} tok/s ({base[b]['new_tokens']} new tokens)"])
            rows.append([f"vLLM speedup at concurrency {b}", f"{speedup[b]:.2f}x"])
        return Table(["", ""], rows, caption="Efficiency: memory-bandwidth roofline and the plain-transformers baseline",
                     note="Decoding at concurrency 1 reads every weight once per token, so weight bytes / TPOT is "
                          "the bandwidth achieved. The baseline is the same checkpoint through transformers "
                          "generate on the same device, in this build.")

    def known_limitations(self) -> Table:
        """Warnings the server printed in this build (deduplicated): what this backend ignored or lacked."""
        import re

        log = self._need_weights() and (self.artifacts / "server.log")
        seen: dict[str, str] = {}
        for line in log.read_text(errors="replace").splitlines() if log.is_file() else []:
            m = re.search(r"WARNING [\d-]+ [\d:]+ \[([^\]]+)\] (.*)", line)
            if m:
                msg = re.sub(r"\d+(\.\d+)?", "N", m.group(2))[:220]
                seen.setdefault(msg, m.group(2)[:220])
        rows = [[v] for v in seen.values()]
        self.results["server_warnings"] = list(seen.values())
        return Table(["warning printed by the vLLM server in this build"], rows or [["(none)"]],
                     caption=f"What the {self.backend} backend reported while serving")

    # -- wrap-up ---------------------------------------------------------------------
    def _publish(self, path: Path, name: str) -> None:
        """Copy a file next to the generated page so the page can offer it for download."""
        dest = os.environ.get("TUTORIAL_DOWNLOADS_DIR")
        if dest:
            Path(dest).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(dest) / name)

    def provenance(self) -> dict:
        w = self.weights
        return {
            "built_at": self.built_at, "git_commit": git_commit(), "backend": self.backend,
            "device": f"{self.env.device_name} x {self.env.device_count}", "versions": self.env.versions,
            "weights": w.label() if w else None, "weights_kind": w.kind if w else None,
            "profile": self.profile_name, "engine_dtype": self.dtype,
            "wall_time_s": round(time.monotonic() - self.t0, 1),
        }

    def finish(self) -> Table:
        """Stop the server, write ``_build/results/<model>.json`` and show the provenance."""
        if self.server is not None:
            self.server.stop()
        prov = self.provenance()
        path = write_results(self.card.key, prov, self.results)
        self._publish(path, f"{self.card.key}-results.json")
        rows = [[k, v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict) else fmt(v)]
                for k, v in prov.items()]
        rows.append(["results JSON", str(path)])
        return Table(["", ""], rows, caption="Provenance of every number on this page")
