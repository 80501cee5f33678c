"""A site built for publication proves it is the one meant; CI builds say what they are."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs import machine, make_doc, sweep_doc

from npu_tutorials.site import banners, pages
from npu_tutorials.checks.publish import publish_problems
from npu_tutorials.inputs.gallery_index import tutorials
from npu_tutorials.record.results import write_doc

ROOT = Path(__file__).resolve().parents[1]
NPU = machine(backend="npu", device="Ascend910B3", n=8, vllm="0.23.0", vllm_ascend="0.23.0")


def _real_npu(model, **kw):
    make = sweep_doc if model == "palmyra-mini" else make_doc
    doc = make(model, mach=NPU, weights="real", profile="full", **kw)
    doc.provenance.weights.hub_id, doc.provenance.weights.revision = "Qwen/x", "main"
    return doc


def _build(tmp_path, docs):
    for doc in docs:
        write_doc(doc, tmp_path / "results" / f"{doc.model}.json")
    return tmp_path


TUTORIALS = tutorials()  # stem -> card key: every model, from the gallery and its cards
MODELS = tuple(sorted(TUTORIALS.values()))


def _not_executed(*having: str) -> list[str]:
    """The line of every tutorial whose document the build lacks."""
    return [f"{stem}: not executed in this build: no results to publish" for stem, key in TUTORIALS.items()
            if key not in having]


def test_an_npu_build_with_real_weights_is_publishable(tmp_path):
    assert publish_problems(_build(tmp_path, [_real_npu(m) for m in MODELS]), "npu") == []


def test_a_cpu_stand_in_build_fails_with_one_line_per_page(tmp_path):
    build = _build(tmp_path, [make_doc("qwen2.5-0.5b"), sweep_doc("palmyra-mini")])
    lines = publish_problems(build, "npu")
    assert sorted(lines) == sorted([
        "palmyra_mini: not publishable as the npu site: ran on cpu (AMD EPYC (2 cores)), not npu; "
        "stand-in weights (seed 42), not the model's",
        "qwen2_5_0_5b: not publishable as the npu site: ran on cpu (AMD EPYC (2 cores)), not npu; "
        "stand-in weights (seed 42), not the model's", *_not_executed("palmyra-mini", "qwen2.5-0.5b")])


def test_unidentified_or_failed_runs_are_not_publishable(tmp_path):
    local = _real_npu("qwen2.5-0.5b")
    local.provenance.weights.hub_id = local.provenance.weights.revision = None  # a local path, no checksum
    failed = _real_npu("palmyra-mini", status="failed")
    others = [_real_npu(m) for m in MODELS if m not in ("qwen2.5-0.5b", "palmyra-mini")]
    lines = publish_problems(_build(tmp_path, [local, failed, *others]), "npu")
    assert lines == ["palmyra_mini: not publishable as the npu site: the run failed",
                     "qwen2_5_0_5b: not publishable as the npu site: real weights from a local path without a checksum"]
    # a bare checksum is not enough: the card must list it as a known copy of the published weights
    local.provenance.weights.sha256 = "ab" * 32
    write_doc(local, tmp_path / "results" / "qwen2.5-0.5b.json")
    assert publish_problems(tmp_path, "npu", only="qwen2_5") == [
        "qwen2_5_0_5b: not publishable as the npu site: real weights from a local path whose checksum abababababab "
        "is not listed in cards/qwen2.5-0.5b.yaml (hub.sha256)"]


def test_a_checksum_the_card_lists_is_publishable(tmp_path, monkeypatch):
    from npu_tutorials.checks import publish
    from npu_tutorials.inputs import cards

    local = _real_npu("qwen2.5-0.5b")
    local.provenance.weights.hub_id = local.provenance.weights.revision = None
    local.provenance.weights.sha256 = "cd" * 32
    real_load = cards.load_card

    def listing(key):
        c = real_load(key)
        return c.model_copy(update={"hub": c.hub.model_copy(update={"sha256": ["cd" * 32]})})

    monkeypatch.setattr(publish, "load_card", listing)  # where the check reads the card
    write_doc(local, tmp_path / "results" / "qwen2.5-0.5b.json")
    assert publish_problems(tmp_path, "npu", only="qwen2_5") == []


def test_make_check_publish_names_each_page(tmp_path):
    build = _build(tmp_path, [make_doc("qwen2.5-0.5b")])
    p = subprocess.run([sys.executable, "scripts/check_site.py", "--build-dir", str(build)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "TUTORIAL_PUBLISH": "npu"})
    lines = [l for l in p.stderr.splitlines() if l.startswith("publish: ")]
    assert p.returncode == 1 and len(lines) == len(TUTORIALS)  # one line per tutorial
    assert any("qwen2_5_0_5b" in l and "ran on cpu" in l for l in lines)


def test_preflight_refuses_to_publish_a_cpu_build():
    p = subprocess.run([sys.executable, "scripts/preflight.py"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "TUTORIAL_PUBLISH": "npu", "TUTORIAL_BACKEND": "cpu",
                                         "TUTORIAL_WEIGHTS": "real"})
    assert p.returncode == 2
    assert p.stderr.strip() == ("error: PUBLISH=npu needs TUTORIAL_BACKEND=npu and TUTORIAL_WEIGHTS=real "
                                "(this build: backend cpu, weights real)")


# -- banners -------------------------------------------------------------------------------
PAGE = ("\n.. only:: html\n\n    .. note::\n        :class: sphx-glr-download-link-note\n\n"
        "        :ref:`Go to the end <sphx_glr_download_tutorials_models_qwen2_5_0_5b.py>`\n\n"
        ".. _sphx_glr_tutorials_models_qwen2_5_0_5b.py:\n\n\nQwen2.5-0.5B\n============\n\nIntro.\n\n"
        ".. rst-class:: sphx-glr-script-out\n\n .. code-block:: none\n\n    1\n")


@pytest.mark.parametrize("doc, banner", [
    (make_doc(), "Built on a CPU and with stand-in weights"),
    (make_doc(weights="real"), "Built on a CPU"),
    (make_doc(mach=NPU), "Built with stand-in weights"),
    (_real_npu("qwen2.5-0.5b"), None),
])
def test_page_banner_appears_and_disappears(tmp_path, monkeypatch, doc, banner):
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path))
    write_doc(doc, tmp_path / "qwen2.5-0.5b.json")
    src = [PAGE]
    banners.add_banners(None, "tutorials/models/qwen2_5_0_5b", src)
    # every executed page opens with where its numbers come from (issue 41), then the build's warning if any
    assert src[0].index("============") < src[0].index("tut-freshness")
    if banner is None:
        assert "tut-ci-build" not in src[0] and "not a specification" in src[0]
    else:
        assert f".. admonition:: {banner}\n" in src[0] and "tut-ci-build" in src[0]
        assert src[0].index("tut-freshness") < src[0].index(banner)


def test_landing_banner_and_weights_list(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "none"))
    write_doc(make_doc(), tmp_path / "qwen2.5-0.5b.json")
    banner, support, _ = pages.landing_markdown()
    assert banner.startswith(":::{warning}") and "built on a cpu and with stand-in weights" in banner
    assert "- Qwen2.5-0.5B: stand-in weights (cpu, complete)" in support
    for m in MODELS:
        write_doc(_real_npu(m), tmp_path / f"{m}.json")
    banner, support, _ = pages.landing_markdown()
    assert banner == "" and "- Qwen2.5-0.5B: real weights (npu, complete)" in support
