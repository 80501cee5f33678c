
import pytest
import yaml

from npu_tutorials.inputs.cards import CARDS_DIR, known_models, load_card, load_card_file
from npu_tutorials.core.errors import TutorialError


def test_every_shipped_card_is_valid():
    assert "qwen2.5-0.5b" in known_models()
    for key in known_models():
        card = load_card(key)
        assert card.key == key
        assert card.benchmark.profiles["full"].num_prompts > 0


def test_unknown_model_names_the_known_ones():
    with pytest.raises(TutorialError, match=r"unknown model 'nope'; known models: .*qwen2\.5-0\.5b"):
        load_card("nope")


def _write(tmp_path, name, data):
    p = tmp_path / f"{name}.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def _good():
    return yaml.safe_load((CARDS_DIR / "qwen2.5-0.5b.yaml").read_text())


@pytest.mark.parametrize("mutate, field, problem", [
    (lambda d: d["serve"].update(dtype="bf17"), "serve.dtype", "Input should be"),
    (lambda d: d["serve"].pop("max_model_len"), "serve.max_model_len", "Field required"),
    (lambda d: d["serve"].update(max_model_len=-5), "serve.max_model_len", "greater than 0"),
    (lambda d: d.update(colour="blue"), "colour", "Extra inputs are not permitted"),
    (lambda d: d["benchmark"]["profiles"].pop("quick"), "benchmark", "profiles lacks quick"),
    (lambda d: d["hub"]["modelscope"].update(id="not an id"), "hub.modelscope.id", "String should match"),
    (lambda d: d.update(architecture="LlamaForCausalLM"), "(card)", "config.json says 'Qwen2ForCausalLM'"),
    (lambda d: d.update(config_dir="missing"), "config_dir", "no config.json"),
])
def test_malformed_card_names_file_field_and_problem(tmp_path, mutate, field, problem):
    data = _good()
    mutate(data)
    path = _write(tmp_path, "qwen2.5-0.5b", data)
    with pytest.raises(TutorialError) as exc:
        load_card_file(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: {field}: "), msg
    assert problem in msg


def test_invalid_yaml_and_non_mapping(tmp_path):
    p = _write(tmp_path, "x", "key: [unclosed\n")
    with pytest.raises(TutorialError, match=r"x\.yaml: line \d+: not valid YAML"):
        load_card_file(p)
    p = _write(tmp_path, "y", "- a list\n")
    with pytest.raises(TutorialError, match="expected a mapping"):
        load_card_file(p)


def test_a_key_given_twice_is_one_line_naming_it_not_a_silent_replacement(tmp_path):
    """PyYAML keeps the last of two equal keys: a second ``serve:`` section appended to a card replaced the first
    and gave "serve.served_model_name: Field required".  The card loader names the repeated key and its line."""
    text = (CARDS_DIR / "qwen2.5-0.5b.yaml").read_text(encoding="utf-8")
    p = _write(tmp_path, "qwen2.5-0.5b", text + "\nserve:\n  dtype: bfloat16\n")
    with pytest.raises(TutorialError) as exc:
        load_card_file(p)
    line = len(text.splitlines()) + 2
    assert str(exc.value) == f"{p}: line {line}: not valid YAML (the key 'serve' is given twice)"
    p = _write(tmp_path, "qwen2.5-0.5b", text.replace("serve:\n", "serve:\n  port: 1\n  port: 2\n", 1))
    with pytest.raises(TutorialError, match=r"not valid YAML \(the key 'port' is given twice\)"):
        load_card_file(p)


def test_key_must_match_file_name(tmp_path):
    p = _write(tmp_path, "other-name", _good())
    with pytest.raises(TutorialError, match=r"key: 'qwen2\.5-0\.5b' must equal the file name 'other-name'"):
        load_card_file(p)


def test_card_config_is_the_official_one(card, shared_ref):
    import json

    assert card.config == json.loads((shared_ref / "qwen2.5-0.5b" / "config.json").read_text())
    for name in ("generation_config.json", "tokenizer_config.json"):
        assert (card.config_path / name).read_bytes() == (shared_ref / "qwen2.5-0.5b" / name).read_bytes()
    assert card.env_suffix == "QWEN2_5_0_5B"
