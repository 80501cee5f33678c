import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_site", ROOT / "scripts" / "check_site.py")
check_site = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_site)

PROV = {"built_at": "2026-11-29T10:00:00+00:00", "git_commit": "abc123", "backend": "cpu", "device": "CPU x 1",
        "versions": {"vllm": "0.32.0"}, "weights": "stand-in", "profile": "quick", "wall_time_s": 12.5}


def _site(tmp_path, html, prov=PROV, sections=("environment", "weights", "server", "benchmark")):
    page = tmp_path / "html" / "tutorials" / "models" / "qwen2_5_0_5b.html"
    page.parent.mkdir(parents=True)
    page.write_text(html)
    res = tmp_path / "results" / "qwen2.5-0.5b.json"
    res.parent.mkdir(parents=True)
    res.write_text(json.dumps({"provenance": prov, "results": {s: {} for s in sections}}))
    return tmp_path


GOOD = ('<div class="sphx-glr-script-out"></div>' + '<div class="tut-table"></div>' * 4
        + '<img class="sphx-glr-single-img"> 2026-11-29T10:00:00+00:00 abc123')


def test_good_site_passes(tmp_path):
    assert check_site.check(_site(tmp_path, GOOD), "qwen2_5") == []


def test_unexecuted_page_fails(tmp_path):
    problems = check_site.check(_site(tmp_path, "<p>no output</p>"), "qwen2_5")
    assert problems == ["qwen2_5_0_5b: the page shows no output: the tutorial did not execute"]


def test_missing_figure_tables_and_provenance(tmp_path):
    html = '<div class="sphx-glr-script-out"></div><div class="tut-table"></div>'
    prov = {k: v for k, v in PROV.items() if k != "git_commit"}
    problems = check_site.check(_site(tmp_path, html, prov, sections=("environment",)), "qwen2_5")
    assert len(problems) == 1  # one line per page
    text = problems[0]
    assert "fewer than 3 result tables" in text and "no figure" in text
    assert "lacks provenance ['git_commit']" in text and "lacks 'weights'" in text
    assert "no performance measurement" in text


def test_stale_results_json_fails(tmp_path):
    prov = dict(PROV, git_commit="def456")
    problems = check_site.check(_site(tmp_path, GOOD, prov), "qwen2_5")
    assert any("does not match" in p for p in problems)
