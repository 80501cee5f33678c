import json

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.weights import resolve_weights, weights_mode


def _model_dir(path):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))
    return path


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("TUTORIAL_WEIGHTS", "TUTORIAL_MODEL_PATH_QWEN2_5_0_5B"):
        monkeypatch.delenv(var, raising=False)


def _failing(name):
    def fetch(ref, local_only):
        raise ConnectionError(f"{name} unreachable")
    return (name, fetch)


NO_HUB = [_failing("modelscope"), _failing("huggingface")]


def test_local_path(card, tmp_path, monkeypatch):
    d = _model_dir(tmp_path / "m")
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(d))
    w = resolve_weights(card, "auto", sources=NO_HUB)
    assert w.is_real and w.path == d and w.source == "local path"


def test_a_folder_this_project_made_is_never_real(card, tiny, tmp_path, monkeypatch):
    """TUTORIAL_MODEL_PATH at a stand-in is labelled a stand-in; at a perturbed control, refused."""
    from npu_tutorials.checks.controls import perturb_checkpoint

    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(tiny.path))
    w = resolve_weights(card, "real", sources=NO_HUB)
    assert not w.is_real and w.kind == "stand-in" and (w.seed, w.sha256) == (tiny.seed, tiny.sha256)
    perturb_checkpoint(tiny.path, tmp_path / "p", rel=0.1)
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(tmp_path / "p"))
    with pytest.raises(TutorialError, match=r"perturbed control checkpoint \(PERTURBED.json\), not the model's"):
        resolve_weights(card, "auto", sources=NO_HUB)


def test_missing_local_path_is_one_clear_line(card, tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(tmp_path / "absent"))
    with pytest.raises(TutorialError, match=r"^TUTORIAL_MODEL_PATH_QWEN2_5_0_5B: .*absent is not a directory$"):
        resolve_weights(card, "auto", sources=NO_HUB)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(tmp_path / "empty"))
    with pytest.raises(TutorialError, match="has no config.json"):
        resolve_weights(card, "real", sources=NO_HUB)


def test_hub_cache_is_used_before_download(card, tmp_path):
    calls = []
    d = _model_dir(tmp_path / "cached")

    def modelscope(ref, local_only):
        calls.append(("modelscope", ref.id, local_only))
        if local_only:
            return str(d)
        raise AssertionError("no download when the cache has it")

    w = resolve_weights(card, "auto", sources=[("modelscope", modelscope)])
    assert w.is_real and w.source == "modelscope cache" and w.hub_id == "qwen/Qwen2.5-0.5B"
    assert calls == [("modelscope", "qwen/Qwen2.5-0.5B", True)]


def test_faked_huggingface_cache(card, tmp_path, monkeypatch):
    """The real huggingface_hub finds a snapshot in a cache laid out by hand, offline."""
    from npu_tutorials.inputs.weights import DEFAULT_SOURCES

    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B"
    snap = _model_dir(repo / "snapshots" / ("a" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", True)
    hf = [s for s in DEFAULT_SOURCES if s[0] == "huggingface"]
    w = resolve_weights(card, "auto", sources=[_failing("modelscope"), *hf])
    assert w.is_real and w.source == "huggingface cache" and w.path == snap


def test_real_without_network_fails_with_one_line(card):
    with pytest.raises(TutorialError) as exc:
        resolve_weights(card, "real", sources=NO_HUB)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "modelscope qwen/Qwen2.5-0.5B: ConnectionError" in msg and "huggingface Qwen/Qwen2.5-0.5B" in msg
    assert "TUTORIAL_MODEL_PATH_QWEN2_5_0_5B" in msg


def test_auto_falls_back_to_standin_dry_run(card):
    assert resolve_weights(card, "auto", sources=NO_HUB, build_standin=False) is None


def test_download_when_real(card, tmp_path):
    d = _model_dir(tmp_path / "dl")
    w = resolve_weights(card, "real", sources=[("modelscope", lambda ref, local: (_ for _ in ()).throw(
        FileNotFoundError()) if local else str(d))])
    assert w.is_real and w.source == "modelscope" and w.revision == "master"


def test_bad_mode(monkeypatch):
    monkeypatch.setenv("TUTORIAL_WEIGHTS", "fake")
    with pytest.raises(TutorialError, match="TUTORIAL_WEIGHTS='fake' is not one of auto, real, stand-in"):
        weights_mode()


def test_a_model_without_a_modelscope_copy_says_what_to_do():
    """palmyra-mini exists on Hugging Face only: `real` with no hub names the card's way out, in one line."""
    from npu_tutorials.inputs.cards import load_card

    card = load_card("palmyra-mini")
    assert card.hub.modelscope is None and card.hub.note
    with pytest.raises(TutorialError) as exc:
        resolve_weights(card, "real", sources=NO_HUB)
    msg = str(exc.value)
    assert "\n" not in msg and "huggingface Writer/palmyra-mini" in msg and "modelscope" not in msg.split(":")[1]
    assert "no ModelScope copy" in msg and "TUTORIAL_MODEL_PATH_PALMYRA_MINI" in msg and "HF_ENDPOINT" in msg
