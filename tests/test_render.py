"""Pages drawn from documents (npu_tutorials.site.render, npu_tutorials.views.refs).

* Every view a gallery script shows, drawn from every recorded document in both languages, reads as it read
  when ``tests/golden/rendered.json`` was made (its ``made_at`` commit; first at 4c8dd4c, when views still ran
  while the tutorial executed), by the extraction of :func:`rendered_text` below.  A view reworded on purpose:
  ``make golden`` writes the file again from this checkout, and the commit shows the difference to review.
* A cell leaves a placeholder; the Sphinx hook draws it in the pass's language, tables in place and figures
  as PNGs; a view that cannot be drawn shows one line.
* The re-run digest leaves the drawing code out and the measuring code in (both directions).
"""

from __future__ import annotations

import html as H
import json
import os
import re
import warnings
from pathlib import Path

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.core.messages import LANGS, language
from npu_tutorials.inputs import digest
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.gallery_index import gallery_dir, tutorials
from npu_tutorials.record.results import document_id, read_doc
from npu_tutorials.site import render, rerun
from npu_tutorials.views import Show, Views
from npu_tutorials.views.refs import resolve

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden" / "rendered.json"
CALL = re.compile(r'show\.([a-z_.]+)\(("[a-z]+")?')


def rendered_text(value, lang: str):
    """A drawn view as the golden file holds it: a table's text with its tags gone and its whitespace collapsed;
    a figure's set of texts (titles, labels, ticks, legends) and its number of axes."""
    if hasattr(value, "savefig"):
        import matplotlib.pyplot as plt
        from matplotlib.text import Text

        out = sorted({t.get_text() for t in value.findobj(Text) if t.get_text().strip()}) + [f"axes={len(value.axes)}"]
        plt.close(value)
        return out
    text = re.sub(r"<[^>]+>", " ", value._repr_html_())
    return " ".join(H.unescape(text).split())


def shown_views(stem: str) -> list[tuple[str, str]]:
    """The views a gallery script shows: (name, its one string argument or '')."""
    found = {(m[1], m[2].strip('"') if m[2] else "") for m in CALL.finditer((gallery_dir() / f"{stem}.py").read_text())}
    return sorted(found)


def drawn_now() -> dict[str, object]:
    """Every view each gallery script shows, drawn from each recorded document of its model, in both languages:
    ``results/<model>/<file>::<view>(<argument>)::<language>`` -> :func:`rendered_text` (or ``error: ...``)."""
    out = {}
    for stem, key in sorted(tutorials().items()):
        card = load_card(key)
        for path in sorted((ROOT / "results" / key).glob("*.json")):
            views = Views(read_doc(path), card, [])
            for name, arg in shown_views(stem):
                for lang in LANGS:
                    try:
                        with language(lang), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            now = rendered_text(resolve(views, name)(*([arg] if arg else [])), lang)
                    except TutorialError as exc:
                        now = f"error: {exc}"
                    out[f"results/{key}/{path.name}::{name}({arg})::{lang}"] = now
    return out


def golden_differences(golden: dict, now: dict) -> list[str]:
    """One entry per view drawn differently from the golden file, or held there and no longer drawn."""
    differ = [f"{k}:\n  before: {str(golden[k])[:300]}\n  now:    {str(now[k])[:300]}"
              for k in sorted(golden) if k in now and now[k] != golden[k]]
    return differ + [f"{k}: drawn before, no longer shown" for k in sorted(golden) if k not in now]


def test_every_recorded_document_draws_as_before_in_both_languages():
    """``make golden`` (REGENERATE_GOLDEN=1) writes the file from this checkout instead of comparing."""
    now = drawn_now()
    if os.environ.get("REGENERATE_GOLDEN") == "1":
        from npu_tutorials.record.results import git_commit

        GOLDEN.write_text(json.dumps({"made_at": git_commit(), "views": now}, ensure_ascii=False, indent=0,
                                     sort_keys=True) + "\n", encoding="utf-8")
        return
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["views"]
    differ = golden_differences(golden, now)
    assert not differ, f"{len(differ)} views differ from {GOLDEN.name} (make golden, where on purpose):\n" + \
        "\n".join(differ[:5])
    new = sorted(set(now) - set(golden))
    assert len(golden) >= 250 and not new, f"{len(new)} views not in {GOLDEN.name} (make golden draws them): {new[:3]}"


