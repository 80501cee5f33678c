"""The figures in both languages (``npu_tutorials.views.plots``).

Each plot draws its words in the language being rendered (each Sphinx pass draws its own,
``npu_tutorials.site.render``), with a font that has the Chinese glyphs.
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
from npu_tutorials.core.messages import language  # noqa: E402
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
    def in_(lang, draw):
        with language(lang):
            return draw(title.get(lang, title["en"]) if isinstance(title, dict) else title)

    return [("latency_distributions", lambda lang: in_(lang, lambda t: plots.latency_distributions(bench, t))),
            ("logits_error", lambda lang: in_(lang, lambda t: plots.logits_error(logits, t))),
            ("sweeps", lambda lang: in_(lang, lambda t: plots.sweeps(lengths, concs, t))),
            ("greedy_agreement", lambda lang: in_(lang, lambda t: plots.greedy_agreement(greedy, t))),
            ("tuning", lambda lang: in_(lang, lambda t: plots.tuning(tuning, t)))]


def _words(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(MplText) if t.get_text()]


@pytest.mark.parametrize("title", [{"en": "qwen: a title", "zh_CN": "qwen：标题"}, "qwen: a plain title"],
                         ids=["title per language", "str title"])
def test_every_plot_draws_its_words_in_the_language_asked_for(title):
    messages.MISSED.clear()
    for name, draw in _every_plot(title):
        en, zh = draw("en"), draw("zh_CN")
        try:
            assert not [w for w in _words(en) if CJK.search(w)], name
            zh_words = _words(zh)
            assert zh._suptitle is not None or zh.axes[0].get_title() in zh_words
            assert sum(bool(CJK.search(w)) for w in zh_words) >= 2, (name, zh_words)
            if isinstance(title, dict):
                assert "qwen：标题" in zh_words and "qwen: a title" in _words(en), name
            else:
                assert title in zh_words, name
        finally:
            plt.close(en)
            plt.close(zh)
    assert sorted(messages.MISSED) == []  # every word the plots write has its translation


def test_a_chinese_label_renders_with_real_glyphs(tmp_path):
    assert plots.CJK_FAMILY in plots.font_family(), "mplfonts==0.0.11 (requirements/docs.txt) is not installed"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r".*[Gg]lyph.*missing", category=UserWarning)
        for name, draw in _every_plot({"en": "title", "zh_CN": "中文标题：推理时延"}):
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


def test_conf_draws_figures_per_pass_and_scrapes_none():
    from pathlib import Path

    conf = (Path(__file__).resolve().parents[1] / "conf.py").read_text()
    assert '"image_scrapers": ("matplotlib",)' in conf
    assert 'app.connect("source-read", render_views)' in conf
