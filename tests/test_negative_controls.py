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
    assert by_metric == {"x": {"a": 0.01, "b": 0.1}, "y": {"a": "baseline", "b": None}}


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
    assert "re-run scripts/negative_controls.py" in stale_controls([d])[0]
