import pytest
import yaml

from npu_tutorials.measure import tasks
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.checks.e2e import e2e_config


def test_qa_scoring():
    assert tasks.qa_correct("中国的首都是北京。", ["北京"])
    assert tasks.qa_correct("The largest planet is Jupiter", ["木星", "Jupiter"])
    assert not tasks.qa_correct("上海", ["北京"])
    # a whole answer, not part of another number or word (SmolLM2's "-18.0°C" for the freezing point)
    assert not tasks.qa_correct("The freezing point of water is -18.0°C.", ["0", "zero"])
    assert tasks.qa_correct("Water freezes at 0 °C.", ["0", "zero"]) and tasks.qa_correct("It is 0.", ["0"])
    assert not tasks.qa_correct("Australia", ["Au"]) and tasks.qa_correct("The symbol is Au.", ["Au"])
    assert tasks.qa_correct("1+1=2。", ["2", "二"]) and not tasks.qa_correct("12 months", ["2"])
    # a negated or hedged answer is not an answer; the same word un-negated elsewhere is
    assert not tasks.qa_correct("A banana is not yellow.", ["yellow"])
    assert not tasks.qa_correct("It isn't Paris.", ["Paris"]) and not tasks.qa_correct("首都不是北京。", ["北京"])
    assert not tasks.qa_correct("Maybe 7, I am not sure.", ["7", "seven"])
    assert tasks.qa_correct("Not London: the capital is Paris.", ["Paris"])
    card = load_card("qwen-1_8b-chat")
    outs = ["北京", "1+1=3", "你好！", "一年有12个月", "土星"]
    assert [tasks.qa_correct(o, i.expected) for o, i in zip(outs, card.accuracy.qa.items)] == [True, False, True,
                                                                                             True, False]


def test_gsm_answer_extraction():
    assert tasks.last_number("so 3 + 4 = 7 apples\n#### 7") == "7"
    assert tasks.last_number("The total is 1,234.") == "1234"
    assert tasks.last_number("no digits") is None
    assert tasks.gsm_correct("#### 70", "70") and tasks.gsm_correct("answer: 70.0", "70")
    assert not tasks.gsm_correct("#### 71", "70") and not tasks.gsm_correct("seventy", "70")


def test_malformed_expected_answer_surfaces():
    with pytest.raises(TutorialError, match="not a number"):
        tasks.gsm_correct("#### 7", "seven")


def test_offline_gsm_set_is_reproducible_and_says_why():
    a = tasks.gsm_set(3, seed=42)
    b = tasks.gsm_set(3, seed=42)
    assert a.hub is False and a.source.startswith("reasoning-gym gsm_symbolic")
    assert a.fallback_reason  # this machine has no hub: the set says why it fell back
    assert [p.question for p in a.problems] == [p.question for p in b.problems] and all(p.answer for p in a.problems)
    assert [p.question for p in tasks.gsm_set(3, seed=43).problems] != [p.question for p in a.problems]
    assert a.to_dict()["num_problems"] == 3


def test_hub_set_is_used_when_the_hub_answers(monkeypatch):
    monkeypatch.setattr(tasks, "_load_hub_gsm8k", lambda n: [tasks.GSMProblem("q", "1")] * n)
    s = tasks.gsm_set(2, seed=1)
    assert s.hub is True and s.source.startswith("GSM8K test split") and s.fallback_reason is None


@pytest.mark.parametrize("exc, reason", [
    (ConnectionError("Couldn't reach the Hub"), "ConnectionError: Couldn't reach the Hub"),
    (TimeoutError("read timed out"), "TimeoutError: read timed out"),
    (ModuleNotFoundError("No module named 'datasets'", name="datasets"), "the datasets package is not installed"),
])
def test_expected_offline_failures_fall_back_with_the_reason(monkeypatch, exc, reason):
    def fail(n):
        raise exc

    monkeypatch.setattr(tasks, "_load_hub_gsm8k", fail)
    s = tasks.gsm_set(2, seed=42)
    assert s.hub is False and reason in s.fallback_reason


def test_no_fallback_where_gsm8k_itself_is_needed(monkeypatch):
    """Real weights or a build to publish: an unreachable GSM8K fails instead of quietly scoring a
    generated set."""
    def fail(n):
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(tasks, "_load_hub_gsm8k", fail)
    with pytest.raises(TutorialError, match=r"GSM8K is not available \(the dataset hub is not reachable"):
        tasks.gsm_set(2, seed=42, fallback=None)


@pytest.mark.parametrize("exc", [KeyError("answer"), ValueError("bad split"),
                                 ImportError("operator torchvision::nms does not exist", name="torchvision")])
def test_other_failures_surface(monkeypatch, exc):
    def fail(n):
        raise exc

    monkeypatch.setattr(tasks, "_load_hub_gsm8k", fail)
    with pytest.raises(type(exc)):
        tasks.gsm_set(2, seed=42)


def test_e2e_config_matches_vllm_ascend_format():
    doc = yaml.safe_load(e2e_config(load_card("qwen-1_8b-chat")))
    assert doc["model_name"] == "Qwen/Qwen-1_8B-Chat"
    assert doc["serve"]["trust_remote_code"] is True and doc["serve"]["max_model_len"] == 8192
    assert doc["tasks"][0]["name"] == "gsm8k" and doc["tasks"][0]["metrics"][0]["value"] == 0.15
    assert doc["limit"] == 20
