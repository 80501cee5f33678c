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
    if "near_tie_nmse_pct_max" in c.derived.limits:
        for other in (a.greedy.thresholds.near_tie_nmse_pct_max if a.greedy else None,
                      a.qa.near_tie_nmse_pct_max if a.qa else None):
            assert other in (None, derived["near_tie_nmse_pct_max"])
    judged = {c.text, *(a.logits.prompts if a.logits else []), *(a.greedy.prompts if a.greedy else [])}
    assert not judged & {f["text"] for f in rec["floor"]}  # calibrated on texts the checks do not judge
    assert rec["provenance"]["weights_kind"] == "real" and "/" not in rec["provenance"]["weights"].split(":")[0]


def test_a_card_cannot_copy_a_hidden_state_cosine_onto_logits(tmp_path):
    from npu_tutorials.core.errors import TutorialError
    from npu_tutorials.inputs.cards import CARDS_DIR, load_card_file

    text = (CARDS_DIR / "qwen-1_8b-chat.yaml").read_text()
    assert "limits: [cosine_min, kl_max" in text
    bad = tmp_path / "qwen-1_8b-chat.yaml"
    bad.write_text(text.replace("limits: [cosine_min, kl_max, ", "limits: ["))
    with pytest.raises(TutorialError, match="cosine_min, kl_max must be derived"):
        load_card_file(bad)


def test_derive_is_the_floor_times_the_factor_rounded_to_the_looser_side():
    rows = [{"mean_cosine": 0.9992, "mean_kl_nats": 0.0024, "max_nmse_pct": 1.68, "ppl_rel_diff_pct": 0.31},
            {"mean_cosine": 0.9998, "mean_kl_nats": 0.0040, "max_nmse_pct": 0.36, "ppl_rel_diff_pct": 0.12}]
    d = floor.derive(rows, 4)
    assert d == {"ppl_rel_diff_pct_max": 1.3, "cosine_min": 0.9968, "kl_max": 0.016, "near_tie_nmse_pct_max": 6.8}
    assert d["cosine_min"] <= 1 - 4 * 0.0008 and d["kl_max"] >= 4 * 0.004 and d["near_tie_nmse_pct_max"] >= 6.72


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
    assert len(rec["floor"]) == 1 and rec["derived"] == floor.derive(rec["floor"], rec["factor"])
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
    assert "Limits derived for logits (cosine_min, kl_max, near_tie_nmse_pct_max)" in en and "SmolLM2-135M-Instruct" in en
    assert "为 logits 推导的限值" in zh and "SmolLM2-135M-Instruct" in zh and "替身权重" in zh
