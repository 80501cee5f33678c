"""The figures in both languages (``npu_tutorials.views.plots``, ``npu_tutorials.site.figures``).

Each plot draws its words in the language asked for, with a font that has the Chinese glyphs; the gallery's
scraper saves the Chinese figure beside the English image, and the Chinese pass points the page at it.
"""

import re
import warnings
from types import SimpleNamespace as NS

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.image import imread  # noqa: E402
from matplotlib.text import Text as MplText  # noqa: E402

from npu_tutorials.core import messages  # noqa: E402
from npu_tutorials.core.messages import Text  # noqa: E402
from npu_tutorials.site import figures  # noqa: E402
from npu_tutorials.views import plots  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


def _stat(m):
    return NS(median=m, q1=m * 0.9, q3=m * 1.1)


def _every_plot(title):
    """(name, draw(lang)) of every plot function, on small made-up sections."""
    bench = NS(ttft_ms=[20.0, 25, 30, 22, 28, 24], tpot_ms=[5.0, 5.5, 6, 5.2], itl_ms=[4.0, 5, 6, 5, 7, 5, 4, 6])
    logits = NS(error_histogram=NS(edges=[-0.2, -0.1, 0, 0.1, 0.2], counts=[3, 40, 50, 7]),
                compared_form="log-probabilities", rows=[1, 2],
                scatter_engine=[-3.0, -1.0, 0.5, 2.0], scatter_reference=[-3.1, -0.9, 0.4, 2.1])
    lengths = [NS(input_len=n, prefill_ms=_stat(n / 10), ttft_concurrent_ms=_stat(n / 5), concurrent_requests=4,
                  tpot_ms=_stat(5 + n / 1000)) for n in (128, 512, 2048)]
    concs = [NS(concurrency=c, output_throughput=_stat(100.0 * c ** 0.8)) for c in (1, 2, 4)]
    greedy = [NS(prompt="The capital of France is", match_rate=1.0, first_divergence=None),
              NS(prompt="Write a long story about a dragon and a knight", match_rate=0.4, first_divergence=8)]
    tuning = NS(rows=[NS(name="default", tpot_ms=_stat(6.0), fraction=0.5),
                      NS(name="graph mode", tpot_ms=_stat(5.0), fraction=None)])
    return [("latency_distributions", lambda lang: plots.latency_distributions(bench, title, lang=lang)),
            ("logits_error", lambda lang: plots.logits_error(logits, title, lang=lang)),
            ("sweeps", lambda lang: plots.sweeps(lengths, concs, title, lang=lang)),
            ("greedy_agreement", lambda lang: plots.greedy_agreement(greedy, title, lang=lang)),
            ("tuning", lambda lang: plots.tuning(tuning, title, lang=lang))]


def _words(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(MplText) if t.get_text()]


@pytest.mark.parametrize("title", [Text("qwen: a title", {"zh_CN": "qwen：标题"}), "qwen: a plain title"],
                         ids=["Text title", "str title"])
def test_every_plot_draws_its_words_in_the_language_asked_for(title):
    messages.MISSED.clear()
    for name, draw in _every_plot(title):
        en, zh = draw("en"), draw("zh_CN")
        try:
            assert not [w for w in _words(en) if CJK.search(w)], name
            zh_words = _words(zh)
            assert zh._suptitle is not None or zh.axes[0].get_title() in zh_words
            assert sum(bool(CJK.search(w)) for w in zh_words) >= 2, (name, zh_words)
            if isinstance(title, Text):
                assert "qwen：标题" in zh_words and "qwen: a title" in _words(en), name
            else:
                assert title in zh_words, name
            # the English figure redraws itself in Chinese, the same words as drawing it so directly
            again = en._tut_redraw("zh_CN")
            assert sorted(_words(again)) == sorted(zh_words), name
            plt.close(again)
        finally:
            plt.close(en)
            plt.close(zh)
    assert sorted(messages.MISSED) == []  # every word the plots write has its translation


def test_a_chinese_label_renders_with_real_glyphs(tmp_path):
    assert plots.CJK_FAMILY in plots.font_family(), "mplfonts==0.0.11 (requirements/docs.txt) is not installed"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r".*[Gg]lyph.*missing", category=UserWarning)
        for name, draw in _every_plot(Text("title", {"zh_CN": "中文标题：推理时延"})):
            fig = draw("zh_CN")
            fig.savefig(tmp_path / f"{name}.png")
            chinese = [t for t in fig.findobj(MplText) if CJK.search(t.get_text())]
            assert chinese and all(t.get_window_extent().width > 0 for t in chinese), name
            # Latin text keeps DejaVu Sans first: the CJK font is only the fallback
            assert chinese[0].get_fontfamily()[0] == "DejaVu Sans", name
            plt.close(fig)


def test_without_the_font_a_figure_still_draws_with_one_warning(monkeypatch):
    monkeypatch.setattr(plots, "CJK_FONT", ("mplfonts", "fonts/no-such-font.otf"))
    monkeypatch.setattr(plots, "_font", {})
    with pytest.warns(UserWarning, match="Chinese font is missing") as caught:
        for name, draw in _every_plot("t")[:2]:
            plt.close(draw("zh_CN"))
    assert len([w for w in caught if "font is missing" in str(w.message)]) == 1


