"""Planted stand-ins: a decisive next-token map that passes through every layer, for every
architecture a tutorial serves (Qwen2 with a tied head, first-generation QWen through the converter,
palmyra-mini's untied head, Qwen3's q/k norms and explicit head_dim), deterministic from the seed."""

import numpy as np
import pytest

from npu_tutorials.inputs import planted
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.standin import ensure_standin, tiny_config

PROMPT = [785, 6722, 315, 9625, 374, 12095, 13, 220, 31935, 64559, 99243, 101037]


@pytest.fixture(scope="module")
def code():
    return planted.token_code(151936, 256, 256, 42)


def test_the_code_is_a_permutation_of_cycles(code):
    v = code.codes.shape[0]
    assert len({row.tobytes() for row in code.codes}) == v  # one code per token
    nxt = code.next_token
    assert sorted(nxt.tolist()) == list(range(v))  # a permutation
    shifted = (code.codes.astype(np.int64) + code.shift) % code.base
    assert np.array_equal(shifted, code.codes[nxt])  # code(next(t)) = code(t) + g
    t = np.arange(v)
    for _ in range(code.base):
        t = nxt[t]
    assert np.array_equal(t, np.arange(v)) and not np.any(nxt == np.arange(v))  # cycles of length base


def test_nearest_other_code_is_min_distance_away(code):
    """The runner-up of any token agrees on at most digits - min_distance digits."""
    rng = np.random.default_rng(0)
    for t in rng.choice(code.codes.shape[0], 20, replace=False):
        agree = (code.codes == code.codes[t]).sum(1)
        agree[t] = -1
        assert agree.max() <= code.digits - code.min_distance
    assert code.min_distance >= 2


def test_deterministic_from_the_seed(code):
    again = planted.token_code(151936, 256, 256, 42)
    assert np.array_equal(again.codes, code.codes) and np.array_equal(again.next_token, code.next_token)
    assert not np.array_equal(planted.token_code(151936, 256, 256, 7).next_token, code.next_token)


def test_too_small_a_model_is_one_clear_line():
    with pytest.raises(TutorialError, match="too small for a planted stand-in"):
        planted.token_code(151936, 64, 64, 42)
    with pytest.raises(TutorialError, match="divisible by 8"):
        planted.token_code(151937, 256, 256, 42)


def _forward(path, ids, dtype):
    import torch
    from transformers import AutoModelForCausalLM

    from npu_tutorials.measure.reference import quiet_transformers

    quiet_transformers()
    model, info = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, output_loading_info=True)
    # the layout's tensor list is what transformers builds for the config: nothing missing, extra or misshapen
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    model.eval()
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].double().numpy()


@pytest.mark.parametrize("key", known_models())
def test_the_engine_dtype_keeps_every_planted_decision(key):
    """Every card's layout (LAYOUTS, through its tiny stand-in): transformers loads exactly its tensors, fp32
    follows the planted map at every position, with a top-1/top-2 gap many times the bf16-vs-fp32 logit error;
    bf16 makes the same choice everywhere."""
    import torch

    from npu_tutorials.inputs.convert import ensure_converted, qwen2_config

    card = load_card(key)
    cfg = tiny_config(card.config)
    info = ensure_standin(card, config=cfg, label="tiny")
    path = ensure_converted(info.path) if card.architecture == "QWenLMHeadModel" else info.path
    served_cfg = qwen2_config(cfg) if card.architecture == "QWenLMHeadModel" else cfg
    nxt = planted.next_tokens(served_cfg, card.stand_in.seed)
    prompt = [t % card.vocab_size for t in PROMPT]
    ref, eng = _forward(path, prompt, torch.float32), _forward(path, prompt, torch.bfloat16)
    assert ref.argmax(1).tolist() == [int(nxt[t]) for t in prompt]
    assert eng.argmax(1).tolist() == ref.argmax(1).tolist()
    top2 = np.sort(ref, 1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    err = np.abs(eng - ref).max(1)
    assert gap.min() > 10 * err.max(), (gap.min(), err.max())


def test_the_qwen_layout_is_the_planted_network(tmp_path):
    """An independent forward of first-generation QWen (its own names, fused c_attn, w1/w2) on the
    QWen-layout stand-in follows the same planted map: the layout's inverse mapping is exact."""
    from npu_tutorials.inputs.convert import qwen2_config
    from qwen_forward import load_qwen, qwen_logits

    card = load_card("qwen-1_8b-chat")
    cfg = tiny_config(card.config)
    info = ensure_standin(card, config=cfg, label="tiny")
    qcfg, w = load_qwen(info.path)
    logits = qwen_logits(qcfg, w, PROMPT).numpy()
    nxt = planted.next_tokens(qwen2_config(cfg), card.stand_in.seed)
    assert logits.argmax(1).tolist() == [int(nxt[t]) for t in PROMPT]


def test_a_fault_inside_the_layers_flips_decisions(card, tiny, tmp_path):
    """The decision passes through the layers: noise on every layer's MLP (not the embedding or
    the head) changes the top token at some position."""
    import torch

    from npu_tutorials.checks.controls import perturb_checkpoint

    perturb_checkpoint(tiny.path, tmp_path / "p", rel=1.0, family="mlp")
    right = _forward(tiny.path, PROMPT, torch.float32).argmax(1)
    wrong = _forward(tmp_path / "p", PROMPT, torch.float32).argmax(1)
    assert (right != wrong).any()
