import math

import numpy as np
import pytest

from npu_tutorials.measure import metrics


def test_identical_vectors():
    r = np.array([1.0, -2.0, 3.0, 0.5])
    m = metrics.compare_logits(r, r)
    assert m["nmse_pct"] == 0 and m["max_abs_err"] == 0 and m["kl_nats"] == pytest.approx(0, abs=1e-12)
    assert m["cosine"] == pytest.approx(1.0) and m["top1_match"] == 1.0


def test_known_values():
    ref = np.array([3.0, 4.0])
    x = np.array([3.0, 5.0])
    # mean((x-r)^2) = 0.5; mean(r^2) = 12.5 -> 4 %
    assert metrics.normalized_mse_pct(x, ref) == pytest.approx(4.0)
    assert metrics.cosine(x, ref) == pytest.approx((9 + 20) / (5 * math.sqrt(34)))
    assert metrics.cosine([1, 0], [0, 1]) == pytest.approx(0.0)
    assert metrics.cosine([2, 2], [1, 1]) == pytest.approx(1.0)
    assert metrics.normalized_mse_pct([2, 2], [1, 1]) == pytest.approx(100.0)


def test_kl_of_known_distributions():
    # softmax([0, log 3]) = [0.25, 0.75]; softmax([0, 0]) = [0.5, 0.5]
    ref, x = np.array([0.0, math.log(3)]), np.array([0.0, 0.0])
    expected = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
    assert metrics.kl_divergence(x, ref) == pytest.approx(expected)
    assert metrics.kl_divergence(x + 100, x) == pytest.approx(0.0, abs=1e-12)  # shift-invariant


def test_topk():
    ref = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.8])
    x = np.array([0.1, 0.8, 0.5, 0.7, 0.3, 0.9])  # top-1 swapped
    assert list(metrics.topk_ids(ref, 3)) == [1, 5, 3]
    assert metrics.topk_agreement(x, ref, 1) == 0.0
    assert metrics.topk_agreement(x, ref, 2) == 1.0
    m = metrics.compare_logits(x, ref)
    assert (m["engine_top1"], m["reference_top1"]) == (5, 1)


