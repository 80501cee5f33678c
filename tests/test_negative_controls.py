"""Negative controls: every engine-vs-reference check says FAIL when the engine serves a wrong
checkpoint (the tiny stand-in with one layer's MLP down-projection perturbed by a stated relative
amount) and is compared with the reference of the right one.  The same checks and thresholds
PASS on the right checkpoint (conftest's ``raw_results``, asserted in test_engine.py).

Last, the wrong checkpoint's server, no longer needed, is killed in the middle of a benchmark:
the dead server is named (step, signal, log tail) and nothing of it is left running.  (One
engine start serves both; the kill tests come last in this file.)
"""

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from npu_tutorials.checks import controls
from npu_tutorials.measure import metrics

# The wrong checkpoint (conftest's WRONG_FAMILY, WRONG_REL): its engine is spawned when collection ends.


def test_perturb_checkpoint(tiny, tmp_path):
    from safetensors.torch import load_file

    meta = controls.perturb_checkpoint(tiny.path, tmp_path / "p", rel=0.1, seed=3)
    assert meta["tensor"] == "model.layers.0.mlp.down_proj.weight" and meta["dtype"] == "bfloat16"
    assert meta["realized_rel"] == pytest.approx(0.1, rel=0.05)  # bf16 rounding is small next to 10 %
    assert json.loads((tmp_path / "p" / controls.MARKER).read_text()) == meta
    a, b = load_file(str(tiny.path / "model.safetensors")), load_file(str(tmp_path / "p" / "model.safetensors"))
    changed = [k for k in a if not a[k].equal(b[k])]
    assert changed == [meta["tensor"]] and b[meta["tensor"]].dtype == a[meta["tensor"]].dtype
    d = (b[meta["tensor"]].float() - a[meta["tensor"]].float())
    assert float(d.pow(2).mean().sqrt()) == pytest.approx(meta["realized_rel"] * meta["rms"], rel=1e-4)
    assert {p.name for p in (tmp_path / "p").iterdir()} == \
        ({p.name for p in tiny.path.iterdir()} - {"STANDIN.json"}) | {controls.MARKER}
    # seeded: the same seed gives the same bytes, another seed other bytes
    controls.perturb_checkpoint(tiny.path, tmp_path / "q", rel=0.1, seed=3)
    controls.perturb_checkpoint(tiny.path, tmp_path / "r", rel=0.1, seed=4)
    q, r = (load_file(str(tmp_path / x / "model.safetensors"))[meta["tensor"]] for x in "qr")
    assert q.equal(b[meta["tensor"]]) and not r.equal(q)
    # bf16 rounds a tiny perturbation partly away: the realized size is recorded, not assumed
    small = controls.perturb_checkpoint(tiny.path, tmp_path / "s", rel=1e-4)
    assert small["realized_rel"] < 1e-4


def test_perturbation_names_and_refusals(tiny, tmp_path):
    assert controls.down_proj_name({"num_hidden_layers": 24}, 3) == "model.layers.3.mlp.down_proj.weight"
    assert controls.down_proj_name({"num_hidden_layers": 2, "kv_channels": 64}, 1) == "transformer.h.1.mlp.c_proj.weight"
    with pytest.raises(ValueError):
        controls.down_proj_name({"num_hidden_layers": 2}, 2)
    from npu_tutorials.core.errors import TutorialError

    with pytest.raises(TutorialError, match="no tensor"):
        controls.perturb_checkpoint(tiny.path, tmp_path / "x", rel=0.1, tensor="model.nothing.weight")


