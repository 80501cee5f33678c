"""The published data API (api/models.json, the documents, the bundles, llms.txt) and the block every tutorial
page opens with (issue 41): read back, validated, and the bundle's re-run command names what exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from docs import machine, make_doc

from npu_tutorials.inputs.gallery_index import tutorials
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.record.results import ROOT, read_doc, write_doc
from npu_tutorials.site import api, freshness

RECORD = ROOT / "results" / "qwen3-0.6b" / "cpu-amd-epyc-2c-bf16.json"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A build whose qwen3-0.6b ran (a committed record as its document), the others not; the API written."""
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(RECORD, results / "qwen3-0.6b.json")
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(results))
    out = tmp_path / "html"
    written = api.write_api(out, tutorials())
    return out, written


def test_models_json_lists_every_model_and_every_document_it_publishes(site):
    out, _written = site
    index = json.loads((out / "api" / "models.json").read_text())
    assert index["api"] == api.API_VERSION and {m["key"] for m in index["models"]} == set(tutorials().values())
    by_key = {m["key"]: m for m in index["models"]}
    q = by_key["qwen3-0.6b"]
    assert q["documents"][0]["source"] == "this build" and q["documents"][0]["path"].endswith(api.THIS_BUILD)
    assert set(q["pages"]) == {"en", "zh_CN"} and q["pages"]["zh_CN"].startswith("zh_CN/")
    for m in index["models"]:
        paths = [d["path"] for d in m["documents"]]
        assert set(m["latest"].values()) <= set(paths)
        for d in m["documents"]:
            doc = read_doc(out / d["path"])  # every published document validates
            assert doc.model == m["key"] and doc.provenance.built_at == d["built_at"]
            assert set(d["headline"]) <= {"output_throughput", "median_ttft_ms", "median_tpot_ms", "roofline_fraction"}
    # the recorded Qwen3-1.7B run is published with its page's model
    assert any(d["source"] == "recorded" for d in by_key["qwen3-1.7b"]["documents"])
    # the history: per machine kind and weights kind, the complete documents in date order (issue 56)
    q25 = by_key["qwen2.5-0.5b"]
    runs = sorted((d for d in q25["documents"] if d["machine_kind"] == "cpu-amd-epyc-2c-bf16"),
                  key=lambda d: d["built_at"])
    assert len(runs) >= 2 and q25["history"]["cpu-amd-epyc-2c-bf16/stand-in"] == [d["id"] for d in runs]


def test_every_document_has_an_identifier_of_its_content_and_is_served_under_it(site, tmp_path):
    """A document's identifier is a digest of its content (sorted keys: indentation does not change it, a changed
    figure does); api/ serves each document under it, and models.json and llms.txt name it."""
    from npu_tutorials.record.results import document_id

    out, _ = site
    index = json.loads((out / "api" / "models.json").read_text())
    ids = [d["id"] for m in index["models"] for d in m["documents"]]
    assert ids and all(re.fullmatch(r"doc-[0-9a-f]{12}", i) for i in ids)
    # this build's document is a copy of a record here: one content, one identifier; the others differ
    assert ids.count(document_id(RECORD)) == 2 and len(set(ids)) == len(ids) - 1
    for m in index["models"]:
        for d in m["documents"]:
            assert d["by_id"] == api.document_path(d["id"])
            assert (out / d["by_id"]).read_bytes() == (out / d["path"]).read_bytes()
            assert document_id(out / d["by_id"]) == d["id"]
            assert f"document `{d['id']}`" in (out / "llms.txt").read_text()
    data = json.loads(RECORD.read_text())
    (tmp_path / "a.json").write_text(json.dumps(data))
    (tmp_path / "b.json").write_text(json.dumps(dict(reversed(list(data.items()))), indent=4))
    assert document_id(tmp_path / "a.json") == document_id(tmp_path / "b.json") == document_id(RECORD)
    data["provenance"]["built_at"] = "2000-01-01T00:00:00+00:00"
    (tmp_path / "c.json").write_text(json.dumps(data))
    assert document_id(tmp_path / "c.json") != document_id(RECORD)
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(TutorialError, match=r"d\.json: no identifier"):
        document_id(tmp_path / "d.json")


def test_llms_txt_links_every_page_and_document(site):
    out, _ = site
    text = (out / "llms.txt").read_text()
    assert text.startswith("# ") and "\n> " in text and "\n## Tutorials\n" in text
    index = json.loads((out / "api" / "models.json").read_text())
    links = re.findall(r"\]\(([^)]+)\)", text)
    for m in index["models"]:
        assert m["pages"]["en"] in links
        assert all(d["path"] in links for d in m["documents"])
    assert all((out / p).is_file() for p in links if p.startswith("api/"))


