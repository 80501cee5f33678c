"""The landing page at a glance (issue 41): a card per model and one comparison figure, drawn from the
documents (computing apart from drawing: the rows are data, the figure draws any rows)."""

from __future__ import annotations

import re
import shutil

from docs import machine, make_doc

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.gallery_index import tutorials
from npu_tutorials.record.results import ROOT
from npu_tutorials.site import overview
from npu_tutorials.views import plots


def test_the_rows_are_the_shown_document_and_the_newest_record_of_each_other_machine():
    card = load_card("qwen2.5-0.5b")
    mine = make_doc(throughput=100.0, tpot=20.0, built_at="2026-12-01T00:00:00+00:00")
    old = make_doc(throughput=50.0, built_at="2026-10-01T00:00:00+00:00", mach=machine(device="Ascend910B3",
                                                                                      backend="npu"), weights="real")
    new = make_doc(throughput=60.0, built_at="2026-11-01T00:00:00+00:00", mach=machine(device="Ascend910B3",
                                                                                      backend="npu"), weights="real")
    failed = make_doc(status="failed", built_at="2026-11-15T00:00:00+00:00", mach=machine(device="Ascend910B3",
                                                                                         backend="npu"), weights="real")
    rows = overview.comparison_rows([card], {card.key: mine}, {card.key: [old, new, failed]})
    assert [(r[1].split(" (")[-1], r[2].median, r[3].median) for r in rows] == [
        ("cpu, stand-in, quick)", 100.0, 20.0), ("npu, real, quick)", 60.0, 20.0)]
    fig = plots.models_compared(rows, "t")  # the figure draws what it is given: one bar per row and figure
    bars = [p for ax in fig.axes for p in ax.patches]
    assert len(bars) == 4 and sorted(round(b.get_width()) for b in bars) == [20, 20, 60, 100]


def test_each_bar_of_the_comparison_names_its_document(tmp_path):
    """Issue 56: the landing figure's CSV names, per bar, the identifier of the document it was drawn from (the
    one api/ serves it under); a document built in memory, read from no file, has none."""
    from npu_tutorials.record.results import document_id, read_doc, write_doc
    from npu_tutorials.views import figure_data

    card = load_card("qwen2.5-0.5b")
    path = write_doc(make_doc(throughput=100.0, tpot=20.0), tmp_path / "mine.json")
    mine = read_doc(path)
    assert mine.identifier == document_id(path) and make_doc().identifier == ""
    rows = overview.comparison_rows([card], {card.key: mine}, {})
    data = figure_data.of(plots.models_compared(rows, "t"))
    assert data.columns[-1] == "document" and [r[-1] for r in data.rows] == [document_id(path)]


def test_the_landing_grid_links_every_page_and_draws_its_picture(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(ROOT / "results" / "qwen3-0.6b" / "cpu-amd-epyc-2c-bf16.json", results / "qwen3-0.6b.json")
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(results))
    for lang, words in (("en", "this build:"), ("zh_CN", "本次构建：")):
        grid, figure = overview.overview(lang, tmp_path / lang / "_images")
        links = re.findall(r'<a class="tut-card" href="([^"]+)"', grid)
        assert links == sorted(f"tutorials/models/{s}.html" for s in tutorials()) or \
            set(links) == {f"tutorials/models/{s}.html" for s in tutorials()}
        assert words in grid and "Qwen3ForCausalLM" in grid
        imgs = re.findall(r'src="(_images/[^"]+\.png)"', grid + figure)
        with_runs = list(tutorials().values())  # each has a run: this build's or a recorded one
        assert len(imgs) == len(with_runs) + 1 and all((tmp_path / lang / p).is_file() for p in imgs)
        assert "\n\n" not in grid  # one raw HTML block in the Markdown page
        # the comparison figure's rows as a CSV under it (issue 56): a row per bar pair, model and hardware named
        (csv_link,) = re.findall(r'<a href="(_data/[^"]+\.csv)" download>', figure)
        rows = (tmp_path / lang / csv_link).read_text("utf-8").splitlines()
        assert len(rows) >= 2 and rows[0].split(",")[:2] == (["model", "hardware"] if lang == "en" else ["模型", "硬件"])
