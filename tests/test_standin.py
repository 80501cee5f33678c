import json

import pytest

from npu_tutorials.errors import TutorialError
from npu_tutorials.standin import ensure_standin, qwen2_parameters, tiny_config


def test_tiny_standin_is_reproducible(card, tmp_path):
    cfg = tiny_config(card.config, layers=1, hidden=64, heads=1, kv_heads=1, intermediate=64)
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


def test_standin_loads_in_transformers_with_the_right_shapes(tiny):
    from safetensors import safe_open

    cfg = json.loads((tiny.path / "config.json").read_text())
    expected = {name: shape for name, shape, _ in qwen2_parameters(cfg)}
    with safe_open(str(tiny.path / "model.safetensors"), "pt") as f:
        got = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        assert str(f.get_slice("model.norm.weight").get_dtype()).upper() in ("BF16", "BFLOAT16")
    assert got == expected
    assert "lm_head.weight" not in got  # tied, as in the official config


def test_official_shape_has_494m_parameters(card):
    n = sum(__import__("math").prod(s) for _, s, _ in qwen2_parameters(card.config))
    assert round(n / 1e6, 1) == 494.0


def test_tiny_head_dim_guard(card):
    with pytest.raises(TutorialError, match="head_dim >= 32"):
        tiny_config(card.config, hidden=64, heads=4)