def test_a_bundle_holds_the_page_and_a_rerun_command_whose_names_exist(site, tmp_path):
    out, _ = site
    z = zipfile.ZipFile(out / api.bundle_path("qwen3_0_6b"))
    names = set(z.namelist())
    assert {"qwen3_0_6b/gallery/qwen3_0_6b.py", "qwen3_0_6b/cards/qwen3-0.6b.yaml", "qwen3_0_6b/README.md",
            "qwen3_0_6b/results/qwen3-0.6b.json"} <= names
    assert {f"qwen3_0_6b/deploy-{b}.sh" for b in ("npu", "cuda", "cpu")} <= names
    z.extractall(tmp_path / "unpacked")
    b = tmp_path / "unpacked" / "qwen3_0_6b"
    assert read_doc(b / "results" / "qwen3-0.6b.json").provenance.built_at == read_doc(RECORD).provenance.built_at
    for sh in b.glob("deploy-*.sh"):
        assert subprocess.run(["bash", "-n", str(sh)], capture_output=True).returncode == 0, sh.name
    # the page's download step comes first, as on the page (without it the first use of ./<model> stopped the script)
    from npu_tutorials.engine import commands
    from npu_tutorials.inputs.cards import load_card
    card = load_card("qwen3-0.6b")
    text = (b / "deploy-cpu.sh").read_text()
    first_use = text.index(commands.local_dir(card), text.index("# 1. "))
    download = next(iter(commands.download_commands(card).values()))
    assert text.index("# 0. Download the weights") < text.index(download) < text.index("# 1. ") < first_use
    cmd = re.search(r"```bash\n(.+)\n```", (b / "README.md").read_text())[1]
    m = re.fullmatch(r"git checkout ([0-9a-f]{7,40}) && make html TUTORIAL_ONLY=(\w+)", cmd)
    assert m and m[1] == read_doc(RECORD).provenance.git_commit.removesuffix("+dirty")
    assert re.search(r"^html:", (ROOT / "Makefile").read_text(), re.M)  # the make target exists
    assert tutorials(only=m[2]) == {"qwen3_0_6b": "qwen3-0.6b"}  # and selects exactly this page
    # a page this build did not execute: its bundle holds the recorded run its page is drawn from
    z2 = zipfile.ZipFile(out / api.bundle_path("qwen3_1_7b"))
    assert "qwen3_1_7b/results/qwen3-1.7b.json" in z2.namelist()


def _doc(backend="cpu", weights="stand-in"):
    return make_doc(model="qwen3-0.6b", mach=machine(backend=backend, vllm_ascend="0.23.0" if backend == "npu" else None),
                    weights=weights, commit="0123456789abcdef0123")


@pytest.mark.parametrize("backend,weights,scope", [("cpu", "stand-in", "not deployment figures"),
                                                     ("cpu", "real", "not an accelerator's"),
                                                     ("npu", "real", "not a specification")])
def test_the_block_says_where_the_numbers_come_from_and_what_they_are_for(backend, weights, scope, monkeypatch):
    monkeypatch.setenv("TUTORIAL_REPOSITORY_URL", "https://example.org/org/site.git")
    doc = _doc(backend, weights)
    block = freshness.freshness_block(doc, "qwen3_0_6b", 2, doc_id="doc-0123456789ab", lang="en")
    assert scope in block and "0123456789ab" in block and "2026-11-29" in block
    assert "Document ``doc-0123456789ab`` (`JSON <../../api/documents/doc-0123456789ab.json>`__)" in block
    assert "<../../api/bundles/qwen3_0_6b.zip>" in block
    assert "git checkout 0123456789abcdef0123 && make html TUTORIAL_ONLY=qwen3_0_6b" in block
    url = re.search(r"<(https://example\.org/org/site/issues/new\?[^>]+)>", block)[1]
    assert "Feedback%20for%20tutorials/models/qwen3_0_6b.html" in url and f"Backend%3A%20{backend}" in url
    if backend == "npu":
        assert "vllm-ascend 0.23.0" in block
    zh = freshness.freshness_block(doc, "qwen3_0_6b", 3, lang="zh_CN")
    assert "这些数字从何而来" in zh and "<../../../api/bundles/qwen3_0_6b.zip>" in zh


def test_the_block_warns_of_an_old_record_and_of_an_older_release_than_the_newest_declared():
    """A shown document measured more than 30 days ago, or on an older vllm-ascend than the newest release
    data/pinned/engines.yaml declares, gets a warning with its age and both versions; a fresh one on the newest
    release, or a CPU one, none."""
    from datetime import date, timedelta

    from npu_tutorials.inputs.engines import ascend_engines

    newest = freshness.newest_release()
    assert newest == max((e.vllm_ascend for e in ascend_engines() if e.vllm_ascend != "main"),
                         key=lambda t: [int(x) for x in re.findall(r"\d+", t)])
    built = date.fromisoformat(_doc().provenance.built_at[:10])
    assert freshness.old_line(_doc(), today=built + timedelta(days=30), lang="en") == ""  # CPU, 30 days: fresh
    old = freshness.old_line(_doc(), today=built + timedelta(days=45), lang="en")
    assert old.startswith("**Old numbers:** measured 45 days ago (on 2026-11-29)")
    npu = _doc("npu", "real")  # measured on vllm-ascend 0.23.0
    line = freshness.old_line(npu, today=built, lang="en")
    assert f"measured on vllm-ascend 0.23.0, older than the newest declared release {newest}" in line
    assert "days ago" not in line
    npu.provenance.machine.versions["vllm_ascend"] = newest.removeprefix("v")
    assert freshness.old_line(npu, today=built, lang="en") == ""
    assert "数字已旧" in freshness.old_line(npu, today=built + timedelta(days=31), lang="zh_CN")


def test_the_repository_is_configured_in_one_place(monkeypatch):
    monkeypatch.setenv("TUTORIAL_REPOSITORY_URL", "git@github.com:org/site.git")
    assert freshness.repository_url() == "https://github.com/org/site"
    monkeypatch.setenv("TUTORIAL_REPOSITORY_URL", "")
    monkeypatch.setenv("GITHUB_REPOSITORY", "org/other")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    assert freshness.repository_url() == "https://github.com/org/other"
    monkeypatch.delenv("GITHUB_REPOSITORY")
    monkeypatch.setattr(freshness.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "/srv/x\n"))
    assert freshness.repository_url() == ""  # a local path is no issue tracker: no report link
    block = freshness.freshness_block(_doc(), "qwen3_0_6b", 2, lang="en")
    assert "report a problem" not in block and "Download the bundle" in block
