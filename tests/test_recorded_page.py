"""A page this build did not execute is drawn from the recorded run that fits its card: the same views, after
the same cells, as the executed page would show (issue 37's "recorded runs render as pages")."""

from __future__ import annotations

import ast
import html as H
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sphinx_gallery.py_source_parser import split_code_and_text_blocks

from npu_tutorials.checks.site_check import RECORD_MARK as CHECK_MARK
from npu_tutorials.checks.site_check import check_page
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.digest import card_digest
from npu_tutorials.inputs.gallery_index import gallery_dir, tutorials
from npu_tutorials.record.results import ROOT, page_record, read_doc, write_doc
from npu_tutorials.record.schema import Memory
from npu_tutorials.site import banners, recorded_page
from npu_tutorials.site.selection import Hardware, select

RECORD = "qwen3-0.6b/cpu-amd-epyc-2c-bf16.json"  # a committed record the throw-away page draws

CONF = f"""
import os, sys
sys.path.insert(0, {str(ROOT / 'src')!r})
extensions = ["sphinx_gallery.gen_gallery"]
sphinx_gallery_conf = {{
    "examples_dirs": ["gallery"], "gallery_dirs": ["generated"], "filename_pattern": os.environ["EX_PATTERN"],
    "capture_repr": ("_repr_html_", "__repr__"), "ignore_repr_types": r"matplotlib[a-z_.]*|NoneType",
    "remove_config_comments": True,
}}
"""

# a page like a tutorial's: views shown by a cell's last statement, a cell that shows none, a view in the middle
# of a cell (sphinx-gallery shows only the last statement's value), a view with an argument
EXAMPLE = f'''"""
Recorded
========

Intro.
"""

# %%
# Environment
# -----------
import os

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.record.results import read_doc
from npu_tutorials.views import Show, Views

show = Show(Views(read_doc(os.environ["EX_DOC"]), load_card("qwen3-0.6b")), "qwen3-0.6b")
show.environment()

# %%
# Prose, then a cell with a view that is not its last statement.
show.weights()
x = 1

# %%
print("no view here")

# %%
show.serving.bench_table()

# %%
show.this_build_ran("server")
'''


def _refs(rst: str) -> list[tuple[str, dict]]:
    """(the source lines of the cell, the reference) of every view placeholder on a generated page."""
    out = []
    marks = list(re.finditer(r"^\.\. GENERATED FROM PYTHON SOURCE LINES (\d+-\d+)", rst, re.M))
    for i, m in enumerate(marks):
        chunk = rst[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(rst)]
        for ref in re.findall(r'data-tut-view="([^"]*)"', chunk):
            out.append((m.group(1), json.loads(H.unescape(ref))))
    return out


def _generate(proj: Path, pattern: str) -> str:
    shutil.rmtree(proj / "generated", ignore_errors=True)
    env = {**os.environ, "EX_PATTERN": pattern, "EX_DOC": str(ROOT / "results" / RECORD)}
    p = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(proj), str(proj / "_build")],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return (proj / "generated" / "ex.rst").read_text()


def test_a_recorded_page_shows_the_views_the_executed_page_shows(tmp_path):
    proj = tmp_path / "proj"
    (proj / "gallery").mkdir(parents=True)
    (proj / "gallery" / "README.txt").write_text("Gallery\n=======\n")
    (proj / "gallery" / "ex.py").write_text(EXAMPLE)
    (proj / "conf.py").write_text(CONF)
    (proj / "index.rst").write_text("Site\n====\n\n.. toctree::\n\n   generated/index\n")
    executed = _refs(_generate(proj, r"\.py$"))
    drawn = _refs(recorded_page.draw_from_record(_generate(proj, r"^$"), "qwen3-0.6b", RECORD))
    assert [v for _c, r in executed for v in [r["view"]]] == ["environment", "serving.bench_table", "this_build_ran"]
    assert all(r["doc"] == RECORD for _c, r in drawn)
    assert [(c, {k: v for k, v in r.items() if k != "doc"}) for c, r in drawn] == executed


@pytest.mark.parametrize("stem", sorted(tutorials()))
def test_every_view_a_tutorial_shows_is_a_cells_last_statement(stem):
    """What a recorded page draws is what the executed page shows: every ``show.x(...)`` of a gallery script is
    the last statement of its cell (sphinx-gallery shows no other), and is found there."""
    path = gallery_dir() / f"{stem}.py"
    _header, blocks = split_code_and_text_blocks(str(path))[:2]
    found = [recorded_page.shown_view(b.content) for b in blocks if b.type == "code"]
    calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
             and recorded_page._view_path(n.func) is not None]
    assert len([f for f in found if f]) == len(calls) > 3


def _record_of(tmp_path, **prov) -> Path:
    doc = read_doc(ROOT / "results" / RECORD).model_copy(deep=True)
    doc.model = "qwen3-1.7b"
    doc.provenance.card_digest = card_digest("qwen3-1.7b")
    doc.results.memory = Memory(host_peak_rss_mib=9000.0, kv_cache_tokens=18674, samples=10)
    for k, v in prov.items():
        setattr(doc.provenance, k, v)
    return doc


