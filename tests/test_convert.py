"""The QWen -> Qwen2 converter: exact logits, exact token ids, clear refusals."""

import json
import shutil

import numpy as np
import pytest

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.convert import check_qwen_checkpoint, convert_checkpoint, ensure_converted
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.standin import ensure_standin, tiny_config


@pytest.fixture(scope="module")
def qwen_tiny():
    card = load_card("qwen-1_8b-chat")
    return ensure_standin(card, config=tiny_config(card.config), label="tiny")


@pytest.fixture(scope="module")
def converted(qwen_tiny):
    return ensure_converted(qwen_tiny.path)


def test_standin_has_the_original_layout(qwen_tiny):
    names = {p.name for p in qwen_tiny.path.iterdir()}
    assert {"config.json", "generation_config.json", "tokenizer_config.json", "qwen.tiktoken"} <= names
    cfg = json.loads((qwen_tiny.path / "config.json").read_text())
    assert cfg["architectures"] == ["QWenLMHeadModel"] and "auto_map" in cfg
    from safetensors import safe_open

    with safe_open(str(qwen_tiny.path / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert "transformer.h.0.attn.c_attn.bias" in keys and "transformer.h.1.mlp.w2.weight" in keys


def test_converted_config(converted):
    cfg = json.loads((converted / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen2ForCausalLM"]
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"] == 4
    assert cfg["intermediate_size"] == 256 and cfg["rope_theta"] == 10000.0 and not cfg["tie_word_embeddings"]


@pytest.mark.parametrize("text", [
    "你好",
    "Hello, what is your name?",
    pytest.param("def f(x):\n    return x * 2  # 注释 mixed 中英文 text\n" * 4, marks=pytest.mark.slow),
    pytest.param("The Qwen series. " * 60, marks=pytest.mark.slow),  # the long ones: seconds each
])
def test_logits_equal_an_independent_qwen_forward(qwen_tiny, converted, text):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qwen_forward import load_qwen, qwen_logits

    tok = AutoTokenizer.from_pretrained(converted)
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    ids = tok(text)["input_ids"]
    cfg, w = load_qwen(qwen_tiny.path)
    with torch.inference_mode():
        ours = model(torch.tensor([ids])).logits[0].numpy()
    theirs = qwen_logits(cfg, w, ids).numpy()
    assert ours.shape == theirs.shape == (len(ids), 151936)
    assert np.max(np.abs(ours - theirs)) < 1e-4 * max(1.0, np.abs(theirs).max())


def test_independent_forward_is_sensitive(qwen_tiny):
    """The exactness test can fail: swapping w1 and w2 changes the logits."""
    from qwen_forward import load_qwen, qwen_logits

    cfg, w = load_qwen(qwen_tiny.path)
    ids = [9707, 11, 1128, 374]
    a = qwen_logits(cfg, w, ids)
    w2 = dict(w)
    w2["transformer.h.0.mlp.w1.weight"], w2["transformer.h.0.mlp.w2.weight"] = w["transformer.h.0.mlp.w2.weight"], \
        w["transformer.h.0.mlp.w1.weight"]
    assert float((a - qwen_logits(cfg, w2, ids)).abs().max()) > 1e-3


TEXTS = ["你好，世界！今天是2026年11月29日。", "Translate Hello into 中文, then print('done')\n\tx = [1, 2, 3]",
         "<|im_start|>user\n1+1=？<|im_end|>\n<|im_start|>assistant\n"]


@pytest.mark.parametrize("text", TEXTS)
def test_converted_tokenizer_equals_tiktoken(converted, qwen_tiny, text):
    import unicodedata

    import tiktoken
    from transformers import AutoTokenizer

    from npu_tutorials.inputs.convert import QWEN_SPECIAL
    from npu_tutorials.inputs.tokenizer import QWEN_PATTERN, load_ranks

    enc = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=load_ranks(str(qwen_tiny.path / "qwen.tiktoken")),
                            special_tokens={t: 151643 + i for i, t in enumerate(QWEN_SPECIAL)})
    tok = AutoTokenizer.from_pretrained(converted)
    assert tok(text)["input_ids"] == enc.encode(unicodedata.normalize("NFC", text), allowed_special="all")
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<|extra_204|>"]) == [151644, 151645, 151850]
    assert len(tok) == 151851


def test_chat_template_is_chatml(converted):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(converted)
    text = tok.apply_chat_template([{"role": "user", "content": "你好"}], tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n")


def _copy(src, tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("breakage, message", [
    (lambda d: (d / "config.json").unlink(), "no config.json"),
    (lambda d: (d / "config.json").write_text("{not json"), "config.json is not JSON"),
    (lambda d: _edit(d, architectures=["LlamaForCausalLM"]), "not ['QWenLMHeadModel']"),
    (lambda d: _edit(d, rotary_pct=0.5), "rotary_pct 0.5"),
    (lambda d: _edit(d, kv_channels=None), "lacks a numeric kv_channels"),
    (lambda d: (d / "qwen.tiktoken").unlink(), "no qwen.tiktoken"),
    (lambda d: (d / "model.safetensors").unlink(), "no *.safetensors"),
    (lambda d: _edit(d, num_hidden_layers=3), "tensors missing"),
    (lambda d: _edit(d, hidden_size=512), "has shape"),
])
def test_refuses_what_it_does_not_understand(qwen_tiny, tmp_path, breakage, message):
    src = _copy(qwen_tiny.path, tmp_path)
    breakage(src)
    with pytest.raises(TutorialError) as exc:
        convert_checkpoint(src, tmp_path / "out")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{src}: cannot convert: ") and message in msg, msg


def _edit(d, **kw):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(kw)
    (d / "config.json").write_text(json.dumps(cfg))


def test_cli_refuses_with_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "scripts/convert_qwen.py", str(tmp_path), str(tmp_path / "o")], cwd=root,
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {tmp_path}: cannot convert: no config.json"


def test_check_accepts_the_standin(qwen_tiny):
    assert check_qwen_checkpoint(qwen_tiny.path)["kv_channels"] == 64