def test_first_failures():
    ok = {"passed": True, "checks": [{"metric": "a", "passed": True}, {"metric": "b", "passed": True}]}
    bad_a = {"passed": False, "checks": [{"metric": "a", "passed": False}, {"metric": "b", "passed": True}]}
    bad = {"passed": False, "checks": [{"metric": "a", "passed": False}, {"metric": "b", "passed": False}]}
    first, by_metric = controls.first_failures({"x": ok, "y": bad_a}, [{"rel": 0.01, "results": {"x": bad_a}},
                                                                        {"rel": 0.1, "results": {"x": bad}}])
    assert first == {"x": 0.01, "y": "baseline"}
    assert by_metric == {"x": {"a": 0.01, "b": 0.1}, "y": {"a": "baseline", "b": "above baseline"}}
    # run_ladder stops a check at its first failed verdict: a metric that had not failed by then is "above" that
    # rung, not "never"; one that ran to the last rung without failing is never
    first, by_metric = controls.first_failures({"x": ok, "z": ok}, [{"rel": 0.01, "results": {"x": bad_a, "z": ok}},
                                                                    {"rel": 0.1, "results": {"z": bad_a}}], top=0.1)
    assert first == {"x": 0.01, "z": 0.1}
    assert by_metric == {"x": {"a": 0.01, "b": "above 0.01"}, "z": {"a": 0.1, "b": None}}
    from npu_tutorials.checks.methods import _first
    assert _first("above 0.01") == "not by 0.01 (the check had failed; not climbed further)" and _first(None) == "never"


def test_the_ladder_stops_a_check_at_its_first_failed_verdict(tmp_path, monkeypatch):
    """run_ladder climbs a check until its verdict fails, not until every metric has (a near-tie count that no
    fault size moves kept every check climbing to the top, and a real-weights run took twice as long); a check
    that still passes climbs on.  The engine and the checkpoint writer are fakes with run_checks' and
    perturb_checkpoint's return shapes."""
    from contextlib import nullcontext

    ok = {"passed": True, "checks": [{"metric": "a", "passed": True}, {"metric": "b", "passed": True}]}
    bad_a = {"passed": False, "checks": [{"metric": "a", "passed": False}, {"metric": "b", "passed": True}]}
    ran = []

    def run_checks(srv, model, ref_path, spec, vocab_size, only):
        rel = srv
        ran.append((rel, only))
        return {c: (bad_a if rel and (c == "logits" or rel >= 0.1) else ok) for c in only}

    monkeypatch.setattr(controls, "run_checks", run_checks)
    monkeypatch.setattr(controls, "perturb_checkpoint",
                        lambda right, dst, rel, family, seed: {"realized_rel": rel, "rel": rel, "dst": str(dst)})
    spec = controls.ControlSpec(logits=object(), greedy=object())

    def serve(path):
        name = Path(path).name
        return nullcontext(float(name.split("rel")[1]) if "rel" in name else 0)

    out = controls.run_ladder(serve, tmp_path / "right", tmp_path / "ref", spec, "m", 10, tmp_path,
                              ladder=(0.01, 0.1, 1.0), families=("mlp",), log=lambda m: None)
    assert ran == [(0, ("logits", "greedy")), (0.01, ("logits", "greedy")), (0.1, ("greedy",))]
    fam = out["families"]["mlp"]
    assert fam["first_fail"] == {"logits": 0.01, "greedy": 0.1}
    assert fam["first_fail_by_metric"] == {"logits": {"a": 0.01, "b": "above 0.01"},
                                           "greedy": {"a": 0.1, "b": "above 0.1"}}


# -- on the real engine ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    """The wrong checkpoint's server (conftest: spawned when collection ended) and the perturbation's record."""
    from conftest import claim_engine

    srv, meta = claim_engine("wrong", tmp_path_factory.mktemp("wrong"))
    yield srv, meta
    srv.stop()


@pytest.fixture(scope="module")
def wrong_results(wrong, card, tiny, tiny_spec):
    srv, _ = wrong
    return controls.run_checks(srv, card.serve.served_model_name, tiny.path, tiny_spec, card.vocab_size)


@pytest.mark.engine
# chat consistency's limits are SmolLM2's chat-answer floor, so it is judged on trained weights
# (tests/test_trained_verdicts.py: the right engine PASSes, a misread RoPE FAILs), not on the tiny stand-in
@pytest.mark.parametrize("check", [c for c in controls.CHECKS if c != "chat_consistency"])
def test_a_wrong_checkpoint_fails_every_check(check, raw_results, wrong_results):
    assert raw_results[check]["passed"], f"{check} must pass on the right checkpoint for the control to mean anything"
    assert not wrong_results[check]["passed"], wrong_results[check]