def test_shape_mismatch_and_empty():
    with pytest.raises(ValueError, match="shape mismatch"):
        metrics.compare_logits([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        metrics.cosine([], [])


def test_sequence_match():
    assert metrics.sequence_match([1, 2, 3, 4], [1, 2, 3, 4]) == {"match_rate": 1.0, "first_divergence": None,
                                                                  "length": 4}
    assert metrics.sequence_match([1, 2, 9, 4], [1, 2, 3, 4]) == {"match_rate": 0.75, "first_divergence": 2,
                                                                  "length": 4}
    assert metrics.sequence_match([1], [1, 2]) == {"match_rate": 0.5, "first_divergence": 1, "length": 2}
    assert metrics.sequence_match([7, 2], [1, 2])["first_divergence"] == 0


# -- raw logits vs log-probabilities -------------------------------------------------------
def _logits(seed, n=5000, scale=3.0):
    return np.random.default_rng(seed).normal(0, scale, n)


def test_logits_form_detection():
    x = _logits(0)
    assert metrics.logits_form(x) == "logits"
    assert metrics.logits_form(metrics.log_softmax(x)) == "logprobs"
    # float32 log-probabilities (what vLLM's sampler returns) are still log-probabilities
    assert metrics.logits_form(metrics.log_softmax(x).astype(np.float32)) == "logprobs"
    # logits shifted by a constant are still logits unless their logsumexp is 0
    assert metrics.logits_form(x - metrics.logsumexp(x) + 0.01) == "logits"
    assert metrics.logsumexp(metrics.log_softmax(x)) == pytest.approx(0, abs=1e-9)


def test_log_probabilities_compared_like_with_like():
    ref = _logits(1)
    eng = ref + np.random.default_rng(2).normal(0, 0.01, ref.size)  # the engine's rounding
    raw = metrics.compare_logits(eng, ref)
    lp = metrics.compare_logits(metrics.log_softmax(eng).astype(np.float32), ref)
    assert (raw["compared_as"], lp["compared_as"]) == ("logits", "logprobs")
    # centred log-probabilities are centred logits: the figures match the raw-logits comparison
    assert lp["nmse_pct"] == pytest.approx(raw["nmse_pct"], rel=0.05)
    assert lp["cosine"] == pytest.approx(raw["cosine"], abs=1e-6)
    assert lp["kl_nats"] == pytest.approx(raw["kl_nats"], rel=1e-3)
    assert lp["err_spread"] == pytest.approx(raw["err_spread"], rel=1e-3)  # shift-invariant
    assert lp["reference_top2_margin"] == pytest.approx(raw["reference_top2_margin"])
    assert lp["top1_match"] == raw["top1_match"] == 1.0
    # the defect this replaces: log-probabilities taken for logits
    wrong = metrics.compare_logits(metrics.log_softmax(eng), ref, form="logits")
    assert wrong["nmse_pct"] > 100 and wrong["cosine"] < 0.5


def test_log_probability_comparison_can_fail():
    """Uncentred log-probabilities are dominated by -log(vocab): nMSE of a wrong model would pass."""
    ref, other = _logits(3, scale=0.3), _logits(4, scale=0.3)
    lp_other = metrics.log_softmax(other)
    assert metrics.normalized_mse_pct(lp_other, metrics.log_softmax(ref)) < 1.0  # the trap
    m = metrics.compare_logits(lp_other, ref)
    assert m["compared_as"] == "logprobs" and m["nmse_pct"] > 100 and m["cosine"] < 0.2


def test_unknown_form_is_refused():
    with pytest.raises(ValueError, match="form must be"):
        metrics.compare_logits([1.0, 2.0], [1.0, 2.0], form="probs")


# -- near-ties told apart from errors -------------------------------------------------------
def test_decisive_positions_and_the_contending_pair():
    ref = np.array([5.0, 4.0, 0.0, -1.0])  # margin 1.0
    small = metrics.compare_logits(ref + np.array([0.0, 0.05, -0.05, 0.0]), ref)
    assert small["max_abs_err"] == pytest.approx(0.05) and small["err_spread"] == pytest.approx(0.1)
    assert small["decisive"] and small["top1_match"] == 1.0
    # no flip: the contender is the reference's runner-up, and the engine moved the lead by 0.05
    assert (small["contender"], small["pair_margin"], small["pair_err"]) == (1, 1.0, pytest.approx(0.05))
    tie = np.array([5.0, 4.99, 0.0, -1.0])  # margin 0.01
    flip = metrics.compare_logits(tie + np.array([-0.05, 0.05, 0.0, 0.0]), tie)
    assert flip["top1_match"] == 0.0 and flip["contender"] == 1 and flip["pair_err"] == pytest.approx(0.1)
    # errors of 0.6 in opposite directions flip a margin of 1
    fault = metrics.compare_logits(ref + np.array([-0.6, 0.6, 0.0, 0.0]), ref)
    assert fault["top1_match"] == 0.0 and fault["pair_margin"] == 1.0 and fault["pair_err"] == pytest.approx(1.2)
    rule = metrics.SplitRule(err_max=0.3, rate_pct_max=50.0)
    d = metrics.decisive_top1([small, flip, fault], rule)
    # decisive: the reference's margin exceeds the rule's bound (never the engine's own error)
    assert d["decisive_positions"] == 2 and d["top1_decisive_pct"] == 50.0
    assert (d["flips"], d["flips_at_decisive"]) == (2, 1) and d["top1_strict_pct"] == pytest.approx(100 / 3)
    # the flip at the near-tie, its pair error within the bound, is rounding; the decisive one is a fault
    assert d["top1_pct"] == pytest.approx(200 / 3) and (d["near_tie_splits"], d["decisive_splits"]) == (1, 1)
    assert metrics.decisive_top1([small, flip], metrics.SplitRule(0.05, 50.0))["beyond_bound_splits"] == 1
    assert metrics.decisive_top1([flip])["decisive_splits"] == 1  # no calibration: no split is excused
    assert set(metrics.position_error(small)) >= {"reference_top2_margin", "pair_margin", "pair_err", "contender"}


def test_a_concentrated_error_on_the_contending_pair_is_not_rounding():
    """An error of 3 nats on one token barely moves a whole-vocabulary average, but it is the pair error."""
    rng = np.random.default_rng(0)
    ref = rng.normal(0, 3, 49152)
    ref[7], ref[9] = 20.0, 19.9  # a near-tie at the top
    x = ref + rng.normal(0, 0.02, ref.size)
    x[9] += 3.0
    row = metrics.compare_logits(x, ref)
    assert row["nmse_pct"] < 0.01 and row["engine_top1"] == 9
    assert metrics.split_kind(row, metrics.SplitRule(0.38, 5.8)) == "beyond bound"


def test_the_number_of_near_ties_is_judged_against_the_calibrated_rate():
    # rounding at 5 % over 100 positions explains a handful of near-ties, not twenty
    allowed = metrics.near_tie_allowance(100, 5.0)
    assert 8 <= allowed <= 12
    ok = metrics.split_checks(["near-tie"] * allowed, metrics.SplitRule(0.4, 5.0), 100)
    too_many = metrics.split_checks(["near-tie"] * 20, metrics.SplitRule(0.4, 5.0), 100)
    assert all(c[3] for c in ok) and [c[3] for c in too_many] == [True, True, False]
    assert too_many[2][1] == "20 / 100"
    assert metrics.near_tie_allowance(100, 0.0) == 0
    # the 95 % upper bound of a rate: above the observed rate, below certainty
    assert 2.7 < metrics.rate_upper_pct(11, 407) < 5.0 and metrics.rate_upper_pct(0, 100) == pytest.approx(2.95, abs=0.05)


def test_margin_above_the_error_spread_cannot_flip():
    """Property behind ``err_spread``: wherever the margin exceeds it, the argmax cannot change."""
    rng = np.random.default_rng(5)
    seen = 0
    for _ in range(300):
        ref = rng.normal(0, 1, 50)
        x = ref + rng.normal(0, rng.uniform(0.001, 0.5), 50)
        m = metrics.compare_logits(x, ref)
        if m["reference_top2_margin"] > m["err_spread"]:
            seen += 1
            assert m["top1_match"] == 1.0
    assert seen > 10


def test_an_exact_tie_at_the_engines_top_is_a_tie_never_a_flip():
    """The engine's choice is its greedy argmax, the first index on a tie (torch.argmax, vLLM's greedy
    sampler).  The row, the summary and the verdict all read a tie that way."""
    import numpy as np

    from npu_tutorials.measure.accuracy import LogitsReport

    rng = np.random.default_rng(0)
    ref = rng.normal(size=1000)
    ref[700], ref[300] = 9.0, 8.0                   # the reference chooses 700
    tied = ref.copy()
    tied[300] = tied[700] = 8.5                     # bf16 rounding made 300 and 700 equal: the engine picks 300
    assert metrics.top1(tied) == 300 and list(metrics.topk_ids(tied, 2)) == [300, 700]
    row = metrics.compare_logits(tied, ref)
    assert (row["engine_top1"], row["reference_top1"], row["top1_match"], row["top1_tie"]) == (300, 700, 0.0, True)
    same = metrics.compare_logits(ref + 0.001, ref)  # the same choice
    assert same["engine_top1"] == same["reference_top1"] == 700 and same["top1_match"] == 1.0
    assert not same["top1_tie"]
    flip = ref.copy()
    flip[300], flip[700] = 8.6, 8.4                  # a real flip, 300 strictly above, at a decisive position
    f = metrics.compare_logits(flip, ref)
    assert f["top1_match"] == 0.0 and not f["top1_tie"]
    # the row never contradicts itself: a match is exactly engine_top1 == reference_top1
    for r in (row, same, f):
        assert bool(r["top1_match"]) == (r["engine_top1"] == r["reference_top1"])
    d = metrics.decisive_top1([dict(row, prompt="a", num_tokens=1), dict(same, prompt="b", num_tokens=1)])
    assert (d["top1_pct"], d["ties"], d["flips"]) == (100.0, 1, 0)
    thresholds = {"nmse_pct_max": 100.0, "top1_pct_min": 100.0}
    rows = [dict(r, prompt=p, num_tokens=1) for r, p in ((row, "a"), (same, "b"))]
    rep = LogitsReport(rows, thresholds, np.zeros(1), (np.zeros(1), np.zeros(1)))
    assert rep.summary["top1_pct"] == 100.0 and rep.summary["top1_ties"] == 1 and rep.verdict().passed
    rows.append(dict(f, prompt="c", num_tokens=1))
    assert not LogitsReport(rows, thresholds, np.zeros(1), (np.zeros(1), np.zeros(1))).verdict().passed
