"""Matplotlib figures for the tutorial pages (sphinx-gallery scrapes open figures).

A tutorial executes once, in the English pass, and the Chinese pass reuses its images, so every figure is
drawn in each language at execution time: each plot function takes ``lang`` and writes every word as
``in_(_("..."), lang)``; the figure it returns carries ``fig._tut_redraw(lang)``, the same plot drawn in
another language (:mod:`npu_tutorials.site.figures` saves it beside the English image).  Chinese glyphs come
from Noto Sans CJK SC (the ``mplfonts`` wheel), a fallback behind DejaVu Sans, so Latin text looks the same in
both languages.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ..core.messages import _, in_

CJK_FAMILY = "Noto Sans CJK SC"
CJK_FONT = ("mplfonts", "fonts/NotoSansCJKsc-Regular.otf")  # package, file in it (OFL)
_font: dict[str, list[str]] = {}  # "family": the font family list, once the fonts are looked up


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:
            pass
    import matplotlib.pyplot as plt

    return plt


def font_family() -> list[str]:
    """The figures' font families: DejaVu Sans, then Noto Sans CJK SC for the glyphs DejaVu lacks (per glyph,
    matplotlib >= 3.6).  The CJK font is registered once; without it, figures draw anyway (one warning)."""
    if "family" not in _font:
        from importlib.resources import files

        from matplotlib import font_manager

        family = ["DejaVu Sans"]
        try:
            package, name = CJK_FONT
            path = files(package).joinpath(name)
            if not path.is_file():
                raise FileNotFoundError(str(path))
            font_manager.fontManager.addfont(str(path))
            family.append(CJK_FAMILY)
        except Exception as exc:  # noqa: BLE001 (no font: English figures are still right)
            warnings.warn(f"the figures' Chinese font is missing ({type(exc).__name__}: {exc}); install "
                          f"mplfonts==0.0.11 (requirements/docs.txt). Chinese labels will show empty boxes.",
                          stacklevel=2)
        _font["family"] = family
    return _font["family"]


def in_every_language(fn):
    """Decorate a plot function ``fn(..., lang="en")``: draw it with the site's fonts and attach to the figure
    ``_tut_redraw(lang)``, the same figure in another language."""

    @functools.wraps(fn)
    def draw(*args, lang: str = "en", **kwargs):
        plt = _plt()
        from matplotlib.text import Text as MplText

        family = font_family()
        with plt.rc_context({"font.family": family}), warnings.catch_warnings():
            if CJK_FAMILY not in family:  # warned once already
                warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            fig = fn(*args, lang=lang, **kwargs)
            for text in fig.findobj(MplText):  # the fonts stay when the figure is saved after this context
                text.set_fontfamily(family)
        fig._tut_redraw = lambda other: draw(*args, lang=other, **kwargs)
        return fig

    return draw


@in_every_language
def latency_distributions(bench, title: str, lang: str = "en"):
    """Per-request TTFT, TPOT and all inter-token latencies of one benchmark run (a Benchmark section)."""
    plt = _plt()
    ttft = np.asarray(bench.ttft_ms, dtype=float)
    tpot = np.asarray(bench.tpot_ms, dtype=float)
    itl = np.asarray(bench.itl_ms, dtype=float)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, values, name in zip(axes, (ttft, tpot, itl), (_("TTFT per request"), _("TPOT per request"),
                                                            _("inter-token latency (all tokens)"))):
        if values.size:
            ax.hist(values, bins=min(30, max(5, values.size // 2)), color="#3a6ea5")
            ax.axvline(np.median(values), color="k", ls="--", lw=1,
                       label=in_(_("median {value:.1f} ms", value=np.median(values)), lang))
            ax.legend(fontsize=8, loc="upper right")  # "best" searches the histogram: slow, and it warns
        ax.set_title(in_(name, lang), fontsize=10)
        ax.set_xlabel("ms")
    axes[0].set_ylabel(in_(_("count"), lang))
    fig.suptitle(in_(title, lang), fontsize=11)
    fig.tight_layout()
    return fig


@in_every_language
def logits_error(section, title: str, lang: str = "en"):
    """Histogram of engine - reference over every vocabulary entry, and engine vs reference (a LogitsAgreement)."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    h = section.error_histogram
    edges, counts = np.asarray(h.edges), np.asarray(h.counts)
    a.stairs(np.maximum(counts, 0.5), edges, fill=True, color="#b5523b")
    a.set_yscale("log")
    a.set_xlabel(in_(_("engine - reference (log-probabilities)") if "log" in section.compared_form
                     else _("engine - reference (logits)"), lang))
    a.set_ylabel(in_(_("count (log)"), lang))
    a.set_title(in_(_("error over {values:,} values ({prompts} prompts)", values=int(counts.sum()),
                      prompts=len(section.rows)), lang), fontsize=10)
    eng, ref = np.asarray(section.scatter_engine), np.asarray(section.scatter_reference)
    b.scatter(ref, eng, s=1, alpha=0.4, color="#3a6ea5")
    lo, hi = float(min(ref.min(), eng.min())), float(max(ref.max(), eng.max()))
    b.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    b.set_xlabel(in_(_("reference (fp32, CPU)"), lang))
    b.set_ylabel(in_(_("engine"), lang))
    b.set_title(in_(_("first prompt, {tokens:,} evenly spaced tokens", tokens=ref.size), lang), fontsize=10)
    fig.suptitle(in_(title, lang), fontsize=11)
    fig.tight_layout()
    return fig


