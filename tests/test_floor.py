"""Limits derived from a measured bf16 floor (measure.floor), never copied from another quantity's report.

A card whose forward-consistency limits are derived names the record in a comment; here the record's derivation
must give exactly the card's limits, its calibration texts must not be texts the card judges, and the derived
limits must still fail a wrong engine (the negative controls on the methods page record where).
"""

import json
from pathlib import Path

import pytest

from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.measure import floor

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted((ROOT / "results" / "methods").glob("bf16-floor-*.json"))


def test_a_floor_is_recorded_for_the_trained_model():
    assert {json.loads(p.read_text())["model"] for p in RECORDS} >= {
        k for k in known_models() if load_card(k).packaged is not None}


CONSISTENCY_CARDS = [k for k in known_models() if load_card(k).accuracy.consistency is not None]
CHAT_CARDS = [k for k in known_models() if load_card(k).accuracy.chat_consistency is not None]


def _record(key: str) -> dict:
    path = ROOT / "results" / "methods" / f"bf16-floor-{key}.json"
    assert path.is_file(), f"{path.name}: no bf16 floor recorded (scripts/bf16_floor.py {key})"
    return json.loads(path.read_text())


@pytest.mark.parametrize("key", CONSISTENCY_CARDS)
def test_the_cards_derived_limits_are_the_records_derivation(key):
    """Every card's logits limits that no report set on logits (cosine and KL always) are its floor record's
    derivation, and that record measured real weights on texts the card's checks do not judge."""
    card = load_card(key)
    a = card.accuracy
    c = a.consistency
    rec = _record(c.derived.record)
    derived = floor.derive(rec["floor"], rec["factor"])
    assert rec["derived"] == derived and rec["factor"] == floor.FACTOR
    t = c.thresholds.model_dump()
    assert {k: t[k] for k in c.derived.limits} == {k: derived[k] for k in c.derived.limits}
    judged = {c.text, *(a.logits.prompts if a.logits else []), *(a.greedy.prompts if a.greedy else [])}
    assert not judged & {f["text"] for f in rec["floor"]}  # calibrated on texts the checks do not judge
    assert rec["provenance"]["weights_kind"] == "real" and "/" not in rec["provenance"]["weights"].split(":")[0]


SPLIT_CARDS = [k for k in known_models() if load_card(k).accuracy.splits is not None]


def test_a_trained_model_states_its_split_rule():
    assert {k for k in known_models() if load_card(k).packaged is not None} <= set(SPLIT_CARDS)


@pytest.mark.parametrize("key", SPLIT_CARDS)
def test_the_cards_split_rule_is_its_own_floors_derivation(key):
    """A card's split rule is its own weights' floor record's derivation (never another model's), calibrated on plain
    texts and chat requests that no check of the card judges."""
    a = load_card(key).accuracy
    assert a.splits.record == key  # the model's own floor: a rule is never copied from another model
    rec = _record(key)
    derived = floor.derive(rec["floor"], rec["factor"])
    assert (a.splits.err_max, a.splits.rate_pct_max) == (derived["split_err_max"], derived["split_rate_pct_max"])
    assert {f["chat"] for f in rec["floor"]} == {False, True}  # plain text and chat answers, as the checks judge
    judged = {*(a.greedy.prompts + a.greedy.chat_prompts if a.greedy else []),
              *([i.prompt for i in a.qa.items] if a.qa else []), *(a.logits.prompts if a.logits else []),
              a.consistency.text if a.consistency else ""}
    assert not judged & {f["text"] for f in rec["floor"]}
    assert rec["provenance"]["weights_kind"] == "real"


@pytest.mark.parametrize("key", CHAT_CARDS)
def test_the_chat_consistency_limits_are_the_chat_answers_derivation(key):
    """A chat consistency check's averaged limits come from the chat answers of its own model's floor record (the
    kind of positions it judges), and it judges at least 128 positions of a request no calibration used."""
    c = load_card(key).accuracy.chat_consistency
    assert c.chat and c.positions >= 128 and c.derived.record == key
    rec = _record(key)
    derived = floor.derive(rec["floor"], rec["factor"])
    t = c.thresholds.model_dump()
    assert {k: t[k] for k in c.derived.limits} == {k: derived[f"chat_{k}"] for k in c.derived.limits}
    assert c.text not in {f["text"] for f in rec["floor"]}
    assert all(f["positions"] > c.positions for f in rec["floor"] if f["chat"])


