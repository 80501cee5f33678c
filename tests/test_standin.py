import json

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.layouts import qwen2_parameters
from npu_tutorials.inputs.standin import ensure_standin, tiny_config


def test_tiny_standin_is_reproducible(card, tmp_path):
    cfg = tiny_config(card.config, layers=1)
    a = ensure_standin(card, config=cfg, cache_dir=tmp_path / "a")
    b = ensure_standin(card, config=cfg, cache_dir=tmp_path / "b")
    assert a.sha256 == b.sha256 and a.path.name == b.path.name
    c = ensure_standin(card, config=cfg, seed=7, cache_dir=tmp_path / "a")
    assert c.sha256 != a.sha256 and c.path != a.path
    # cached: a second call in the same cache returns the same folder without rebuilding
    assert ensure_standin(card, config=cfg, cache_dir=tmp_path / "a").path == a.path


def test_standin_layout(tiny, card):
    files = {p.name for p in tiny.path.iterdir()}
    assert {"config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json", "vocab.json",
            "merges.txt", "model.safetensors", "STANDIN.json"} <= files
    tok_cfg = json.loads((tiny.path / "tokenizer_config.json").read_text())
    assert "chat_template" in tok_cfg
    meta = json.loads((tiny.path / "STANDIN.json").read_text())
    assert meta["seed"] == 42 and meta["weights_sha256"] == tiny.sha256


def test_standin_file_has_the_layouts_shapes(tiny):
    from safetensors import safe_open

    cfg = json.loads((tiny.path / "config.json").read_text())
    expected = {name: shape for name, shape, _ in qwen2_parameters(cfg)}
    with safe_open(str(tiny.path / "model.safetensors"), "pt") as f:
        got = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        assert str(f.get_slice("model.norm.weight").get_dtype()).upper() in ("BF16", "BFLOAT16")
    assert got == expected
    assert "lm_head.weight" not in got  # tied, as in the official config


def test_standin_loads_in_transformers(tiny):
    """transformers builds the model from the folder, takes every tensor from the file (none freshly
    initialised), ties lm_head to the embedding, and computes finite logits over the vocabulary."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(str(tiny.path), dtype=torch.float32, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    saved = load_file(str(tiny.path / "model.safetensors"))
    params = dict(model.named_parameters())
    for name, t in saved.items():
        assert torch.equal(params[name].detach(), t.float()), name
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    with torch.inference_mode():
        logits = model(torch.tensor([[9707, 11, 1128, 374, 697, 829, 30]])).logits
    assert logits.shape == (1, 7, model.config.vocab_size) and torch.isfinite(logits).all()
    assert logits[0, -1].std() > 0  # not a constant output: the weights are really in there


def test_official_shape_has_494m_parameters(card):
    n = sum(__import__("math").prod(s) for _, s, _ in qwen2_parameters(card.config))
    assert round(n / 1e6, 1) == 494.0


def test_tiny_head_dim_guard(card):
    with pytest.raises(TutorialError, match="head_dim >= 32"):
        tiny_config(card.config, hidden=64, heads=4)
