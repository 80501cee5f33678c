"""Greedy and text verdicts (no engine): each can PASS and each can FAIL."""

from npu_tutorials.measure.consistency import TextRow, greedy_summary, greedy_verdict, text_verdict


def _row(eng, ref, err_first=None, err_div=None):
    k = next((i for i in range(len(ref)) if i >= len(eng) or eng[i] != ref[i]), None)
    return TextRow("p", eng, ref, "e", "r", k, None, err_first, err_div)


def _err(spread, margin):
    return {"top1_match": 1.0, "engine_top1": 1, "reference_top1": 1, "reference_top2_margin": margin,
            "max_abs_err": spread / 2, "err_spread": spread, "decisive": margin > spread, "kl_nats": 0.0,
            "compared_as": "logits"}


def test_greedy_verdict_passes_and_fails():
    same = [_row([1, 2, 3, 4], [1, 2, 3, 4]), _row([5, 6, 7, 8], [5, 6, 7, 8])]
    assert greedy_verdict(same, first_token_pct_min=100, mean_match_pct_min=90).passed
    late = [_row([1, 2, 3, 9], [1, 2, 3, 4]), _row([5, 6, 7, 8], [5, 6, 7, 8])]  # 87.5 % match
    v = greedy_verdict(late, first_token_pct_min=100, mean_match_pct_min=90)
    assert not v.passed and [c[3] for c in v.checks] == [True, False]
    first = [_row([9, 2, 3, 4], [1, 2, 3, 4]), _row([5, 6, 7, 8], [5, 6, 7, 8])]
    assert [c[3] for c in greedy_verdict(first, first_token_pct_min=100, mean_match_pct_min=50).checks] == [False, True]


def test_text_verdict_passes_and_fails():
    rows = [_row([1, 2], [1, 2]), _row([3, 4], [3, 5])]
    assert text_verdict(rows, exact_min=1).passed
    assert not text_verdict(rows, exact_min=2).passed


def test_greedy_summary_and_rows_carry_each_rows_own_error():
    rows = [_row([1, 2, 3], [1, 2, 3], _err(0.01, 0.5)),
            _row([1, 9, 3], [1, 2, 3], _err(0.02, 0.3), _err(0.05, 0.01)),   # a near-tie
            _row([7, 2, 3], [1, 2, 3], _err(0.03, 0.9), _err(0.03, 0.9))]    # a flip at a decisive position
    s = greedy_summary(rows)
    assert s["first_token_agreement_pct"] == 100 * 2 / 3 and s["divergences"] == 2
    assert s["divergences_at_decisive"] == 1 and s["exact"] == 1
    d = [r.to_dict() for r in rows]
    assert [r["error_first_token"]["max_abs_err"] for r in d] == [0.005, 0.01, 0.015]  # per row, its own
    assert [r["error_at_divergence"] and r["error_at_divergence"]["err_spread"] for r in d] == [None, 0.05, 0.03]
    assert greedy_summary([_row([1], [2])])["divergences_at_decisive"] is None  # errors not measured