def _gallery(tmp_path):
    from sphinx_gallery.scrapers import ImagePathIterator

    images = tmp_path / "tutorials" / "models" / "images"
    images.mkdir(parents=True)
    conf = {"image_srcset": [], "matplotlib_animations": (False, None), "compress_images": (),
            "src_dir": str(tmp_path)}
    return images, conf, {"image_path_iterator": ImagePathIterator(images / "sphx_glr_demo_{0:03}.png")}


def test_the_scraper_saves_each_figure_in_chinese_beside_the_english_one(tmp_path):
    images, conf, block_vars = _gallery(tmp_path)
    plt.close("all")
    plots.latency_distributions(NS(ttft_ms=[1.0, 2, 3, 4, 5], tpot_ms=[1.0, 2], itl_ms=[1.0, 2, 3]),
                                Text("latency", {"zh_CN": "时延"}))
    plt.figure()  # a tutorial's own figure: English only
    plt.plot([1, 2, 3])
    rst = figures.scrape(None, block_vars, conf)
    names = sorted(p.name for p in images.iterdir())
    assert names == ["sphx_glr_demo_001.png", "sphx_glr_demo_001_zh_CN.png", "sphx_glr_demo_002.png"]
    assert imread(images / "sphx_glr_demo_001.png").shape == imread(images / "sphx_glr_demo_001_zh_CN.png").shape
    assert "/tutorials/models/images/sphx_glr_demo_001.png" in rst and "sphx_glr_demo_002.png" in rst
    assert "zh_CN" not in rst and plt.get_fignums() == []
    assert block_vars["image_path_iterator"].paths == [str(images / "sphx_glr_demo_001.png"),
                                                       str(images / "sphx_glr_demo_002.png")]


def test_the_scraper_saves_hidpi_copies_in_chinese_too(tmp_path):
    images, conf, block_vars = _gallery(tmp_path)
    conf["image_srcset"] = [2.0]
    plt.close("all")
    plots.greedy_agreement([NS(prompt="p", match_rate=1.0, first_divergence=None)], "t")
    figures.scrape(None, block_vars, conf)
    assert sorted(p.name for p in images.iterdir()) == [
        "sphx_glr_demo_001.png", "sphx_glr_demo_001_2_00x.png", "sphx_glr_demo_001_2_00x_zh_CN.png",
        "sphx_glr_demo_001_zh_CN.png"]


PAGE = """Title
=====

.. image-sg:: /tutorials/models/images/sphx_glr_demo_001.png
   :alt: latency
   :srcset: /tutorials/models/images/sphx_glr_demo_001.png, /tutorials/models/images/sphx_glr_demo_001_2_00x.png 2.00x
   :class: sphx-glr-single-img

.. image-sg:: /tutorials/models/images/sphx_glr_demo_002.png
   :alt: plain
   :srcset: /tutorials/models/images/sphx_glr_demo_002.png
   :class: sphx-glr-single-img

.. image:: images/thumb/sphx_glr_demo_thumb.png

.. _sphx_glr_download_tutorials_models_demo.py:
"""


def _app(tmp_path, language):
    return NS(config=NS(language=language), srcdir=str(tmp_path), builder=NS(name="html"))


def test_the_chinese_pass_points_each_page_at_the_chinese_figures_that_exist(tmp_path):
    images = tmp_path / "tutorials" / "models" / "images"
    (images / "thumb").mkdir(parents=True)
    for name in ("sphx_glr_demo_001.png", "sphx_glr_demo_001_zh_CN.png", "sphx_glr_demo_001_2_00x.png",
                 "sphx_glr_demo_001_2_00x_zh_CN.png", "sphx_glr_demo_002.png", "thumb/sphx_glr_demo_thumb.png"):
        (images / name).write_bytes(b"png")
    source = [PAGE]
    figures.figures_in_language(_app(tmp_path, "zh_CN"), "tutorials/models/demo", source)
    page = source[0]
    assert page.count("sphx_glr_demo_001_zh_CN.png") == 2 and "sphx_glr_demo_001_2_00x_zh_CN.png 2.00x" in page
    assert "sphx_glr_demo_001.png" not in page  # every reference to the figure drawn in Chinese
    assert page.count("sphx_glr_demo_002.png") == 2 and "002_zh_CN" not in page  # English only: stays
    assert "images/thumb/sphx_glr_demo_thumb.png" in page
    again = [page]
    figures.figures_in_language(_app(tmp_path, "zh_CN"), "tutorials/models/demo", again)
    assert again[0] == page  # once only
    for app in (_app(tmp_path, "en"), _app(tmp_path, None), NS(config=NS(language="zh_CN"), srcdir=str(tmp_path),
                                                                  builder=NS(name="gettext"))):
        english = [PAGE]
        figures.figures_in_language(app, "tutorials/models/demo", english)
        assert english == [PAGE]


def test_conf_uses_the_scraper_and_the_handler():
    from pathlib import Path

    conf = (Path(__file__).resolve().parents[1] / "conf.py").read_text()
    assert '"image_scrapers": ("npu_tutorials.site.figures.scrape",)' in conf
    assert 'app.connect("source-read", figures_in_language)' in conf
