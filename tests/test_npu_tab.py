"""The NPU tab of "Deploy it yourself" (issue 39): the measured best per scenario from the newest NPU build's
tuning section (or "not measured yet"), quantized serving only where the card names a published W8A8
checkpoint (checked against vllm-ascend's contract), and the card's FAQ."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from docs import machine, sweep_doc
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.engine import commands as C
from npu_tutorials.engine.platform import platform_for
from npu_tutorials.inputs import knobs, releases
from npu_tutorials.inputs.cards import CARDS_DIR, Hub, HubRef, known_models, load_card, load_card_file
from npu_tutorials.record.results import write_doc
from npu_tutorials.record.schema import LengthPoint, Stat, Tuning, TuningRow
from npu_tutorials.site import deploy_page
from npu_tutorials.site.deploy_page import deploy_rst


def _tab(rst: str, label: str) -> str:
    return rst.split(f".. tab-item:: {label}")[1].split(".. tab-item::")[0]


@pytest.fixture
def no_records(monkeypatch, tmp_path):
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "recorded"))
    return tmp_path / "recorded"


@pytest.mark.parametrize("key", known_models())
def test_the_npu_tab_has_the_scenarios_the_quantized_sentence_and_the_faq(key, no_records):
    card = load_card(key)
    rst = deploy_rst(card)
    npu = _tab(rst, "Ascend NPU")
    assert "**Scenarios (measured).** Not measured yet" in npu
    assert npu.count("not measured yet") == 3 and "Low latency" in npu and "High throughput" in npu
    assert "Long context" in npu
    assert "``--quantization ascend``" in npu
    if card.deploy.w8a8 is None:
        assert (f"**Quantized (W8A8).** This card names no published W8A8 checkpoint of {card.name}" in npu
                and "(float16 on 310P)" in npu)
    else:  # tests/test_npu_tab.py::test_qwen3_0_6b_offers_vllm_ascend_s_own_w8a8_checkpoint_unmeasured
        assert "**Quantized (W8A8).** The published W8A8 checkpoint" in npu and "Not measured by this site" in npu
    assert 2 <= len(card.deploy.faq) <= 4
    assert "**FAQ.**" in npu and all(f"- **{e.q}** {e.a}" in npu for e in card.deploy.faq)
    for other in ("NVIDIA GPU", "CPU"):  # the NPU tab's own blocks
        tab = rst.split(f".. tab-item:: {other}")[1]
        assert "**FAQ.**" not in tab and "Scenarios (measured)" not in tab and "W8A8" not in tab


def test_the_long_context_scenario_names_the_sweeps_longest_input(no_records):
    npu = _tab(deploy_rst(load_card("palmyra-mini")), "Ascend NPU")
    assert "4096 input tokens, the longest of this page's input-length sweep" in npu
    assert "highest median output throughput at concurrency 16" in npu
    npu = _tab(deploy_rst(load_card("qwen3-0.6b")), "Ascend NPU")  # no sweeps, no tuning section
    assert "this page's sweeps do not measure input length" in npu and "card has no tuning section" in npu


def _row(name, tpot, c1, high, knobs=()):
    return TuningRow(name=name, flags=[], knobs=list(knobs), startup_s=60.0, tpot_ms=Stat.of(tpot),
                     throughput_c1=Stat.of(c1), throughput_high=Stat.of(high), high_concurrency=16)


def _npu_doc(built_at="2026-12-01T08:00:00+00:00", device="Ascend910B3"):
    doc = sweep_doc("palmyra-mini", mach=machine("npu", device, vllm_ascend="0.23.0"), profile="full",
                    built_at=built_at)
    doc.results.conditions.eager = False
    doc.results.tuning = Tuning(rows=[
        _row("report's conditions (eager)", [30.0, 31.0, 32.0], [30.0] * 3, [300.0, 305.0, 310.0]),
        _row("graph mode", [20.0, 21.0, 22.0], [45.0] * 3, [500.0, 505.0, 510.0]),
        _row("graph mode + CPU affinity", [15.0, 15.5, 16.0], [60.0] * 3, [480.0, 490.0, 495.0], ["CPU affinity"]),
        _row("graph mode + 8192 batched tokens", [20.0, 20.5, 21.0], [46.0] * 3, [600.0, 610.0, 620.0],
             ["8192 batched tokens"]),
    ], best="graph mode + CPU affinity")
    doc.results.input_length_sweep = [
        LengthPoint(input_len=n, prefill_ms=Stat.of([n / 10, n / 10 + 1]), tpot_ms=Stat.of([20.0 + n / 1000] * 2),
                    ttft_concurrent_ms=Stat.of([n / 5]), concurrent_requests=4) for n in (128, 1024, 4096)]
    return doc


def test_a_recorded_npu_tuning_fills_each_scenario_with_its_measured_best(no_records):
    card = load_card("palmyra-mini")
    write_doc(_npu_doc("2026-11-20T08:00:00+00:00", "Ascend910B4"), no_records / "palmyra-mini" / "old.json")
    write_doc(_npu_doc(), no_records / "palmyra-mini" / "npu.json")
    rows, doc = deploy_page.scenarios(card)
    assert doc.provenance.built_at.startswith("2026-12-01")  # the newest NPU build
    by = {name: (cfg, fig) for name, _by, cfg, fig in rows}
    t = doc.results.tuning
    assert by["Low latency"] == ("graph mode + CPU affinity", f"TPOT {t.rows[2].tpot_ms.text(1, 'ms')}")
    assert by["High throughput"] == ("graph mode + 8192 batched tokens", t.rows[3].throughput_high.text(1, "tok/s"))
    p = doc.results.input_length_sweep[-1]
    assert by["Long context"] == ("graph mode", f"TPOT {p.tpot_ms.text(1, 'ms')}, prefill {p.prefill_ms.text(1, 'ms')}")
    npu = _tab(deploy_rst(card), "Ascend NPU")
    assert ("**Scenarios (measured).** The configuration of the page's tuning table that measured best per "
            "scenario, on Ascend910B3 x 1 on 2026-12-01 (full profile, vllm-ascend 0.23.0)") in npu
    assert "not measured yet" not in npu and "graph mode + 8192 batched tokens" in npu
    assert "610.0 tok/s (IQR 605.0–615.0, n=3)" in npu


def test_a_cpu_record_fills_no_scenario(no_records):
    doc = _npu_doc()
    cpu = sweep_doc("palmyra-mini", profile="full")
    cpu.results.tuning = doc.results.tuning
    write_doc(cpu, no_records / "palmyra-mini" / "cpu.json")
    rows, found = deploy_page.scenarios(load_card("palmyra-mini"))
    assert found is None and all(cfg is None and fig is None for _n, _b, cfg, fig in rows)


FAKE_W8A8 = Hub(modelscope=HubRef(id="Fake-Org/Qwen3-0.6B-W8A8", revision="v1"))


def _with_w8a8(card):
    return card.model_copy(update={"deploy": card.deploy.model_copy(update={"w8a8": FAKE_W8A8})})


def test_a_card_naming_a_w8a8_checkpoint_validates(tmp_path):
    data = yaml.safe_load((CARDS_DIR / "qwen3-0.6b.yaml").read_text())
    data["deploy"]["w8a8"] = {"modelscope": {"id": "Fake-Org/Qwen3-0.6B-W8A8", "revision": "v1"}}
    (tmp_path / "qwen3-0.6b.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
    card = load_card_file(tmp_path / "qwen3-0.6b.yaml")
    assert card.deploy.w8a8 == FAKE_W8A8
    data["deploy"]["w8a8"] = {"note": "no hub"}
    (tmp_path / "qwen3-0.6b.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(TutorialError, match="deploy.w8a8"):
        load_card_file(tmp_path / "qwen3-0.6b.yaml")


@pytest.mark.parametrize("key", known_models())
def test_the_w8a8_command_is_the_deploy_command_plus_the_ascend_quantization(key, no_records):
    card = _with_w8a8(load_card(key))
    if C.needs_conversion(card, "npu"):  # served converted: a quantized checkpoint is not
        with pytest.raises(TutorialError, match="deploy.w8a8: the commands serve QWenLMHeadModel converted"):
            deploy_page.w8a8_argv(card)
        return
    argv = deploy_page.w8a8_argv(card)
    assert argv == C.deploy_argv(card, "npu", model_dir=f"./{card.name}-W8A8", extra=("--quantization", "ascend"))
    assert knobs.VLLM_ASCEND_QUANTIZATION == "ascend" and "--quantization" in knobs.pinned_schema()["vllm"]["engine_flags"]
    assert knobs.ascend_contract_problems(argv, platform_for("npu").serve_env(card)) == []
    npu = _tab(deploy_rst(card), "Ascend NPU")
    assert ("**Quantized (W8A8).** The published W8A8 checkpoint ModelScope ``Fake-Org/Qwen3-0.6B-W8A8`` "
            "(revision ``v1``)") in npu and "no published W8A8" not in npu
    assert f"modelscope download --model Fake-Org/Qwen3-0.6B-W8A8 --revision v1 --local_dir ./{card.name}-W8A8" in npu
    shown = C.format_command(argv, platform_for("npu").serve_env(card), exports=True)
    assert deploy_page._indent(shown, 9) in npu  # in the tab (6) and its code block (3)
    assert f"vllm serve ./{C.serving_dir(card, 'npu', f'./{card.name}-W8A8').removeprefix('./')}" in shown
    words = shlex.split(" ".join(l.rstrip("\\") for l in shown.splitlines() if not l.startswith("export ")))
    assert words[words.index("--quantization") + 1] == "ascend"
    assert (deploy_page.w8a8_argv(load_card(key)) is None) == (load_card(key).deploy.w8a8 is None)


def test_qwen3_0_6b_offers_vllm_ascend_s_own_w8a8_checkpoint_unmeasured(no_records):
    """Issue 53: the card names the W8A8 checkpoint vllm-ascend's own tests serve with quantization="ascend"
    (v0.23.0 tests/e2e/pull_request/two_card/test_flashcomm_distributed.py:34, :94; on ModelScope, which its CI
    downloads from: .github/workflows/misc/model_dataset_list.json:218); the page offers it with a serve command
    checked against the pinned release's flags and vllm-ascend's contract, and says this site has not measured it."""
    card = load_card("qwen3-0.6b")
    assert card.deploy.w8a8 == Hub(modelscope=HubRef(id="vllm-ascend/Qwen3-0.6B-W8A8", revision="master"))
    argv = deploy_page.w8a8_argv(card)
    assert argv == C.deploy_argv(card, "npu", model_dir="./Qwen3-0.6B-W8A8", extra=("--quantization", "ascend"))
    assert knobs.flag_problems(platform_for("npu").serve_flags(card, eager=False) + ["--quantization", "ascend"]) == []
    assert knobs.ascend_contract_problems(argv, platform_for("npu").serve_env(card)) == []
    npu = _tab(deploy_rst(card), "Ascend NPU")
    assert ("**Quantized (W8A8).** The published W8A8 checkpoint ModelScope ``vllm-ascend/Qwen3-0.6B-W8A8`` (revision "
            "``master``): download it into ``./Qwen3-0.6B-W8A8``, then serve it with ``--quantization ascend`` in place "
            "of step 4. Not measured by this site: no build of this page served it, so no figure here is of it, and the "
            "command is only checked against the flags of vLLM 0.23.0 / vllm-ascend v0.23.0") in npu
    assert "modelscope download --model vllm-ascend/Qwen3-0.6B-W8A8 --revision master --local_dir ./Qwen3-0.6B-W8A8" in npu
    assert deploy_page._indent(C.format_command(argv, platform_for("npu").serve_env(card), exports=True), 9) in npu
    assert "no published W8A8" not in npu


def test_the_w8a8_command_is_refused_where_the_pinned_release_lacks_a_flag(monkeypatch):
    """The check is not vacuous: a serve flag the pinned vLLM does not have stops the quantized command."""
    card = load_card("qwen3-0.6b")
    real = knobs.pinned_schema()
    fake = {**real, "vllm": {**real["vllm"], "engine_flags": [f for f in real["vllm"]["engine_flags"]
                                                              if f != "--quantization"]}}
    monkeypatch.setattr(releases, "pinned_schema", lambda: fake)  # where schema_for reads it
    with pytest.raises(TutorialError, match="deploy.w8a8: .*--quantization is not a flag of vLLM 0.23.0"):
        deploy_page.w8a8_argv(card)


@pytest.mark.parametrize("key", known_models())
def test_the_npu_tab_serves_310p_with_vllm_ascend_s_300i_duo_flags(key, no_records):
    """Issue 53: on Atlas 300I DUO the NPU tab's serve command is the one a 310P build runs: float16, and what every
    300I DUO recipe of vllm-ascend adds (v0.23.0 docs/source/tutorials/models/Qwen3-Dense.md:327,330), each flag
    checked against the pinned release."""
    card = load_card(key)
    argv = C.deploy_argv(card, "npu", family="310p")
    flags = argv[argv.index("--dtype"):argv.index("--api-key")]
    assert flags[:2] == ["--dtype", "float16"]
    i = flags.index("--compilation-config")
    assert json.loads(flags[i + 1]) == {"cudagraph_mode": "FULL_DECODE_ONLY",
                                        "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32]}
    assert flags[i + 2:] == ["--no-enable-prefix-caching"]
    assert knobs.flag_problems(flags) == []  # the pinned extract: --enable-prefix-caching's --no- form, the keys
    assert knobs.ascend_contract_problems(argv, platform_for("npu").serve_env(card)) == []
    assert C.deploy_argv(card, "npu") == [*argv[:argv.index("--dtype")], "--dtype", card.serve.dtype,
                                          *flags[2:i], *argv[argv.index("--api-key"):]]  # A2/A3: none of them
    npu = _tab(deploy_rst(card), "Ascend NPU")
    assert "On Atlas 300I DUO (310P), use the ``quay.io/ascend/vllm-ascend:v0.23.0-310p`` image in step 1" in npu
    assert deploy_page._indent(C.format_command(argv), 9) in npu
    assert "graph mode works there too" not in npu


def test_the_310p_capture_sizes_stop_at_the_card_s_max_num_seqs():
    """Qwen3-Dense.md:349: the 300I DUO recipe with --max-num-seqs 16 captures [1,2,4,8,16]."""
    card = load_card("qwen3-0.6b")
    card = card.model_copy(update={"serve": card.serve.model_copy(update={"max_num_seqs": 16})})
    argv = C.deploy_argv(card, "npu", family="310p")
    graph = json.loads(argv[argv.index("--compilation-config") + 1])
    assert graph["cudagraph_capture_sizes"] == [1, 2, 4, 8, 16]
    eager = C.deploy_argv(card, "npu", family="310p", eager=True)  # --enforce-eager instead of the graph config
    assert "--enforce-eager" in eager and "--compilation-config" not in eager and "--no-enable-prefix-caching" in eager
