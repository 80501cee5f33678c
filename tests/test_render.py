"""Pages drawn from documents (npu_tutorials.site.render, npu_tutorials.views.refs).

* Every view a gallery script shows, drawn from every recorded document in both languages, reads as it read
  before the views moved out of execution: ``tests/golden/rendered-4c8dd4c.json`` holds that text, made at
  commit 4c8dd4c (views run while the tutorial executed, both languages carried in one ``Text``, each figure
  drawn a second time in Chinese while it executed) by the same extraction as :func:`rendered_text` below.
* A cell leaves a placeholder; the Sphinx hook draws it in the pass's language, tables in place and figures
  as PNGs; a view that cannot be drawn shows one line.
* The re-run digest leaves the drawing code out and the measuring code in (both directions).
"""

from __future__ import annotations

import html as H
import json
import re
import warnings
from pathlib import Path

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.core.messages import LANGS, language
from npu_tutorials.inputs import digest
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.gallery_index import gallery_dir, tutorials
from npu_tutorials.record.results import read_doc
from npu_tutorials.site import render, rerun
from npu_tutorials.views import Show, Views
from npu_tutorials.views.refs import resolve

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "golden" / "rendered-4c8dd4c.json"
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


def test_every_recorded_document_draws_as_before_in_both_languages():
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    seen, differ = set(), []
    for stem, key in sorted(tutorials().items()):
        card = load_card(key)
        for path in sorted((ROOT / "results" / key).glob("*.json")):
            views = Views(read_doc(path), card, [])
            for name, arg in shown_views(stem):
                for lang in LANGS:
                    k = f"results/{key}/{path.name}::{name}({arg})::{lang}"
                    if k not in golden:
                        continue  # a view the gallery did not show at 4c8dd4c
                    seen.add(k)
                    try:
                        with language(lang), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            now = rendered_text(resolve(views, name)(*([arg] if arg else [])), lang)
                    except TutorialError as exc:
                        now = f"error: {exc}"
                    if now != golden[k]:
                        differ.append(f"{k}:\n  before: {str(golden[k])[:300]}\n  now:    {str(now)[:300]}")
    assert not differ, "\n".join(differ[:5])
    gone = sorted(k for k in golden if k not in seen and "compare.gate_table" not in k)
    assert not gone, f"views drawn before and no longer shown: {gone[:5]}"
    assert len(seen) >= 250


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


def test_the_rerun_digest_leaves_drawing_out_and_measuring_in(tmp_path):
    import shutil

    pkg = tmp_path / "src" / "npu_tutorials"
    shutil.copytree(rerun.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__", "data", "cards"))
    files = {p.relative_to(pkg).as_posix() for p in rerun.measuring_files(pkg)}
    assert "engine/server.py" in files and "measure/metrics.py" in files and "tutorial/facade.py" in files
    assert not {f for f in files if f.startswith(("views/", "checks/"))}
    assert {"core/messages.py", "site/render.py", "site/banners.py"}.isdisjoint(files)
    key = "qwen3-0.6b"
    before = rerun.inputs_digest(key, weights="w", package=pkg)
    (pkg / "views" / "serving.py").write_text((pkg / "views" / "serving.py").read_text() + "\n# reworded\n")
    (pkg / "core" / "messages.py").write_text((pkg / "core" / "messages.py").read_text() + "\n# reworded\n")
    assert rerun.inputs_digest(key, weights="w", package=pkg) == before  # a view edit: no re-run
    (pkg / "engine" / "server.py").write_text((pkg / "engine" / "server.py").read_text() + "\n# changed\n")
    assert rerun.inputs_digest(key, weights="w", package=pkg) != before  # the engine: a re-run


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
