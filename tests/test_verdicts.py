"""Greedy and text verdicts (no engine): each can PASS and each can FAIL."""

from npu_tutorials.measure.consistency import TextRow, greedy_summary, greedy_verdict, text_verdict
from npu_tutorials.measure.metrics import SplitRule


def _row(eng, ref, err_first=None, err_div=None):
    k = next((i for i in range(len(ref)) if i >= len(eng) or eng[i] != ref[i]), None)
    return TextRow("p", eng, ref, "e", "r", k, None, err_first, err_div)


def _err(spread, margin, pair_err=None):
    """A position's error: the reference's lead ``margin`` over the engine's token, moved by ``pair_err``."""
    return {"top1_match": 1.0, "engine_top1": 1, "reference_top1": 1, "reference_top2_margin": margin,
            "max_abs_err": spread / 2, "err_spread": spread, "decisive": margin > spread / 2, "kl_nats": 0.0,
            "nmse_pct": 0.01, "contender": 2, "pair_margin": margin,
            "pair_err": margin + 0.01 if pair_err is None else pair_err, "compared_as": "logits"}


RULE = SplitRule(err_max=0.4, rate_pct_max=20.0)
# BROKEN: the reference's lead was small, but the engine moved the pair far beyond rounding
NEAR, DECISIVE, BROKEN = _err(0.4, 0.05), _err(0.4, 3.0), _err(40.0, 0.05, pair_err=5.0)


def test_greedy_verdict_passes_and_fails():
    same = [_row([1, 2, 3, 4], [1, 2, 3, 4]), _row([5, 6, 7, 8], [5, 6, 7, 8])]
    assert greedy_verdict(same, first_token_pct_min=100, mean_match_pct_min=90, rule=RULE).passed
    late = [_row([1, 2, 3, 9], [1, 2, 3, 4], err_div=DECISIVE), _row([5, 6, 7, 8], [5, 6, 7, 8])]  # 87.5 % match
    v = greedy_verdict(late, first_token_pct_min=100, mean_match_pct_min=90, rule=RULE)
    assert not v.passed and [c[3] for c in v.checks] == [True, False, False, True, True]
    first = [_row([9, 2, 3, 4], [1, 2, 3, 4], err_div=DECISIVE), _row([5, 6, 7, 8], [5, 6, 7, 8])]
    assert [c[3] for c in greedy_verdict(first, first_token_pct_min=100, mean_match_pct_min=50, rule=RULE).checks] \
        == [False, True, False, True, True]


def test_a_split_at_a_near_tie_is_rounding_and_counted_not_a_fault():
    rows = [_row([9, 2, 3, 4], [1, 2, 3, 4], err_div=NEAR), _row([5, 6, 9, 9], [5, 6, 7, 8], err_div=NEAR),
            _row([1, 2], [1, 2])]
    v = greedy_verdict(rows, first_token_pct_min=100, mean_match_pct_min=90, rule=RULE)
    assert v.passed, v
    by = {c[0]: c for c in v.checks}
    # the labels say what they count: the excused figure beside the strict one
    assert by["first-token agreement, excused near-ties counted as agreeing"][1] == "100.0 % (66.7 % strict)"
    assert by["mean match rate, excused near-ties counted as matching"][1] == "100.0 % (75.0 % strict)"
    assert by["splits at decisive positions"][1] == "0"
    assert by["near-tie splits with the pair error within the bound"][1] == "2 / 2"
    assert by["near-tie splits per judged position"][1] == "2 / 6"  # judged: 1 + 3 + 2 positions
    s = greedy_summary(rows, RULE)
    assert (s["near_tie_splits"], s["decisive_splits"], s["strict_first_token_agreement_pct"]) == (2, 0, 100 * 2 / 3)
    assert not greedy_verdict(rows, first_token_pct_min=100, mean_match_pct_min=90).passed  # no rule: no excuse