@pytest.mark.engine
def test_the_log_probability_comparison_fails_too(wrong, card, tiny, tiny_spec):
    """What vllm-ascend returns (log-probabilities) of the wrong checkpoint fails the same thresholds."""
    from npu_tutorials.measure import accuracy, reference

    srv, _ = wrong
    t = tiny_spec.logits.thresholds.model_dump()
    raw_fail = lp_fail = False
    for prompt in tiny_spec.logits.prompts:
        ids = reference.tokenize(tiny.path, prompt)
        eng = accuracy.engine_last_logits(srv, card.serve.served_model_name, ids, card.vocab_size)
        ref = reference.last_logits(tiny.path, ids)[: card.vocab_size]
        raw = metrics.compare_logits(eng, ref)
        lp = metrics.compare_logits(metrics.log_softmax(eng).astype(np.float32), ref)
        assert (raw["compared_as"], lp["compared_as"]) == ("logits", "logprobs")
        assert lp["top1_match"] == raw["top1_match"]
        # log-probabilities are compared centred (metrics' docstring): the centred raw-logits figure
        centred = metrics.compare_logits(eng - eng.mean(), ref - ref.mean(), form="logits")
        assert lp["nmse_pct"] == pytest.approx(centred["nmse_pct"], rel=1e-3)
        raw_fail |= raw["nmse_pct"] >= t["nmse_pct_max"] or raw["top1_match"] < 1
        lp_fail |= lp["nmse_pct"] >= t["nmse_pct_max"] or lp["top1_match"] < 1
    assert raw_fail and lp_fail