def test_the_golden_comparison_catches_an_unintended_change(monkeypatch):
    """A view's words changed by accident (here: every table's header cells start with an X) differ from the
    golden file, in both languages."""
    from npu_tutorials.core import tables

    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["views"]
    original = tables.Table._repr_html_
    monkeypatch.setattr(tables.Table, "_repr_html_", lambda self: original(self).replace("<th>", "<th>X"))
    differ = golden_differences(golden, drawn_now())
    assert any("::en" in d for d in differ) and any("::zh_CN" in d for d in differ)


def _recorded_doc(key="qwen3-0.6b"):
    return sorted((ROOT / "results" / key).glob("*.json"))[0]


def test_a_cell_leaves_a_placeholder_and_the_pass_draws_it_in_its_language(tmp_path, monkeypatch):
    key = "qwen3-0.6b"
    doc = read_doc(_recorded_doc(key))
    show = Show(Views(doc, load_card(key)), key)
    table, plot = show.serving.bench_table(), show.serving.bench_plot()
    assert "bench serve" in repr(table) and table.rows  # the terminal's text; the drawn table read through
    page = ("Title\n=====\n\n.. raw:: html\n\n    <div class=\"output_subarea\">\n    " + table._repr_html_()
            + "\n    </div>\n\n.. raw:: html\n\n    <div>\n    " + plot._repr_html_() + "\n    </div>\n")
    assert page.count('class="tut-view"') == 2 and "<table" not in page  # nothing drawn at execution
    results = tmp_path / "results"
    results.mkdir()
    (results / f"{key}.json").write_text(_recorded_doc(key).read_text())
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(results))
    out = {}
    for lang in LANGS:
        out[lang] = render.render_text(page, lang, tmp_path / lang / "_images", "../../")
        assert 'class="tut-view"' not in out[lang] and '<table class="table">' in out[lang]
        img = re.search(r'src="\.\./\.\./_images/(tut_[^"]+\.png)"', out[lang])
        assert img and (tmp_path / lang / "_images" / img[1]).read_bytes().startswith(b"\x89PNG")
        # every line of the drawn HTML stays inside its raw block
        block = out[lang].split(".. raw:: html\n\n", 1)[1].split("\n\n", 1)[0]
        assert all(line.startswith("    ") for line in block.splitlines())
    assert "Benchmark duration" in out["en"] and "基准测试时长" in out["zh_CN"]
    assert "基准测试时长" not in out["en"] and "Benchmark duration" not in out["zh_CN"]


def test_a_view_that_cannot_be_drawn_shows_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path))  # no document there
    page = '    <div class="tut-view" data-tut-view="{&quot;model&quot;: &quot;qwen3-0.6b&quot;, &quot;view&quot;: &quot;environment&quot;}"></div>\n'
    errors = []
    out = render.render_text(page, "en", tmp_path / "_images", "", on_error=errors.append)
    assert render.ERROR_MARK in out and len(errors) == 1 and "no results document" in errors[0]


def test_a_view_with_arguments_that_cannot_be_stored_fails_at_its_cell():
    key = "qwen3-0.6b"
    show = Show(Views(read_doc(_recorded_doc(key)), load_card(key)), key)
    with pytest.raises(TutorialError, match="plain values"):
        show.compare.on_other_hardware([object()])
    with pytest.raises(TutorialError, match="no view"):
        show.serving.no_such_view()


# a planted edit in each layer: (file, the page re-runs, the page re-renders)
PLANTED = [("core/errors.py", True, True), ("core/messages.py", False, True), ("inputs/cards.py", True, True),
           ("engine/server.py", True, True), ("record/headline.py", True, True), ("measure/metrics.py", True, True),
           ("checks/e2e.py", True, False), ("checks/site_check.py", False, False), ("views/serving.py", False, True),
           ("tutorial/facade.py", True, False), ("site/banners.py", False, True), ("site/prepare.py", False, False),
           ("cli/record.py", False, False)]