def test_a_broken_engine_cannot_hide_behind_near_ties():
    """A small reference lead does not excuse a split where the engine moved the contending pair beyond rounding."""
    rows = [_row([9, 2, 3, 4], [1, 2, 3, 4], err_div=BROKEN), _row([5, 6, 7, 8], [5, 6, 7, 8])]
    v = greedy_verdict(rows, first_token_pct_min=50, mean_match_pct_min=50, rule=RULE)
    assert not v.passed
    assert {c[0]: c[3] for c in v.checks}["near-tie splits with the pair error within the bound"] is False
    assert not text_verdict(rows, exact_min=1, rule=RULE).passed
    # the same split within a looser bound is excused
    assert greedy_verdict(rows, first_token_pct_min=50, mean_match_pct_min=50, rule=SplitRule(6.0, 20.0)).passed


def test_too_many_near_ties_fail_though_each_is_within_the_bound():
    rows = [_row([9, 2, 3, 4], [1, 2, 3, 4], err_div=NEAR) for _ in range(10)]
    v = greedy_verdict(rows, first_token_pct_min=0, mean_match_pct_min=0, rule=SplitRule(0.4, 5.0))
    assert not v.passed and {c[0]: c[3] for c in v.checks}["near-tie splits per judged position"] is False


def test_an_unmeasured_split_is_never_excused():
    rows = [_row([9, 2], [1, 2]), _row([5, 6], [5, 6])]
    assert not greedy_verdict(rows, first_token_pct_min=0, mean_match_pct_min=0, rule=RULE).passed
    assert not text_verdict(rows, exact_min=1, rule=RULE).passed


def test_text_verdict_passes_and_fails():
    rows = [_row([1, 2], [1, 2]), _row([3, 4], [3, 5], err_div=DECISIVE)]
    assert not text_verdict(rows, exact_min=1, rule=RULE).passed  # a decisive split is a fault whatever the count
    assert not text_verdict(rows, exact_min=2, rule=RULE).passed
    near = [_row([1, 2], [1, 2]), _row([3, 4], [3, 5], err_div=NEAR)]
    v = text_verdict(near, exact_min=2, rule=RULE)
    assert v.passed and v.checks[0][1] == "1 + 1 / 2"  # identical, and excused, counted apart
    assert not text_verdict([_row([1, 2], [1, 2]), _row([1, 2], [1, 2])], exact_min=3, rule=RULE).passed


def test_top1_flips_at_near_ties_are_excused_within_the_bound():
    from npu_tutorials.measure.metrics import decisive_top1, split_checks

    def pos(match, margin, pair_err):
        return {"top1_match": match, "top1_tie": False, "reference_top2_margin": margin, "pair_margin": margin,
                "pair_err": pair_err}

    agree, near = pos(1.0, 2.0, 0.1), pos(0.0, 0.05, 0.2)
    broken, dec = pos(0.0, 0.05, 3.0), pos(0.0, 2.0, 2.1)
    d = decisive_top1([agree, near], RULE)
    assert d["top1_pct"] == 100.0 and d["top1_strict_pct"] == 50.0 and d["near_tie_splits"] == 1
    assert all(c[3] for c in split_checks(d["flip_kinds"], RULE, 2))
    for wrong in (broken, dec):
        d = decisive_top1([agree, wrong], RULE)
        assert d["top1_pct"] == 50.0 and not all(c[3] for c in split_checks(d["flip_kinds"], RULE, 2))


def test_greedy_summary_and_rows_carry_each_rows_own_error():
    rows = [_row([1, 2, 3], [1, 2, 3], _err(0.01, 0.5)),
            _row([1, 9, 3], [1, 2, 3], _err(0.02, 0.3), _err(0.05, 0.01)),   # a near-tie
            _row([7, 2, 3], [1, 2, 3], _err(0.03, 0.9), _err(0.03, 0.9))]    # a flip at a decisive position
    s = greedy_summary(rows, RULE)
    assert s["first_token_agreement_pct"] == 100 * 2 / 3 and s["divergences"] == 2
    assert s["divergences_at_decisive"] == 1 and s["exact"] == 1 and s["excused"] == 1
    d = [r.to_dict() for r in rows]
    assert [r["error_first_token"]["max_abs_err"] for r in d] == [0.005, 0.01, 0.015]  # per row, its own
    assert [r["error_at_divergence"] and r["error_at_divergence"]["err_spread"] for r in d] == [None, 0.05, 0.03]
    assert greedy_summary([_row([1], [2])])["divergences_at_decisive"] is None  # errors not measured
