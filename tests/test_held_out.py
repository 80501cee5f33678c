"""The false-alarm prompts (npu_tutorials.checks.held_out): fifty, plain and chat, none a card's or a calibration text,
and the count of false alarms comes from the same rule the pages use (an engine that is the reference raises none;
a split the rule calls a fault is one)."""

from npu_tutorials.checks import held_out
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.measure import floor


def test_fifty_prompts_that_no_card_judges_and_no_calibration_uses():
    prompts = set(held_out.PLAIN) | set(held_out.CHAT)
    assert len(prompts) == len(held_out.PLAIN) + len(held_out.CHAT) >= 50
    judged = set()
    for key in known_models():
        a = load_card(key).accuracy
        judged |= set(a.greedy.prompts + a.greedy.chat_prompts) if a.greedy else set()
        judged |= {i.prompt for i in a.qa.items} if a.qa else set()
        judged |= set(a.logits.prompts) if a.logits else set()
        judged |= {a.consistency.text} if a.consistency else set()
    assert not prompts & judged and not prompts & (set(floor.TEXTS) | set(floor.CHAT_TEXTS))


def test_false_alarms_count_the_rows_whose_split_the_rule_calls_a_fault(monkeypatch):
    from npu_tutorials.measure import consistency
    from npu_tutorials.measure.metrics import SplitRule

    card = load_card("smollm2-135m-instruct")

    def err(margin, pair_err):
        return {"pair_margin": margin, "pair_err": pair_err, "nmse_pct": 0.1}

    def fake(server, model, ref_path, prompts, n, *, chat, vocab_size):
        rows = [consistency.TextRow(p, [1, 2], [1, 2], "a", "a", None) for p in prompts]
        if chat:  # one near-tie and one split beyond the bound
            rows[0] = consistency.TextRow(prompts[0], [1, 3], [1, 2], "a", "b", 1, 0.01, None, err(0.01, 0.1))
            rows[1] = consistency.TextRow(prompts[1], [3, 2], [1, 2], "a", "b", 0, 0.01, None, err(0.01, 2.0))
        return rows

    monkeypatch.setattr(consistency, "text_consistency", fake)
    h = held_out.false_alarms(None, "m", "ref", card.accuracy.greedy, SplitRule(0.38, 5.8), card.vocab_size)
    assert (h["prompts"], h["false_alarms"], h["kinds"]["near_tie_splits"]) == (50, 1, 1)
    assert h["interval_pct"][0] < 2.0 < h["interval_pct"][1] and not h["verdict"]["passed"]
