import json
from pathlib import Path

from docs import make_doc

from npu_tutorials.checks import site_check as check_site  # what scripts/check_site.py runs (npu_tutorials.cli)
from npu_tutorials.record.results import write_doc

DATA = '<p class="tut-data"><a>Download as CSV</a></p>'  # under each table and figure (site.render.table_block)
GOOD = ('<div class="tut-freshness"></div><div class="sphx-glr-script-out"></div>'
        + ('<div class="tut-table"></div>' + DATA) * 4
        + '<img class="sphx-glr-single-img tut-figure">' + DATA + ' 2026-11-29T10:00:00+00:00 abc123')


def _site(tmp_path, html, doc=None):
    page = tmp_path / "html" / "tutorials" / "models" / "qwen2_5_0_5b.html"
    page.parent.mkdir(parents=True)
    page.write_text(html)
    (tmp_path / "html" / "api" / "bundles").mkdir(parents=True)
    (tmp_path / "html" / "api" / "bundles" / "qwen2_5_0_5b.zip").write_bytes(b"PK")
    (tmp_path / "results").mkdir()
    if doc is not False:
        write_doc(doc or make_doc(), tmp_path / "results" / "qwen2.5-0.5b.json")
    return tmp_path


def test_good_site_passes(tmp_path):
    assert check_site.check(_site(tmp_path, GOOD), "qwen2_5") == []


def test_unexecuted_page_fails(tmp_path):
    problems = check_site.check(_site(tmp_path, "<p>no output</p>"), "qwen2_5")
    assert problems == ["qwen2_5_0_5b: the page shows no output: the tutorial did not execute"]


def test_missing_figure_tables_and_results(tmp_path):
    html = '<div class="sphx-glr-script-out"></div><div class="tut-table"></div>'
    problems = check_site.check(_site(tmp_path, html, doc=False), "qwen2_5")
    assert len(problems) == 1  # one line per page
    text = problems[0]
    assert "fewer than 3 result tables" in text and "no figure" in text and "no results JSON" in text


def test_a_table_or_figure_without_its_csv_fails(tmp_path):
    """Issue 56: every table and figure of a tutorial page has its CSV under it; one missing is one line."""
    html = GOOD.replace(DATA, "", 1)
    (problem,) = check_site.check(_site(tmp_path, html), "qwen2_5")
    assert "5 tables and figures and 4 CSV downloads under them" in problem


def test_missing_sections_fail(tmp_path):
    doc = make_doc()
    doc.results.server = None
    doc.results.benchmark = None
    text = check_site.check(_site(tmp_path, GOOD, doc), "qwen2_5")[0]
    assert "no server section" in text and "no performance measurement" in text


def test_failed_run_fails(tmp_path):
    text = check_site.check(_site(tmp_path, GOOD, make_doc(status="failed")), "qwen2_5")[0]
    assert "the run failed (the server died)" in text


def test_stale_results_json_fails(tmp_path):
    problems = check_site.check(_site(tmp_path, GOOD, make_doc(commit="def456")), "qwen2_5")
    assert any("does not match" in p for p in problems)


def test_invalid_results_json_fails_with_one_line(tmp_path):
    site = _site(tmp_path, GOOD, doc=False)
    (site / "results" / "qwen2.5-0.5b.json").write_text('{"schema": 1, "model": "qwen2.5-0.5b"}')
    problems = check_site.check(site, "qwen2_5")
    assert problems == ["qwen2_5_0_5b: " + str(site / "results" / "qwen2.5-0.5b.json")
                        + ": results schema 1, this code reads schema 2 to 3"]


def test_no_written_page_document_or_record_carries_a_machine_path(tmp_path):
    """The site check scans every results document and page a build writes; the committed records are scanned
    here (results/, methods records included): a path of this machine in any of them is one line naming the file."""
    from npu_tutorials.checks.site_check import machine_path_problems, written_files
    from npu_tutorials.record.results import ROOT as REPO

    build = tmp_path / "b"
    (build / "html" / "zh_CN").mkdir(parents=True)
    (build / "results").mkdir()
    (build / "html" / "ok.html").write_text("docker run -v /root/.cache:/root/.cache; real weights: Org/model@main")
    (build / "html" / "zh_CN" / "bad.html").write_text(f"weights: {REPO}/.cache/standins/x")
    (build / "results" / "m.json").write_text(json.dumps({"label": f"{REPO}/models/x"}))
    # a page whose run failed is reported once, by its failure (the server log's path is part of its cause)
    from npu_tutorials.core.errors import FAILED_MARK
    (build / "html" / "failed.html").write_text(f'<div class="{FAILED_MARK}">last lines of {REPO}/.cache/x.log</div>')
    lines = machine_path_problems(written_files(build))
    assert sorted(l.split(":")[0] for l in lines) == ["bad.html", "m.json"]
    committed = sorted((Path(REPO) / "results").rglob("*.json"))
    assert committed and machine_path_problems(committed) == []