# -- the dead server named (runs last: it kills the wrong checkpoint's server) ----------------
@pytest.mark.engine
def test_killed_during_a_benchmark(wrong, card, tiny, tmp_path):
    """SIGKILL (as the OOM killer would) while `vllm bench serve` runs: one TutorialError names it."""
    from npu_tutorials.engine.bench import run_serving_benchmark
    from npu_tutorials.inputs.cards import BenchProfile
    from npu_tutorials.core.errors import TutorialError
    from npu_tutorials.engine.processes import group_alive

    srv, _ = wrong
    pgid = srv.proc.pid
    # long enough that it is still running when the server is killed (each request: 2000 tokens)
    prof = BenchProfile(num_prompts=50, input_len=16, output_len=2000, max_concurrency=1)
    result: dict = {}

    def bench():
        try:
            with srv.step("the serving benchmark"):
                run_serving_benchmark(srv, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                      out_dir=tmp_path, name="doomed", timeout=900)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            result["exc"] = exc

    seen = len(srv.log_path.read_text(errors="replace"))
    t = threading.Thread(target=bench)
    t.start()
    # kill once the benchmark's requests reach the server (its access log shows a new completion request)
    for _ in range(600):
        if "POST /v1/completions" in srv.log_path.read_text(errors="replace")[seen:] or not t.is_alive():
            break
        t.join(0.5)
    assert t.is_alive(), f"the benchmark ended before the kill: {result}"
    os.kill(srv.proc.pid, signal.SIGKILL)
    t.join(300)
    assert not t.is_alive()
    exc = result.get("exc")
    assert isinstance(exc, TutorialError), repr(exc)
    msg = str(exc)
    assert msg.startswith("the vLLM server died during the serving benchmark (killed by signal SIGKILL)")
    log_lines = [ln for ln in srv.log_path.read_text(errors="replace").splitlines() if ln.strip()]
    assert str(srv.log_path) in msg and any(ln in msg for ln in log_lines[-30:])  # the log's own tail
    assert not group_alive(pgid)  # its engine workers were stopped too
    assert not srv.running and srv.exited()
    _ends_make_html_on_its_cause(exc, tmp_path)
    # later requests, and an exception from another client library inside a step, name the same death
    with pytest.raises(TutorialError, match=r"died during the serving benchmark \(killed by signal SIGKILL\)"):
        srv.post("/v1/completions", {"model": card.serve.served_model_name, "prompt": "Hi", "max_tokens": 1})
    # an exception from another client library inside a step (the OpenAI client's connection error)
    with pytest.raises(TutorialError, match="died during the serving benchmark") as info:
        with srv.step("the functional check"):
            raise ConnectionRefusedError("[Errno 111] Connection refused")
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def _ends_make_html_on_its_cause(exc, tmp_path):
    """This death as make html reports it (issue 40): sphinx-gallery's handler (site.failures) shows the message
    with no traceback and records its cause; the failed run's document carries it; the closing check's last line
    names the dead server and the signal."""
    import html

    from docs import make_doc

    from npu_tutorials.core.errors import FAILED_MARK, one_line
    from npu_tutorials.inputs.gallery_index import tutorials
    from npu_tutorials.record.results import write_doc
    from npu_tutorials.site import failures
    from npu_tutorials.tutorial import facade

    cause = "the vLLM server died during the serving benchmark (killed by signal SIGKILL)"
    script_vars: dict = {}
    rst = failures.handle_exception(lambda *a: pytest.fail("a TutorialError is shown without a traceback"),
                                    (type(exc), exc, exc.__traceback__), str(tmp_path / "gallery" / "qwen2_5_0_5b.py"),
                                    script_vars, {"src_dir": str(tmp_path), "abort_on_example_error": False})
    assert "Traceback" not in rst and FAILED_MARK in rst and script_vars["formatted_exception"] == cause
    assert facade._FAILURE == [cause] == [one_line(exc)]
    facade._FAILURE.clear()
    build = tmp_path / "b"
    page = build / "html" / "tutorials" / "models" / "qwen2_5_0_5b.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<div class="sphx-glr-script-out {FAILED_MARK}"><pre>TutorialError: {html.escape(str(exc))}</pre></div>')
    for stem in tutorials():
        if stem != "qwen2_5_0_5b":
            (page.parent / f"{stem}.html").write_text('<div class="tut-not-executed">Not executed</div>')
    doc = make_doc(status="failed")
    doc.provenance.failure = cause
    write_doc(doc, build / "results" / "qwen2.5-0.5b.json")
    r = subprocess.run([sys.executable, "scripts/check_site.py", "--built", "--build-dir", str(build)],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TUTORIAL_ONLY": ""})
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert r.stderr.splitlines()[-1] == f"check: qwen2_5_0_5b: the tutorial failed: {cause} (the next make html re-runs it)"


# -- the recorded ladder's script, end to end ------------------------------------------------
@pytest.mark.engine
@pytest.mark.slow  # the checks' verdicts on a wrong checkpoint: test_a_wrong_checkpoint_fails_every_check
def test_the_script_records_a_cards_ladder(tmp_path):
    """scripts/negative_controls.py on one card: its own checks PASS on its right (tiny, planted) checkpoint
    and FAIL at the rung asked for, and the record carries today's check digest (so make check would not
    call it stale).  The recorded ladders of every card are results/methods/negative-controls-*.json."""
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.checks.controls import check_digest, spec_for_card
    from npu_tutorials.checks.methods import stale_controls

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "scripts/negative_controls.py", "qwen2.5-0.5b", "--out-dir", str(tmp_path),
                        "--families", "mlp", "--ladder", "3"], cwd=root, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    d = json.loads((tmp_path / "negative-controls-qwen2.5-0.5b.json").read_text())
    assert {c: r["passed"] for c, r in d["baseline"].items()} == {"logits": True}
    assert d["families"]["mlp"]["first_fail"] == {"logits": 3.0}
    spec = spec_for_card(load_card("qwen2.5-0.5b"), d["spec"]["stop_ids"])
    assert d["check_digest"] == check_digest(spec) and stale_controls([d]) == []
    d["check_digest"] = "0" * 16
    assert stale_controls([d])[0].endswith("re-run scripts/negative_controls.py qwen2.5-0.5b")  # a command to paste