def _med_err(stats):
    """Medians and asymmetric interquartile error bars of a list of Stat."""
    med = np.array([s.median for s in stats])
    return med, np.array([med - [s.q1 for s in stats], [s.q3 for s in stats] - med])


@in_every_language
def sweeps(length_rows, conc_rows, title: str, lang: str = "en"):
    """Prefill / decode / TTFT against input length, and throughput against concurrency (medians, IQR bars)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    L = [r.input_len for r in length_rows]
    axes[0].errorbar(L, *_med_err([r.prefill_ms for r in length_rows]), fmt="o-", capsize=3,
                     label=in_(_("prefill (TTFT, alone)"), lang))
    axes[0].errorbar(L, *_med_err([r.ttft_concurrent_ms for r in length_rows]), fmt="s--", capsize=3,
                     label=in_(_("TTFT, {requests} at once (chunked prefill)",
                                 requests=length_rows[0].concurrent_requests), lang))
    axes[0].set_xlabel(in_(_("input tokens"), lang))
    axes[0].set_ylabel("ms")
    axes[0].set_xscale("log", base=2)
    axes[0].legend(fontsize=8)
    axes[0].set_title(in_(_("time to first token"), lang), fontsize=10)
    axes[1].errorbar(L, *_med_err([r.tpot_ms for r in length_rows]), fmt="o-", capsize=3, color="#b5523b")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel(in_(_("input tokens"), lang))
    axes[1].set_ylabel(in_(_("ms per output token"), lang))
    axes[1].set_title(in_(_("decode latency (TPOT, alone)"), lang), fontsize=10)
    c = [r.concurrency for r in conc_rows]
    thr, err = _med_err([r.output_throughput for r in conc_rows])
    axes[2].errorbar(c, thr, err, fmt="o-", capsize=3, label=in_(_("measured (median of runs)"), lang))
    axes[2].plot(c, [thr[0] * n for n in c], ":", color="gray", label=in_(_("linear from concurrency 1"), lang))
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel(in_(_("concurrent requests"), lang))
    axes[2].set_ylabel(in_(_("output tokens/s"), lang))
    axes[2].legend(fontsize=8)
    axes[2].set_title(in_(_("throughput scaling"), lang), fontsize=10)
    fig.suptitle(in_(title, lang), fontsize=11)
    fig.tight_layout()
    return fig


@in_every_language
def greedy_agreement(rows, title: str, lang: str = "en"):
    """Per prompt: 20-token match rate, and where the sequences first diverge."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.4))
    names = [r.prompt[:28] + ("…" if len(r.prompt) > 28 else "") for r in rows]
    rates = [100 * r.match_rate for r in rows]
    bars = ax.barh(names, rates, color="#3a6ea5")
    for b, r in zip(bars, rows):
        label = _("identical") if r.first_divergence is None else _("diverges at token {token}",
                                                                     token=r.first_divergence)
        ax.text(min(b.get_width() + 1, 75), b.get_y() + b.get_height() / 2, in_(label, lang), va="center",
                fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel(in_(_("position-wise match of the greedy tokens (%)"), lang))
    ax.invert_yaxis()
    ax.set_title(in_(title, lang), fontsize=11)
    fig.tight_layout()
    return fig


@in_every_language
def tuning(section, title: str, lang: str = "en"):
    """TPOT at concurrency 1 (median, IQR) and roofline fraction per configuration."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.4))
    names = [in_(r.name, lang) for r in section.rows]
    med, err = _med_err([r.tpot_ms for r in section.rows])
    a.barh(names, med, xerr=err, color="#3a6ea5", capsize=3)
    a.set_xlabel(in_(_("TPOT at concurrency 1 (ms, median and IQR)"), lang))
    a.invert_yaxis()
    frac = [100 * (r.fraction or 0) for r in section.rows]
    b.barh(names, frac, color="#b5523b")
    b.axvline(100, color="k", lw=0.8)
    b.set_xlabel(in_(_("fraction of the measured bandwidth roofline (%)"), lang))
    b.invert_yaxis()
    fig.suptitle(in_(title, lang), fontsize=11)
    fig.tight_layout()
    return fig