def test_an_edit_in_each_layer_reruns_or_rerenders_the_page_as_it_must(tmp_path):
    """What re-runs a page (``rerun.inputs_digest``) and what re-renders it (``render.drawing_digest``) are derived
    from the import graph (``site.code_graph``): an edit planted in each layer changes the digest of what it
    reaches, and only that.  ``checks/e2e.py`` writes the e2e config while the page runs (it once neither re-ran
    nor re-rendered its page); the post-build checks and the commands do neither."""
    import shutil

    pkg = tmp_path / "src" / "npu_tutorials"
    shutil.copytree(rerun.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__", "data", "cards"))
    key, stem = "qwen3-0.6b", "qwen3_0_6b"
    found = []
    for rel, reruns, rerenders in PLANTED:
        run0, draw0 = rerun.inputs_digest(key, weights="w", package=pkg), render.drawing_digest(stem, package=pkg)
        (pkg / rel).write_text((pkg / rel).read_text() + "\n# planted\n")
        run1, draw1 = rerun.inputs_digest(key, weights="w", package=pkg), render.drawing_digest(stem, package=pkg)
        found.append((rel, run1 != run0, draw1 != draw0))
    assert found == PLANTED


def test_a_cards_cited_figures_redraw_without_a_rerun(tmp_path):
    card = (ROOT / "src" / "npu_tutorials" / "cards" / "qwen-1_8b-chat.yaml").read_text()
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(card)
    b.write_text(card.replace('hardware: "Ascend910, one card"', 'hardware: "Ascend910, one card (cited)"'))
    assert a.read_text() != b.read_text() and digest.measured_card(a) == digest.measured_card(b)
    b.write_text(card.replace("summary: >-", "summary: >-\n  More.", 1).replace("max_tokens: ", "max_tokens: 1", 1))
    assert digest.measured_card(a) != digest.measured_card(b)


def test_a_cards_faq_and_w8a8_checkpoint_redraw_without_a_rerun(tmp_path):
    """The copy-paste tab's FAQ and W8A8 checkpoint are drawn only: editing them re-runs nothing and keeps a
    recorded page's card digest; the deploy section's other keys (its notes, its card count) still count."""
    card = (ROOT / "src" / "npu_tutorials" / "cards" / "qwen3-0.6b.yaml").read_text()
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(card)
    assert "\n  faq:\n" in card
    b.write_text(card.replace("\n  faq:\n", "\n  w8a8: {id: some/Qwen3-0.6B-W8A8, revision: abc}\n  faq:\n    - {q: \"Q\", a: \"A.\"}\n", 1))
    assert digest.measured_card(a) == digest.measured_card(b)
    b.write_text(card.replace("\n  faq:\n", "\n  cards: 4\n  faq:\n", 1))
    assert digest.measured_card(a) != digest.measured_card(b)


def test_every_table_a_page_shows_downloads_as_a_csv_of_its_rows_naming_its_document(tmp_path, monkeypatch):
    """Issue 56: under every drawn table, a CSV of the columns and the rows it shows (the same cells, in the pass's
    language) and the identifier of the document it came from; under every figure, the same: a CSV of the rows it
    draws (views.figure_data, attached by the figure function from the inputs it draws) and the identifier."""
    import csv
    import io

    from npu_tutorials.record.results import document_id
    from npu_tutorials.views import figure_data
    from npu_tutorials.views.refs import placeholder

    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(results))
    tables = figures = 0
    for stem, key in sorted(tutorials().items()):
        recs = sorted((ROOT / "results" / key).glob("*.json"))
        if not recs:
            continue
        (results / f"{key}.json").write_text(recs[0].read_text())
        doc_id = document_id(results / f"{key}.json")
        views = Views(read_doc(results / f"{key}.json"), load_card(key), [])
        for name, arg in shown_views(stem):
            args = [arg] if arg else []
            for lang in LANGS:
                with language(lang), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        value = resolve(views, name)(*args)
                    except TutorialError:
                        continue  # a section this document lacks: test_every_recorded_document_draws_as_before
                out = render.render_text(placeholder(key, name, args, {}), lang, tmp_path / lang / "_images", "../../")
                if hasattr(value, "savefig"):
                    import matplotlib.pyplot as plt
                    plt.close(value)
                    figures += 1
                    data = figure_data.of(value)
                    href = re.search(r'<a href="\.\./\.\./_data/([^"]+\.csv)" download>', out)
                    assert data is not None and data.rows and href and doc_id in href[1], (name, lang)
                    rows = list(csv.reader(io.StringIO((tmp_path / lang / "_data" / href[1]).read_text("utf-8"))))
                    assert rows == [data.columns] + data.cells(), (name, lang)  # what the figure draws, row for row
                elif isinstance(value, (render.Table, render.Verdict)):
                    tables += 1
                    href = re.search(r'<a href="\.\./\.\./_data/([^"]+\.csv)" download>', out)
                    assert href and doc_id in href[1] and doc_id in out, (name, lang, out[-300:])
                    rows = list(csv.reader(io.StringIO((tmp_path / lang / "_data" / href[1]).read_text("utf-8"))))
                    table = out.split("<tbody>", 1)
                    shown = [[H.unescape(c) for c in re.findall(r"<th>(.*?)</th>", table[0], re.S)]]
                    shown += [[H.unescape(c) for c in re.findall(r"<td>(.*?)</td>", tr, re.S)]
                              for tr in re.findall(r"<tr>(.*?)</tr>", table[1].split("</tbody>")[0], re.S)]
                    assert rows == shown, (name, lang)  # the page's table, cell for cell
    assert tables >= 40 and figures >= 10, (tables, figures)