def test_a_card_cannot_copy_a_hidden_state_cosine_onto_logits(tmp_path):
    from npu_tutorials.core.errors import TutorialError
    from npu_tutorials.inputs.cards import CARDS_DIR, load_card_file

    text = (CARDS_DIR / "qwen-1_8b-chat.yaml").read_text()
    assert "limits: [cosine_min, kl_max" in text
    bad = tmp_path / "qwen-1_8b-chat.yaml"
    bad.write_text(text.replace("limits: [cosine_min, kl_max]", "limits: [kl_max]"))
    with pytest.raises(TutorialError, match="cosine_min must be derived"):
        load_card_file(bad)


def test_derive_is_the_floor_times_the_factor_rounded_to_the_looser_side():
    rows = [{"mean_cosine": 0.9992, "mean_kl_nats": 0.0024, "max_nmse_pct": 1.68, "ppl_rel_diff_pct": 0.31,
             "max_pair_err": 0.31, "flips": 2, "positions": 100, "chat": False},
            {"mean_cosine": 0.9998, "mean_kl_nats": 0.0040, "max_nmse_pct": 0.36, "ppl_rel_diff_pct": 0.12,
             "max_pair_err": 0.214, "flips": 1, "positions": 100, "chat": False},
            # a chat answer: in the split rule only (the averaged limits judge plain text)
            {"mean_cosine": 0.99, "mean_kl_nats": 0.1, "max_nmse_pct": 9.0, "ppl_rel_diff_pct": 9.0,
             "max_pair_err": 0.35, "flips": 3, "positions": 100, "chat": True}]
    d = floor.derive(rows, 4)
    assert {k: d[k] for k in ("ppl_rel_diff_pct_max", "cosine_min", "kl_max", "split_err_max")} == {
        "ppl_rel_diff_pct_max": 1.3, "cosine_min": 0.9968, "kl_max": 0.016, "split_err_max": 0.35}
    assert d["cosine_min"] <= 1 - 4 * 0.0008 and d["kl_max"] >= 4 * 0.004
    assert 2.0 < d["split_rate_pct_max"] < 5.0  # 6 flips in 300 positions: 2 %, and its 95 % upper bound


@pytest.mark.slow  # a minute of transformers on CI; the derivation's arithmetic: the test above
def test_the_floor_script_measures_and_derives(tmp_path):
    """scripts/bf16_floor.py on the trained model's real checkpoint (one calibration text): a record whose
    derivation is floor.derive of its own floor, without a machine path."""
    import subprocess
    import sys

    from npu_tutorials.checks.site_check import machine_path_problems

    out = tmp_path / "floor.json"
    key = next(k for k in known_models() if load_card(k).packaged is not None)
    p = subprocess.run([sys.executable, "scripts/bf16_floor.py", key, "--texts", "1", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert len(rec["floor"]) == 2 and rec["derived"] == floor.derive(rec["floor"], rec["factor"])
    assert 0.99 < rec["floor"][0]["mean_cosine"] < 1 and machine_path_problems([out]) == []


def test_every_script_is_run_by_a_test():
    names = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.is_file())
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    assert [n for n in names if n not in tests] == []


def test_the_verdict_says_which_limits_are_derived_and_from_what_in_both_languages():
    """The consistency verdict of a recorded Qwen-1_8B-Chat document names its derived limits and the model whose
    floor gave them, in English and in Chinese (one caveat, both languages kept)."""
    from npu_tutorials.core.messages import language
    from npu_tutorials.record import results
    from npu_tutorials.views import Views

    path = next(p for p in sorted((ROOT / "results" / "qwen-1_8b-chat").glob("*.json")))
    show = Views(results.read_doc(path), load_card("qwen-1_8b-chat"))
    with language("en"):
        en = show.accuracy.consistency_verdict().caveat
    with language("zh_CN"):
        zh = show.accuracy.consistency_verdict().caveat
    assert "Limits derived for logits (cosine_min, kl_max)" in en and "SmolLM2-135M-Instruct" in en
    assert "为 logits 推导的限值" in zh and "SmolLM2-135M-Instruct" in zh and "替身权重" in zh