def test_an_engine_fault_the_engine_will_not_start_with_is_recorded_as_refused_with_its_error_line(tmp_path):
    """The precision faults exist where the CPU engine offers them: vLLM's CPU attention refuses an fp8 KV cache
    without AVX-512 or AMX (vllm/v1/attention/backends/cpu_attn.py ``_get_attn_isa`` raises NotImplementedError
    while the engine starts, and VLLMServer.start raises "exited with code 1 before it was ready" with its log's
    tail).  The run records that line, runs the next fault, and the methods page shows the fault as not offered."""
    from npu_tutorials.checks.methods import _engine_faults
    from npu_tutorials.core.errors import TutorialError

    log = ("the vLLM server exited with code 1 before it was ready; last lines of /tmp/x.log:\n"
           "(EngineCore pid=1) Traceback (most recent call last):\n"
           "(EngineCore pid=1)   File \"cpu_attn.py\", line 541, in _get_attn_isa\n"
           "(EngineCore pid=1) NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.\n"
           "RuntimeError: Engine core initialization failed. See root cause above.")
    started = []

    class Refusing:
        def __init__(self, path, flags):
            started.append(flags)

        def __enter__(self):
            raise TutorialError(log)

        def __exit__(self, *exc):
            return False

    faults = {"KV cache in fp8 (e4m3)": controls.PRECISION_FAULTS["KV cache in fp8 (e4m3)"],
              "norm epsilon x 1000": {"override": {"rms_norm_eps": 0.01}}}
    out = controls.run_engine_faults(Refusing, tmp_path, tmp_path, None, "m", 10, faults, log=lambda m: None)
    assert started == [("--kv-cache-dtype", "fp8_e4m3"), ("--hf-overrides", '{"rms_norm_eps": 0.01}')]
    assert out["KV cache in fp8 (e4m3)"]["refused"] == ("(EngineCore pid=1) NotImplementedError: FP8 KV cache on "
                                                        "CPU requires x86 with AVX-512 or AMX.")
    assert controls.refusal("port 8000 on 127.0.0.1 is busy; stop it") == "port 8000 on 127.0.0.1 is busy; stop it"
    judged = {"results": {"greedy": {"passed": False, "checks": [{"metric": "splits at decisive positions",
                                                                   "passed": False}]}}}
    md = "\n".join(_engine_faults({**out, "RoPE base / 10": {"override": {"rope_theta": 1.0}, **judged}}))
    assert "| KV cache in fp8 (e4m3) | `--kv-cache-dtype fp8_e4m3` | not offered here |" in md
    assert "| RoPE base / 10 | `--hf-overrides {\"rope_theta\": 1.0}` | FAIL: splits at decisive positions |" in md
    assert "the engine refused to start with it on the recording host: `(EngineCore pid=1) NotImplementedError" in md


def test_an_engine_fault_that_kills_the_server_while_judged_is_recorded_as_a_loud_failure(tmp_path, monkeypatch):
    """A fault the engine starts with and then dies on (VLLMServer names the dead server, a TutorialError) is
    recorded with that line, the next fault still runs, and the methods page shows every check failing."""
    from npu_tutorials.checks.methods import _engine_faults
    from npu_tutorials.core.errors import TutorialError

    class Starting:
        def __init__(self, path, flags):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def dies(*a, **k):
        raise TutorialError("the vLLM server exited with code -11 while serving; last lines:\nSegmentation fault")

    monkeypatch.setattr(controls, "run_checks", dies)
    out = controls.run_engine_faults(Starting, tmp_path, tmp_path, None, "m", 10,
                                     {"a": {"args": ["--x"]}, "b": {"args": ["--y"]}}, log=lambda m: None)
    assert out["a"]["died"].startswith("the vLLM server exited with code -11") and "died" in out["b"]
    judged = {"results": {"greedy": {"passed": True, "checks": []}}}
    md = "\n".join(_engine_faults({"ok": judged, **out}))
    assert "| a | `--x` | FAIL: the engine failed a request |" in md
    assert "*a*: the engine started, then failed while judged: `the vLLM server exited with code -11" in md