def test_the_page_record_is_the_newest_complete_run_of_the_same_card(tmp_path):
    rec = tmp_path / "rec"
    write_doc(_record_of(tmp_path, built_at="2026-01-01T00:00:00+00:00"), rec / "qwen3-1.7b" / "a.json")
    write_doc(_record_of(tmp_path, built_at="2026-02-01T00:00:00+00:00"), rec / "qwen3-1.7b" / "b.json")
    write_doc(_record_of(tmp_path, built_at="2026-03-01T00:00:00+00:00", card_digest="0" * 16),
              rec / "qwen3-1.7b" / "c.json")  # another card: a measured section changed since
    write_doc(_record_of(tmp_path, built_at="2026-04-01T00:00:00+00:00", status="failed", failure="x"),
              rec / "qwen3-1.7b" / "d.json")
    (rec / "qwen3-1.7b" / "e.json").write_text("{not json")
    rel, doc = page_record("qwen3-1.7b", rec)
    assert rel == "qwen3-1.7b/b.json" and doc.provenance.built_at.startswith("2026-02")
    assert page_record("qwen3-0.6b", rec) is None  # no record of it there


def test_a_card_left_out_of_the_default_cpu_build_runs_when_named():
    assert not load_card("qwen3-1.7b").requires.cpu_by_default
    hw = Hardware("cpu", 0, None, 24.0)
    sel = select(hw)
    assert "qwen3_1_7b" not in sel.execute and "TUTORIAL_ONLY=qwen3_1_7b" in sel.skipped["qwen3_1_7b"]
    assert "qwen3_0_6b" not in sel.execute and not load_card("qwen3-0.6b").requires.cpu_by_default  # CI's budget
    assert "qwen_1_8b_chat" in sel.execute and "smollm2_135m_instruct" in sel.execute  # the reports' and the real one
    assert select(hw, only="qwen3_1_7b").execute == ["qwen3_1_7b"]
    assert "qwen3_1_7b" in select(Hardware("npu", 1, 64.0, None)).execute


UNEXECUTED = ("\n.. _sphx_glr_tutorials_models_qwen3_1_7b.py:\n\n\nTitle\n=====\n\nIntro.\n\n"
              ".. GENERATED FROM PYTHON SOURCE LINES 5-7\n\n.. code-block:: Python\n\n    show.environment()\n\n\n"
              ".. GENERATED FROM PYTHON SOURCE LINES 8-9\n\n.. code-block:: Python\n\n    x = 1\n\n\n"
              ".. _sphx_glr_download_tutorials_models_qwen3_1_7b.py:\n")


def test_an_unexecuted_page_is_drawn_from_its_record_under_a_banner(tmp_path, monkeypatch):
    rec = tmp_path / "rec"
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(rec))
    doc = _record_of(tmp_path)
    write_doc(doc, rec / "qwen3-1.7b" / "npu-x.json")
    for lang in ("en", "zh_CN"):
        text = banners.unexecuted_page(UNEXECUTED, "qwen3_1_7b", "its card leaves it out", lang)
        assert recorded_page.RECORD_MARK == CHECK_MARK and CHECK_MARK in text
        assert text.index("=====") < text.index(CHECK_MARK) < text.index("data-tut-view")
        assert text.count("data-tut-view") == 1 and "qwen3-1.7b/npu-x.json" in text
        assert doc.provenance.git_commit[:12] in text and "tut-not-executed" not in text
    (rec / "qwen3-1.7b" / "npu-x.json").unlink()  # none fits: the code, under the not-executed warning
    text = banners.unexecuted_page(UNEXECUTED, "qwen3_1_7b", "its card leaves it out", "en")
    assert "tut-not-executed" in text and "data-tut-view" not in text


def test_a_page_drawn_from_a_record_that_no_longer_fits_fails_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "rec"))
    page = tmp_path / "html" / "tutorials" / "models" / "qwen3_1_7b.html"
    page.parent.mkdir(parents=True)
    csv = '<p class="tut-data"></p>'  # under each table and figure
    page.write_text(f'<div class="{CHECK_MARK}"></div>' + ('<div class="tut-table"></div>' + csv) * 4)
    assert check_page(tmp_path, "qwen3_1_7b", "qwen3-1.7b", strict=True) == [
        "qwen3_1_7b: the page is drawn from a recorded run, and no recorded document of qwen3-1.7b fits its card "
        "now (make record one on a machine that fits it)"]
    doc = _record_of(tmp_path)
    write_doc(doc, tmp_path / "rec" / "qwen3-1.7b" / "npu-x.json")
    page.write_text(page.read_text() + '<img class="sphx-glr-single-img tut-figure">' + csv + '<div class="tut-freshness"></div>'
                    + f"{doc.provenance.built_at} {doc.provenance.git_commit}")
    (tmp_path / "html" / "api" / "bundles").mkdir(parents=True)
    (tmp_path / "html" / "api" / "bundles" / "qwen3_1_7b.zip").write_bytes(b"PK")
    assert check_page(tmp_path, "qwen3_1_7b", "qwen3-1.7b", strict=True) == []
