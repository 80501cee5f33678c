import json

import pytest

from npu_tutorials.inputs.tokenizer import QWEN_PATTERN, build_tokenizer_json, load_ranks, added_tokens_from_config


@pytest.fixture(scope="module")
def qwen2_tok():
    from tokenizers import Tokenizer

    from npu_tutorials.inputs.cards import load_card

    cfg = json.loads((load_card("qwen2.5-0.5b").config_path / "tokenizer_config.json").read_text())
    return Tokenizer.from_str(build_tokenizer_json(added_tokens_from_config(cfg)))


def test_every_id_equals_the_official_vocab(qwen2_tok, shared_ref):
    gold = json.loads((shared_ref / "qwen2.5-0.5b" / "vocab.json").read_text())
    ours = qwen2_tok.get_vocab(with_added_tokens=False)
    assert len(gold) == len(ours) == 151_643
    wrong = [t for t, i in gold.items() if ours.get(t) != i]
    assert not wrong, wrong[:5]


def test_report_prompt_golden_ids(qwen2_tok):
    assert qwen2_tok.encode("Hello, what is your name?").ids == [9707, 11, 1128, 374, 697, 829, 30]


def test_added_tokens(qwen2_tok):
    assert qwen2_tok.token_to_id("<|endoftext|>") == 151643
    assert qwen2_tok.token_to_id("<|im_start|>") == 151644
    assert qwen2_tok.token_to_id("<|video_pad|>") == 151656
    assert qwen2_tok.token_to_id("<|file_sep|>") == 151664
    assert qwen2_tok.encode("<|im_start|>user\n").ids[0] == 151644


def test_qwen3_added_tokens_take_qwen3s_ids():
    """Qwen3's 26 added tokens (Qwen2.5's 22, then <tool_response>, </tool_response>, <think>, </think>) get the
    ids of its tokenizer_config.json, and each stays one token inside text."""
    from tokenizers import Tokenizer

    from npu_tutorials.inputs.cards import load_card

    cfg = json.loads((load_card("qwen3-0.6b").config_path / "tokenizer_config.json").read_text())
    added = added_tokens_from_config(cfg)
    assert (min(added), max(added), len(added)) == (151643, 151668, 26)
    assert {i: added[i][0] for i in range(151665, 151669)} == {
        151665: "<tool_response>", 151666: "</tool_response>", 151667: "<think>", 151668: "</think>"}
    tok = Tokenizer.from_str(build_tokenizer_json(added))
    for i, (content, _) in added.items():
        assert tok.token_to_id(content) == i, content
    assert tok.encode("<think>\nHello, what is your name?</think>").ids == [151667, 198, 9707, 11, 1128, 374, 697,
                                                                          829, 30, 151668]


TEXTS = [
    "Hello, world! It's 2026 and we're testing 12345 tokens.",
    "你好，世界。中国的首都是北京，一年有12个月。",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n\n\n",
    "   leading spaces\ttabs\r\nCRLF  and émojis 🚀🚀 ﬁ café",
]


@pytest.mark.parametrize("text", TEXTS)
def test_same_ids_as_tiktoken_on_the_same_ranks(qwen2_tok, text):
    import unicodedata

    import tiktoken

    enc = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=load_ranks(), special_tokens={})
    assert qwen2_tok.encode(text).ids == enc.encode(unicodedata.normalize("NFC", text))
    assert qwen2_tok.decode(qwen2_tok.encode(text).ids) == unicodedata.normalize("NFC", text)
