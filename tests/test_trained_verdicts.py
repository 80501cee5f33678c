"""The verdicts on a trained model: SmolLM2-135M-Instruct's real (dequantized) weights, no vLLM needed.

The engine's side is a fake at the exact boundary the checks use, vLLM's OpenAI completions API (a prompt of
token ids; ``return_token_ids``; ``logprobs`` of the vocabulary size with ``return_tokens_as_token_ids`` giving the whole
vocabulary's raw logits keyed ``token_id:N``, as ``--max-logprobs -1 --logprobs-mode raw_logits`` makes vLLM
answer; the reply's form is the same in every declared vLLM, 0.23.0 to 0.32.0, and each of them accepts these
request bodies: tests/test_vllm_releases.py sends them through each release's own request classes), answered by
transformers in bf16: bf16 arithmetic by another implementation, as a right engine's is.
The wrong engine is the same with every MLP weight perturbed.  On the trained model the right engine parts from
the fp32 reference at near-ties, and the same checks PASS it and FAIL the wrong one (the real engine's runs:
the SmolLM2 page, and the negative controls on its real checkpoint on the methods page).
"""

import pytest

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.packaged import ensure_dequantized
from npu_tutorials.measure import accuracy, consistency

KEY = "smollm2-135m-instruct"


class TransformersEngine:
    """vLLM's completions API, answered by a transformers model (greedy; full-vocabulary raw logits)."""

    def __init__(self, model):
        self.model = model

    def post(self, path, body):
        import torch

        assert path == "/v1/completions" and body["temperature"] == 0.0
        ids = list(body["prompt"])
        with torch.inference_mode():
            if body.get("logprobs") is not None:  # a full-vocabulary request (logprobs = the vocabulary size)
                assert body["max_tokens"] == 1 and body["return_tokens_as_token_ids"]
                logits = self.model(torch.tensor([ids])).logits[0, -1].float()
                top = {f"token_id:{i}": v for i, v in enumerate(logits.tolist())}
                return {"choices": [{"logprobs": {"top_logprobs": [top]}, "token_ids": [int(logits.argmax())]}]}
            stops = set(body.get("stop_token_ids") or ())
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=body["max_tokens"], do_sample=False,
                                      eos_token_id=list(stops) or None, pad_token_id=0)
            new = out[0, len(ids):].tolist()
            cut = next((i + 1 for i, t in enumerate(new) if t in stops), len(new))
            return {"choices": [{"token_ids": new[:cut]}]}


@pytest.fixture(scope="module")
def trained():
    import torch
    from transformers import AutoModelForCausalLM

    from npu_tutorials.measure.reference import quiet_transformers

    card = load_card(KEY)
    path = ensure_dequantized(card)
    quiet_transformers()
    right = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.bfloat16).eval()
    wrong = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.bfloat16).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in wrong.named_parameters():
            if ".mlp." in name:  # every MLP tensor: w + 0.3 rms(w) N(0, 1)
                p.add_(0.3 * p.float().pow(2).mean().sqrt() * torch.randn(p.shape, generator=gen).to(p.dtype))
    return card, path, TransformersEngine(right), TransformersEngine(wrong)


def test_greedy_and_text_verdicts_pass_a_right_engine_at_near_ties_and_fail_a_wrong_one(trained):
    card, path, right, wrong = trained
    g, qa = card.accuracy.greedy, card.accuracy.qa
    prompts, chats, n = g.prompts[:4], g.chat_prompts[:3], 12  # fewer and shorter than the page's: seconds

    def greedy(engine):
        rows = consistency.text_consistency(engine, "m", path, prompts, n, chat=False, vocab_size=card.vocab_size)
        rows += consistency.text_consistency(engine, "m", path, chats, n, chat=True, vocab_size=card.vocab_size)
        return rows, consistency.greedy_verdict(rows, **g.thresholds.model_dump(), rule=card.accuracy.splits)

    rows, ok = greedy(right)
    assert ok.passed, ok
    s = consistency.greedy_summary(rows, card.accuracy.splits)
    assert s["decisive_splits"] == 0
    bad_rows, bad = greedy(wrong)
    assert not bad.passed, bad
    text = consistency.text_consistency(wrong, "m", path, [i.prompt for i in qa.items[:3]], 12, chat=True,
                                        vocab_size=card.vocab_size)
    assert not consistency.text_verdict(text, exact_min=3, rule=card.accuracy.splits).passed


def test_logits_and_forward_consistency_verdicts_pass_the_right_engine_and_fail_the_wrong_one(trained):
    card, path, right, wrong = trained
    a = card.accuracy
    assert accuracy.logits_agreement(right, "m", path, a.logits, card.vocab_size, True, a.splits).verdict().passed
    assert not accuracy.logits_agreement(wrong, "m", path, a.logits, card.vocab_size, True, a.splits).verdict().passed
    ok = consistency.forward_consistency(right, "m", path, a.consistency, card.vocab_size, True, a.splits).verdict()
    assert ok.passed, ok
    bad = consistency.forward_consistency(wrong, "m", path, a.consistency, card.vocab_size, True, a.splits).verdict()
    assert not bad.passed, bad


def _misread(path, **config):
    """The same weights with one config value misread, as vLLM's ``--hf-overrides`` makes the engine read it while
    the fp32 reference keeps the true config (an engine-only fault)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(str(path))
    for k, v in config.items():
        setattr(cfg, k, v)
    return TransformersEngine(AutoModelForCausalLM.from_pretrained(str(path), config=cfg, dtype=torch.bfloat16).eval())


@pytest.mark.parametrize("fault", [
    {"rope_theta": 10000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},  # 100,000 in truth
    {"rms_norm_eps": 1e-2},  # 1e-5 in truth
])
def test_an_engine_that_misreads_the_config_fails_greedy_though_every_split_looks_like_a_near_tie(trained, fault):
    """The faults the old rule excused (issue 54: 10 of 12 plain rows parted, every one a "near-tie" by the engine's
    own error): judged on the contending pair and by the count of near-ties, greedy FAILs."""
    card, path, _, _ = trained
    g = card.accuracy.greedy
    engine = _misread(path, **fault)
    rows = consistency.text_consistency(engine, "m", path, g.prompts[:6], 12, chat=False, vocab_size=card.vocab_size)
    rows += consistency.text_consistency(engine, "m", path, g.chat_prompts[:3], 12, chat=True,
                                         vocab_size=card.vocab_size)
    v = consistency.greedy_verdict(rows, **g.thresholds.model_dump(), rule=card.accuracy.splits)
    assert not v.passed, v
    failed = {c[0] for c in v.checks if not c[3]}
    assert failed & {"splits at decisive positions", "near-tie splits with the pair error within the bound",
                     "near-tie splits per judged position"}, v


def test_chat_consistency_over_a_long_answer_passes_the_right_engine_and_fails_a_misread_rope(trained):
    """Every position of a 128-token chat answer, averaged: the right engine PASSes against the chat answers' floor;
    a RoPE base read as 10,000 (a fault that moves late positions most) FAILs it."""
    card, path, right, _ = trained
    a = card.accuracy
    ok = consistency.forward_consistency(right, "m", path, a.chat_consistency, card.vocab_size, True, a.splits)
    assert ok.verdict().passed, ok.verdict()
    assert len(ok.per_position) == a.chat_consistency.positions >= 128
    rope = _misread(path, rope_theta=10000.0, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    bad = consistency.forward_consistency(rope, "m", path, a.chat_consistency, card.vocab_size, True, a.splits)
    assert not bad.verdict().passed, bad.verdict()
