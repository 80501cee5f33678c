"""The scripts a reader runs without Sphinx, run as a reader runs them (a subprocess each).

``record.py`` stores a complete build document and refuses a failed one; ``validate.py`` and
``eval_full.py`` serve the tiny stand-in of Qwen2.5-0.5B (``TUTORIAL_MODEL_PATH_QWEN2_5_0_5B``; its
STANDIN.json labels it a stand-in) through the same Tutorial steps as the page.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_vllm

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "results" / "qwen3-0.6b" / "cpu-amd-epyc-2c-bf16.json"


def _run(script, *args, env=None, timeout=900):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)


def test_record_stores_a_complete_document_and_refuses_a_failed_one(tmp_path):
    build = tmp_path / "_build" / "results"
    build.mkdir(parents=True)
    shutil.copy(RECORD, build / "qwen3-0.6b.json")
    p = _run("record.py", "--build-dir", str(tmp_path / "_build"), "--into", str(tmp_path / "rec"),
             env={"TUTORIAL_ONLY": "qwen3_0_6b"})
    assert p.returncode == 0, p.stderr
    stored = tmp_path / "rec" / "qwen3-0.6b" / RECORD.name
    from npu_tutorials.record.results import read_doc

    # the same provenance, as the schema reads it (fields the record predates are stored as their defaults)
    assert stored.is_file() and read_doc(stored).provenance == read_doc(RECORD).provenance
    doc = json.loads(RECORD.read_text())
    doc["provenance"]["status"] = "failed"
    (build / "qwen3-0.6b.json").write_text(json.dumps(doc))
    p = _run("record.py", "--build-dir", str(tmp_path / "_build"), "--into", str(tmp_path / "rec2"),
             env={"TUTORIAL_ONLY": "qwen3_0_6b"})
    assert p.returncode == 2 and "refusing to record a failed run" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "rec2").exists()
    # make record MODEL=...: that model only, the failed leftover of another left alone; an unknown one is a line
    shutil.copy(RECORD, build / "qwen2.5-0.5b.json")
    data = json.loads(RECORD.read_text())
    data["model"] = "qwen2.5-0.5b"
    (build / "qwen2.5-0.5b.json").write_text(json.dumps(data))
    p = _run("record.py", "--build-dir", str(tmp_path / "_build"), "--into", str(tmp_path / "rec3"),
             "--model", "qwen2.5-0.5b")
    assert p.returncode == 0 and (tmp_path / "rec3" / "qwen2.5-0.5b" / RECORD.name).is_file(), p.stderr
    assert not (tmp_path / "rec3" / "qwen3-0.6b").exists()
    p = _run("record.py", "--build-dir", str(tmp_path / "_build"), "--model", "qwen9")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        p.stderr.strip()] and p.stderr.startswith("error: make record: no model card 'qwen9' (known: "), p.stderr


@pytest.fixture(scope="module")
def tiny_env(tiny, tmp_path_factory):
    require_vllm()
    out = tmp_path_factory.mktemp("scripts")
    return {"TUTORIAL_MODEL_PATH_QWEN2_5_0_5B": str(tiny.path), "TUTORIAL_BACKEND": "cpu",
            "TUTORIAL_RESULTS_DIR": str(out / "results"), "TUTORIAL_ARTIFACTS_DIR": str(out / "artifacts")}


@pytest.mark.engine
@pytest.mark.slow
def test_validate_serves_the_model_and_answers_one_request(tiny_env):
    p = _run("validate.py", "qwen2.5-0.5b", env=tiny_env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "backend cpu, stand-in" in p.stdout and "server ready in" in p.stdout and "->" in p.stdout


@pytest.mark.engine
@pytest.mark.slow
def test_eval_full_writes_the_pages_results_document(tiny_env, tmp_path):
    out = tmp_path / "qwen2.5-0.5b.json"
    p = _run("eval_full.py", "qwen2.5-0.5b", "--out", str(out), env=tiny_env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["model"] == "qwen2.5-0.5b" and doc["provenance"]["status"] == "complete"
    assert doc["provenance"]["weights"]["kind"] == "stand-in"
    r = doc["results"]
    assert r["benchmark"] and r["logits_agreement"]["checks"]
    assert "PASS" in p.stdout or "FAIL" in p.stdout  # the verdict it printed