@pytest.mark.parametrize("key", ["qwen2.5-0.5b", "palmyra-mini"])
def test_the_history_draws_the_recorded_runs_of_one_machine_kind_in_date_order_in_both_languages(key):
    """Issue 56: the headline figures across every recorded run of one machine kind, in date order, the commit
    beside each point; a change of versions is a dashed line with the new versions; one run: no history yet."""
    from matplotlib.text import Text

    import matplotlib.pyplot as plt

    from npu_tutorials.views import figure_data

    paths = sorted((ROOT / "results" / key).glob("*.json"), key=lambda p: read_doc(p).provenance.built_at)
    docs = [read_doc(p) for p in paths]
    assert len({d.provenance.machine.slug for d in docs}) == 1 and len(docs) >= 2
    for lang, word in (("en", "headline figures across runs"), ("zh_CN", "各次运行的主要指标")):
        with language(lang):
            fig = Views(docs[-1], load_card(key), docs[:-1]).compare.history()
        texts = [t.get_text() for t in fig.findobj(Text)]
        assert any(word in t for t in texts)
        ticks = [t.get_text() for t in fig.axes[-1].get_xticklabels()]
        assert ticks == [d.provenance.built_at[:16].replace("T", " ") for d in docs]  # date order, one slot each
        commits = [t for t in texts if t in {d.provenance.git_commit[:7] for d in docs}]
        assert commits[:len(docs)] == [d.provenance.git_commit[:7] for d in docs]
        dashed = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
        assert len(dashed) == len([1 for a, b in zip(docs, docs[1:]) if _versions(a) != _versions(b)])
        # its CSV's rows are the points drawn: every panel's medians, with each run's date and commit
        data = figure_data.of(fig)
        for ax in fig.axes:
            drawn = sorted(float(y) for ln in ax.get_lines() if ln.get_marker() == "o" for y in ln.get_ydata())
            rows = [r for r in data.rows if r[0] == ax.get_ylabel()]
            assert sorted(r[5] for r in rows) == pytest.approx(drawn) and len(rows) == len(docs)
            assert [r[3] for r in rows] == [d.provenance.git_commit[:7] for d in docs]
            # and each point's document, by the identifier api/ serves it under
            assert [r[-1] for r in rows] == [document_id(p) for p in paths] and rows[0][-1].startswith("doc-")
        plt.close(fig)
    one = Views(docs[0], load_card(key), []).compare.history()
    assert "No history yet" in repr(one)


def _versions(doc):
    v = doc.provenance.machine.versions
    return (v.get("vllm"), v.get("vllm_ascend"))
