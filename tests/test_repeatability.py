"""scripts/repeatability.py end to end on the tiny stand-in: independent runs of the page's own steps,
one record per machine kind and model, which is refused below its minimum number of runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_vllm

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.engine
@pytest.mark.slow  # the noise limits' arithmetic on records: test_results_doc
def test_two_runs_of_the_pages_steps_make_a_record_too_short_to_use(tmp_path):
    require_vllm()
    from npu_tutorials.checks.noise import MIN_RUNS, NoiseRecordError, read_noise_record
    from npu_tutorials.record.headline import gated_steps
    from npu_tutorials.inputs.cards import load_card

    p = subprocess.run([sys.executable, "scripts/repeatability.py", "qwen2.5-0.5b", "--tiny", "--runs", "2",
                        "--out-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=1500,
                       env={**__import__("os").environ, "TUTORIAL_CACHE": str(ROOT / ".cache")})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    (path,) = tmp_path.glob("repeatability-qwen2.5-0.5b-*.json")
    rec = json.loads(path.read_text())
    assert rec["steps"] == gated_steps(load_card("qwen2.5-0.5b")) == ["benchmark"]
    assert set(rec["headline_runs"]) == {"output_throughput", "median_ttft_ms", "median_tpot_ms"}
    assert all(len(v) == 2 and min(v) > 0 for v in rec["headline_runs"].values())
    assert rec["provenance"]["tiny"] and rec["provenance"]["machine_slug"] in path.name
    # each run's headline is the page's definition (median, spread and what it is over)
    assert all("requests of 3 runs" in r["headline"]["median_tpot_ms"]["over"] for r in rec["runs"])
    with pytest.raises(NoiseRecordError, match=f"fewer than {MIN_RUNS} independent runs"):
        read_noise_record(path)
    # another session's run joins the record (--append): three runs, each with its date and commit
    p = subprocess.run([sys.executable, "scripts/repeatability.py", "qwen2.5-0.5b", "--tiny", "--runs", "1", "--append",
                        "--out-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=1500,
                       env={**__import__("os").environ, "TUTORIAL_CACHE": str(ROOT / ".cache")})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "appended to the 2 runs of" in p.stdout and "noise limit for one run" in p.stdout
    rec = json.loads(path.read_text())
    assert all(len(v) == 3 for v in rec["headline_runs"].values())
    assert all(r["date"] and r["commit"] for r in rec["runs"])


@pytest.mark.engine
@pytest.mark.slow
def test_the_contributing_guides_template_runs(tmp_path):
    """docs/source/tutorial_template.py (shown on the contributing page) executes end to end on the tiny stand-in and
    writes a complete results document whose logits verdict passes."""
    import os

    require_vllm()
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.record.results import read_doc
    from npu_tutorials.inputs.standin import ensure_standin, tiny_config
    from npu_tutorials.inputs.weights import local_path_var

    card = load_card("qwen2.5-0.5b")
    tiny = ensure_standin(card, config=tiny_config(card.config), label="tiny")
    env = {**os.environ, local_path_var(card): str(tiny.path), "TUTORIAL_RESULTS_DIR": str(tmp_path / "results"),
           "MPLBACKEND": "Agg"}
    p = subprocess.run([sys.executable, "docs/source/tutorial_template.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1200)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    doc = read_doc(tmp_path / "results" / "qwen2.5-0.5b.json")
    assert doc.provenance.status == "complete" and doc.results.logits_agreement.passed
    assert doc.provenance.weights.kind == "stand-in" and doc.results.benchmark is not None
