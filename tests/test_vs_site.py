"""Hold a reader's benchmark run against the page (npu_tutorials.checks.vs_site, scripts/vs_site.py).

The result files here follow what ``vllm bench serve --save-result --save-detailed`` writes in every declared vLLM
(``vllm/benchmarks/serve.py`` of 0.23.0 .. 0.32.0: the ``result`` dict of ``benchmark`` with ``input_lens``,
``output_lens``, ``ttfts``, ``itls``, and ``num_prompts``, ``request_rate``, ``max_concurrency`` added in ``main``);
tests/test_vllm_releases.py reads each release's own file, written against the real engine, through the same
functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npu_tutorials.checks import vs_site
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.record.headline import headline_figures
from npu_tutorials.record.results import ROOT, document_id, read_doc

KEY = "smollm2-135m-instruct"
RECORD = sorted((ROOT / "results" / KEY).glob("*.json"))[0]


@pytest.fixture(autouse=True)
def no_build(tmp_path, monkeypatch):
    """No document of a build here: the page's document is the committed record (a checkout's _build/ may hold
    another)."""
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "no-build"))


def result_file(tmp_path: Path, *, throughput: float | None = None, ttft_ms: float | None = None,
                tpot_ms: float | None = None, **conditions) -> Path:
    """A result file at the record's conditions whose headline figures are the record's medians (or those given)."""
    doc = read_doc(RECORD)
    c, heads = doc.results.benchmark.conditions, headline_figures(doc)
    n = conditions.pop("num_prompts", c.num_prompts)
    ttft = (ttft_ms or heads["median_ttft_ms"].stat.median) / 1000
    tpot = (tpot_ms or heads["median_tpot_ms"].stat.median) / 1000
    out_len = conditions.pop("output_len", c.output_len)
    data = {"date": "20261205-120000", "backend": "vllm", "model_id": KEY, "tokenizer_id": KEY, "num_prompts": n,
            "request_rate": conditions.pop("request_rate", c.request_rate), "burstiness": 1.0,
            "max_concurrency": conditions.pop("max_concurrency", c.max_concurrency), "completed": n, "failed": 0,
            "duration": 10.0, "output_throughput": throughput or heads["output_throughput"].stat.median,
            "median_ttft_ms": ttft * 1000, "input_lens": [conditions.pop("input_len", c.input_len)] * n,
            "output_lens": [out_len] * n, "ttfts": [ttft] * n, "itls": [[tpot] * (out_len - 1)] * n}
    assert not conditions
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(data))
    return p


def test_a_run_at_the_pages_conditions_gets_a_verdict_per_figure(tmp_path):
    card = load_card(KEY)
    doc = read_doc(RECORD)
    path, shown, rows = vs_site.hold(result_file(tmp_path), KEY, card, doc.provenance.backend)
    assert shown.provenance.built_at == doc.provenance.built_at
    assert [r["key"] for r in rows] == ["output_throughput", "median_ttft_ms", "median_tpot_ms"]
    assert all(r["verdict"] == "ordinary" and r["ratio"] == pytest.approx(1.0) for r in rows)
    heads = headline_figures(doc)
    slow = vs_site.hold(result_file(tmp_path, throughput=heads["output_throughput"].stat.min * 0.8,
                                    tpot_ms=heads["median_tpot_ms"].stat.q3 * 1.3), KEY, card, "cpu")[2]
    assert [r["verdict"] for r in slow] == ["slower than ordinary", "ordinary", "slower than ordinary"]
    fast = vs_site.hold(result_file(tmp_path, ttft_ms=heads["median_ttft_ms"].stat.q1 / 2), KEY, card, "cpu")[2]
    assert [r["verdict"] for r in fast] == ["ordinary", "faster than ordinary", "ordinary"]
    # the band is the record's own spread widened by the gate's limit: each of the record's runs is ordinary
    lo, hi = next(r["band"] for r in rows if r["key"] == "output_throughput")
    assert lo <= heads["output_throughput"].stat.min and hi >= heads["output_throughput"].stat.max


@pytest.mark.parametrize("change,named", [({"num_prompts": 8}, "prompts 8 (the page's 16)"),
                                          ({"output_len": 64}, "output length [64] (the page's [32])"),
                                          ({"request_rate": 2.0}, "request rate 2.0 (the page's inf)")])
def test_a_run_at_other_conditions_is_refused_in_one_line_naming_them(tmp_path, change, named):
    with pytest.raises(TutorialError) as e:
        vs_site.hold(result_file(tmp_path, **change), KEY, load_card(KEY), "cpu")
    assert "\n" not in str(e.value) and named in str(e.value) and document_id(RECORD) in str(e.value)
    with pytest.raises(TutorialError, match=r"dtype float16 \(the page's bfloat16\)"):
        vs_site.hold(result_file(tmp_path), KEY, load_card(KEY), "cpu", dtype="float16")


def test_a_file_of_another_benchmark_is_refused_in_one_line(tmp_path):
    with pytest.raises(TutorialError, match=r"^results.json: not a result file of the page's benchmark command "
                                            r"\(vllm bench serve --save-result --save-detailed\): no num_prompts"):
        p = tmp_path / "results.json"  # a results document, not a benchmark's file
        p.write_text(RECORD.read_text())
        vs_site.read_result(p)
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(TutorialError, match="x.json: not a readable JSON file"):
        vs_site.read_result(tmp_path / "x.json")


def test_the_script_prints_each_figure_beside_the_page_and_refuses_in_one_line(tmp_path):
    import os

    run = lambda *a: subprocess.run([sys.executable, "scripts/vs_site.py", KEY, *a], cwd=ROOT, capture_output=True,
                                    text=True, timeout=120, env=dict(os.environ))
    p = run(str(result_file(tmp_path)), "--backend", "cpu")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"your run ({tmp_path / 'bench.json'}) against document {document_id(RECORD)}")
    assert len(lines) == 4 and all(line.endswith(": ordinary") for line in lines[1:])
    p = run(str(result_file(tmp_path, num_prompts=4)), "--backend", "cpu")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "prompts 4 (the page's 16)" in p.stderr


@pytest.mark.parametrize("backend", ["npu", "cuda", "cpu"])
def test_each_pages_benchmark_step_says_how_to_hold_its_file_against_the_page(backend):
    """Next to the benchmark command ("Deploy it yourself"): the command that reads the very file it writes."""
    from npu_tutorials.engine import deploy

    card = load_card(KEY)
    text = deploy.bench_text(card, backend, deploy.reader_place(card))
    assert f"--result-filename {deploy.bench_file(card)}" in text
    line = text.splitlines()[-1]
    assert line == f"# python npu-tutorials/scripts/vs_site.py {KEY} {deploy.bench_file(card)} --backend {backend}"
    assert (ROOT / "scripts" / "vs_site.py").is_file()
