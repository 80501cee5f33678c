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
import tempfile
import time
from pathlib import Path

from . import accuracy, bench, plots
from .backend import describe_environment, detect_backend
from .cards import BenchProfile, load_card
from .commands import build_env, format_command, server_argv
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


class Tutorial:
    def __init__(self, key: str):
        self.t0 = time.monotonic()
        self.built_at = now_utc()
        self.card = load_card(key)
        self.backend = detect_backend()
        self.env = describe_environment(self.backend)
        self.profile_name = select_profile(self.card, self.backend)
        self.mode = weights_mode()
        self.weights: Weights | None = None
        self.server: VLLMServer | None = None
        self.results: dict = {}
        self.artifacts = artifacts_dir() / self.card.key
        self.artifacts.mkdir(parents=True, exist_ok=True)

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
                ["dtype", self.card.serve.dtype, self.card.serve.dtype],
                ["eager mode", self.card.serve.enforce_eager, self.card.serve.enforce_eager]]
        note = ("" if self.profile_name == "full" else
                "This build ran the reduced 'quick' profile; the report's conditions are the 'full' column.")
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

    def _need_weights(self) -> Weights:
        if self.weights is None:
            raise TutorialError("call prepare_weights() first")
        return self.weights

    # -- offline Python API ----------------------------------------------------------
    def offline_example_code(self) -> str:
        """The report's vllm.LLM example, for this build's weights (a runnable script)."""
        s, f = self.card.serve, self.card.functional
        args = [f'model="{self._need_weights().path}"', f'dtype="{s.dtype}"', f"max_model_len={s.max_model_len}"]
        if s.enforce_eager:
            args.append("enforce_eager=True")
        if s.trust_remote_code:
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
        w = self._need_weights()
        port = choose_port()
        extra = accuracy.RAW_LOGITS_FLAGS + list(extra or [])
        argv = server_argv(self.card, w.path, self.backend, host=HOST, port=port, extra=extra)
        self.server = VLLMServer(argv, host=HOST, port=port, env=build_env(self.card, self.backend),
                                 log_path=self.artifacts / "server.log")
        self.server.start()
        self.results["server"] = {"command": self.server_command(), "startup_s": self.server.startup_s,
                                  "models": self.server.models()}
        return self.server

    def server_command(self) -> str:
        argv = list(self._need_server().argv)
        argv[0] = "python"
        return format_command(argv, build_env(self.card, self.backend))

    def _need_server(self) -> VLLMServer:
        if self.server is None or not self.server.running:
            raise TutorialError("the server is not running: call start_server() first")
        return self.server

    def curl_command(self) -> str:
        f = self.card.functional
        body = json.dumps({"model": self.card.serve.served_model_name, "prompt": f.prompt,
                           "max_tokens": f.max_tokens, "temperature": f.temperature}, ensure_ascii=False, indent=2)
        return (f"curl {self._need_server().base_url}/v1/completions \\\n"
                f"  -H 'Content-Type: application/json' \\\n  -d {shlex.quote(body)}")

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

    # -- performance -----------------------------------------------------------------
    def bench_command(self) -> str:
        w = self._need_weights()
        args = bench.bench_args(self.profile, model=self.card.serve.served_model_name, tokenizer=str(w.path),
                                base_url=self._need_server().base_url)
        return format_command(["vllm", "bench", "serve", *args])

    def benchmark(self) -> bench.BenchResult:
        w = self._need_weights()
        res = bench.run_serving_benchmark(self._need_server(), self.profile, model=self.card.serve.served_model_name,
                                          tokenizer=str(w.path), out_dir=self.artifacts, name="bench")
        self.results["benchmark"] = {"profile": self.profile_name, "conditions": self.profile.model_dump(),
                                     "summary": res.summary(), "json": res.json_path.name}
        self._publish(res.json_path, f"{self.card.key}-bench.json")
        return res

    def bench_table(self, res: bench.BenchResult, reported_key: str | None = None) -> Table:
        reported = self.card.reported.figures.get(reported_key or "", {})
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
        return Table(["metric", f"this build ({self.backend} engine vs fp32 CPU)",
                      f"reported ({self.card.reported.hardware})"], rows,
                     caption="Summary beside the report's figures",
                     note=f"Reported figures are cited from {self.card.reported.source}, not measured here.")

    def logits_plot(self, rep: accuracy.LogitsReport):
        return plots.logits_error(rep, f"{self.card.name}: {self.backend} engine ({self.card.serve.dtype}) "
                                       "vs fp32 CPU reference")

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
            "profile": self.profile_name, "wall_time_s": round(time.monotonic() - self.t0, 1),
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
