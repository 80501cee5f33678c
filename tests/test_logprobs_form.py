"""Raw logits vs log-probabilities, on the engine's own vectors.

vllm-ascend ignores ``--logprobs-mode raw_logits`` and returns log-probabilities (its sampler's
``raw_logprobs``: the log-softmax of the raw logits).  The log-probability form follows from the raw
logits, so no second engine is started: :class:`LogprobsEngine` answers every request of the shared
raw-logits engine (conftest's ``raw_server``, its replies kept by request) in the form vllm-ascend would.  The form is detected in
both, every engine-vs-reference path compares like with like and says which form it compared, and the
verdicts agree with the raw-logits run (conftest's ``raw_results``).
"""

import numpy as np
import pytest

from conftest import require_vllm  # noqa: E402

require_vllm()

from npu_tutorials.measure import accuracy, metrics, reference  # noqa: E402
from npu_tutorials.checks.controls import run_checks  # noqa: E402

pytestmark = pytest.mark.engine


class LogprobsEngine:
    """The raw-logits engine answering as vllm-ascend does: every full-vocabulary reply holds the
    log-softmax of the raw logits (computed in float64, returned as float32 like vLLM's JSON)."""

    def __init__(self, server):
        self.server = server

    def post(self, path, body):
        r = self.server.post(path, body)
        if body.get("logprobs") is not None:  # a full-vocabulary request (logprobs = the vocabulary size)
            for choice in r["choices"]:
                for top in choice["logprobs"]["top_logprobs"]:
                    keys = list(top)
                    lp = metrics.log_softmax(np.array([top[k] for k in keys], dtype=np.float64))
                    top.update(zip(keys, lp.astype(np.float32).tolist()))
        return r

    def __getattr__(self, name):
        return getattr(self.server, name)


@pytest.fixture(scope="module")
def lp_server(raw_replies):
    """The replies of the raw-logits run (conftest's ``raw_results``), in vllm-ascend's form."""
    return LogprobsEngine(raw_replies)


@pytest.fixture(scope="module")
def lp_results(lp_server, card, tiny, tiny_spec):
    return run_checks(lp_server, card.serve.served_model_name, tiny.path, tiny_spec, card.vocab_size)


def test_form_detected_in_both_modes(raw_server, lp_server, card, tiny):
    ids = reference.tokenize(tiny.path, "The capital of France is")
    raw = accuracy.engine_last_logits(raw_server, card.serve.served_model_name, ids, card.vocab_size)
    lp = accuracy.engine_last_logits(lp_server, card.serve.served_model_name, ids, card.vocab_size)
    assert metrics.logits_form(raw) == "logits" and metrics.logits_form(lp) == "logprobs"
    assert abs(metrics.logsumexp(lp)) < 1e-4 and metrics.logsumexp(raw) > 5
    # the same network: the log-probabilities are the raw logits' log-softmax, up to bf16 rounding
    assert np.max(np.abs(lp - metrics.log_softmax(raw))) < 1e-2
    # compared as logits (the old code) the engine looks broken; like with like it does not
    ref = reference.last_logits(tiny.path, ids)[: card.vocab_size]
    assert metrics.compare_logits(lp, ref, form="logits")["nmse_pct"] > 1000
    assert metrics.compare_logits(lp, ref)["nmse_pct"] < 1.0


def test_every_path_records_the_form(raw_results, lp_results):
    assert raw_results["logits"]["figures"]["compared_as"] == "logits"
    assert lp_results["logits"]["figures"]["compared_as"] == "logprobs"
    assert raw_results["consistency"]["figures"]["compared_as"] == "logits"
    assert lp_results["consistency"]["figures"]["compared_as"] == "logprobs"


def test_verdicts_agree_with_the_raw_logits_run(raw_results, lp_results):
    assert {c: r["passed"] for c, r in lp_results.items()} == {c: r["passed"] for c, r in raw_results.items()}
    assert all(r["passed"] for r in lp_results.values())
    for check in ("logits", "consistency"):
        raw, lp = raw_results[check]["figures"], lp_results[check]["figures"]
        assert lp["top1_pct"] == raw["top1_pct"]
        # KL does not see a common shift: the same figure in both forms, up to the engine's rounding
        assert lp["kl_nats"] == pytest.approx(raw["kl_nats"], rel=0.2, abs=1e-7)
    assert lp_results["greedy"]["figures"]["mean_match_rate_pct"] == raw_results["greedy"]["figures"][
        "mean_match_rate_pct"]


def test_log_probability_figures_are_the_centred_raw_logits_figures(raw_server, lp_server, card, tiny, tiny_spec):
    """nMSE and cosine of log-probabilities are taken on centred vectors (metrics' docstring): they
    equal the raw-logits figures of the centred vectors up to float32 rounding, not the uncentred
    raw-logits figures (a common offset raises an uncentred cosine)."""
    for prompt in tiny_spec.logits.prompts:
        ids = reference.tokenize(tiny.path, prompt)
        raw = accuracy.engine_last_logits(raw_server, card.serve.served_model_name, ids, card.vocab_size)
        lp = accuracy.engine_last_logits(lp_server, card.serve.served_model_name, ids, card.vocab_size)
        ref = reference.last_logits(tiny.path, ids)[: card.vocab_size]
        got = metrics.compare_logits(lp, ref)
        want = metrics.compare_logits(raw - raw.mean(), ref - ref.mean(), form="logits")
        assert got["compared_as"] == "logprobs"
        assert got["cosine"] == pytest.approx(want["cosine"], abs=1e-6)
        assert got["nmse_pct"] == pytest.approx(want["nmse_pct"], rel=1e-3, abs=1e-6)
        assert got["top1_match"] == want["top1_match"]


def test_greedy_rows_measure_their_error_in_the_engines_form(lp_server, card, tiny):
    from npu_tutorials.measure.consistency import text_consistency

    rows = text_consistency(lp_server, card.serve.served_model_name, tiny.path, ["Hello, how are you?"], 4,
                            chat=False)
    e = rows[0].error_first_token
    assert e["compared_as"] == "logprobs" and 0 < e["max_abs_err"] < 0.1
