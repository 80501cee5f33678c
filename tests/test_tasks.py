import yaml

from npu_tutorials import tasks
from npu_tutorials.cards import load_card
from npu_tutorials.e2e import e2e_config


def test_qa_scoring():
    assert tasks.qa_correct("中国的首都是北京。", ["北京"])
    assert tasks.qa_correct("The largest planet is Jupiter", ["木星", "Jupiter"])
    assert not tasks.qa_correct("上海", ["北京"])
    card = load_card("qwen-1_8b-chat")
    outs = ["北京", "1+1=3", "你好！", "一年有12个月", "土星"]
    table, correct = tasks.qa_table(card.accuracy.qa.items, outs, real_weights=False)
    assert correct == 3 and "measures nothing" in table.note
    assert [r[3] for r in table.rows] == ["correct", "wrong", "correct", "correct", "wrong"]


def test_gsm_answer_extraction():
    assert tasks.last_number("so 3 + 4 = 7 apples\n#### 7") == "7"
    assert tasks.last_number("The total is 1,234.") == "1234"
    assert tasks.last_number("no digits") is None
    assert tasks.gsm_correct("#### 70", "70") and tasks.gsm_correct("answer: 70.0", "70")
    assert not tasks.gsm_correct("#### 71", "70") and not tasks.gsm_correct("seventy", "70")


def test_offline_gsm_set_is_reproducible():
    src, a = tasks.gsm_problems(3, seed=42)
    _, b = tasks.gsm_problems(3, seed=42)
    assert "reasoning-gym" in src or "GSM8K" in src
    assert [p.question for p in a] == [p.question for p in b] and all(p.answer for p in a)


def test_e2e_config_matches_vllm_ascend_format():
    doc = yaml.safe_load(e2e_config(load_card("qwen-1_8b-chat")))
    assert doc["model_name"] == "Qwen/Qwen-1_8B-Chat"
    assert doc["serve"]["trust_remote_code"] is True and doc["serve"]["max_model_len"] == 8192
    assert doc["tasks"][0]["name"] == "gsm8k" and doc["tasks"][0]["metrics"][0]["value"] == 0.15
    assert doc["limit"] == 20