def test_an_undrawn_view_and_a_view_that_could_not_be_drawn_fail(tmp_path):
    undrawn = GOOD + '<div class="tut-view" data-tut-view="{}"></div>'
    text = check_site.check(_site(tmp_path / "a", undrawn), "qwen2_5")[0]
    assert "a view was left undrawn" in text
    broken = GOOD + ('<p class="tut-render-error">This view could not be drawn from the results document: the '
                     'results of qwen2.5-0.5b have no &#x27;benchmark&#x27; section</p>')
    text = check_site.check(_site(tmp_path / "b", broken), "qwen2_5")[0]
    assert "have no 'benchmark' section" in text


def test_a_recorded_document_the_pages_draw_is_validated_one_line_naming_the_file(tmp_path, monkeypatch):
    """``make check`` validates the recorded documents the pages draw ("On other hardware", the support matrix):
    schema, provenance, and real weights for an NPU record; each bad one is one line naming its file.  The
    committed records pass."""
    from docs import machine

    from npu_tutorials.checks.recording import recorded_problems

    assert recorded_problems() == []  # results/ as committed
    rec = tmp_path / "results"
    good = make_doc(commit="0123456789abcdef")
    write_doc(good, rec / "qwen2.5-0.5b" / "cpu-good.json")
    (rec / "qwen2.5-0.5b" / "cpu-broken.json").write_text('{"schema": 2, "model": "qwen2.5-0.5b", "provenance": {}}')
    write_doc(make_doc(commit="0123abc+dirty"), rec / "qwen2.5-0.5b" / "cpu-dirty.json")
    npu = machine("npu", "Ascend 910B3", vllm_ascend="0.23.0")
    write_doc(make_doc(commit="0123456789abcdef", mach=npu), rec / "qwen2.5-0.5b" / "npu-910b3.json")
    write_doc(good, rec / "qwen3-0.6b" / "cpu-misfiled.json")
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(rec))
    lines = recorded_problems()
    assert lines == [
        "recorded document results/qwen2.5-0.5b/cpu-broken.json: provenance.built_at: Field required",
        "recorded document results/qwen2.5-0.5b/cpu-dirty.json: measured by uncommitted code (0123abc+dirty)",
        "recorded document results/qwen2.5-0.5b/npu-910b3.json: an NPU record on stand-in weights (an NPU figure "
        "is shown as a deployment figure: record it with real weights, TUTORIAL_WEIGHTS=real)",
        "recorded document results/qwen3-0.6b/cpu-misfiled.json: it is a run of 'qwen2.5-0.5b', filed under "
        "'qwen3-0.6b'",
    ]
    # make check prints them among its problems (with the page selection, only the selected models' records)
    site = _site(tmp_path / "site", GOOD)
    assert [l for l in check_site.check(site, "qwen2_5") if l.startswith("recorded")] == lines[:3]


def test_a_fail_on_a_page_fails_the_check_naming_the_page_the_check_and_the_figure(tmp_path, monkeypatch):
    """Issue 54: a FAIL verdict is loud.  A document whose logits check says FAIL fails the check in one line (make
    check, and make html, which ends with it, exit non-zero); a card that declares that deviation as known passes,
    and the page shows the card's reason under the verdict."""
    from npu_tutorials.inputs import cards
    from npu_tutorials.views import Views

    site = _site(tmp_path, GOOD, make_doc(passed=False))
    assert check_site.check(site, "qwen2_5") == [
        "qwen2_5_0_5b: logits_agreement says FAIL: normalized MSE 0.02 % (threshold < 1.0 %)"]
    card = cards.load_card("qwen2.5-0.5b")
    why = "the fused softmax of the NPU rounds differently (vllm-ascend issue 1)"
    known = card.model_copy(update={"accuracy": card.accuracy.model_copy(
        update={"known_deviations": {"logits_agreement: normalized MSE": why}})})
    monkeypatch.setattr(check_site, "load_card", lambda key: known)
    assert check_site.check(site, "qwen2_5") == []
    verdict = Views(make_doc(passed=False), known).accuracy.logits_verdict()
    assert why in verdict._repr_html_() and "FAIL" in repr(verdict)
    assert why not in Views(make_doc(passed=False), card).accuracy.logits_verdict()._repr_html_()
