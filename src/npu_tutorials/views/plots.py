"""Matplotlib figures for the tutorial pages, drawn from a results document's sections.

Each language's pass draws a page's figures from its document (:mod:`npu_tutorials.site.render`), every word
through ``_("...")`` in that pass's language.  Chinese glyphs come from Noto Sans CJK SC (the ``mplfonts`` wheel), a fallback behind DejaVu Sans, so Latin text looks the same in
both languages.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from importlib.resources import files

from ..core.messages import _
from . import figure_data as data

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


def with_fonts(fn):
    """Decorate a plot function: draw it with the site's fonts."""

    @functools.wraps(fn)
    def draw(*args, **kwargs):
        plt = _plt()
        from matplotlib.text import Text as MplText

        family = font_family()
        with plt.rc_context({"font.family": family}), warnings.catch_warnings():
            if CJK_FAMILY not in family:  # warned once already
                warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            fig = fn(*args, **kwargs)
            for text in fig.findobj(MplText):  # the fonts stay when the figure is saved after this context
                text.set_fontfamily(family)
        return fig

    return draw


@with_fonts
def latency_distributions(bench, title: str):
    """Per-request TTFT, TPOT and all inter-token latencies of one benchmark run (a Benchmark section)."""
    plt = _plt()
    ttft = np.asarray(bench.ttft_ms, dtype=float)
    tpot = np.asarray(bench.tpot_ms, dtype=float)
    itl = np.asarray(bench.itl_ms, dtype=float)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    panels = list(zip((_("TTFT per request"), _("TPOT per request"), _("inter-token latency (all tokens)")),
                      (ttft, tpot, itl)))
    for ax, (name, values) in zip(axes, panels):
        if values.size:
            ax.hist(values, bins=min(30, max(5, values.size // 2)), color="#3a6ea5")
            ax.axvline(np.median(values), color="k", ls="--", lw=1,
                       label=_("median {value:.1f} ms", value=np.median(values)))
            ax.legend(fontsize=8, loc="upper right")  # "best" searches the histogram: slow, and it warns
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("ms")
    axes[0].set_ylabel(_("count"))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return data.attach(fig, data.latency_distributions(panels))


@with_fonts
def logits_error(section, title: str):
    """Histogram of engine - reference over every vocabulary entry, and engine vs reference (a LogitsAgreement)."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    h = section.error_histogram
    edges, counts = np.asarray(h.edges), np.asarray(h.counts)
    a.stairs(np.maximum(counts, 0.5), edges, fill=True, color="#b5523b")
    a.set_yscale("log")
    a.set_xlabel(_("engine - reference (log-probabilities)") if "log" in section.compared_form
                     else _("engine - reference (logits)"))
    a.set_ylabel(_("count (log)"))
    a.set_title(hist := _("error over {values:,} values ({prompts} prompts)", values=int(counts.sum()),
                              prompts=len(section.rows)), fontsize=10)
    eng, ref = np.asarray(section.scatter_engine), np.asarray(section.scatter_reference)
    b.scatter(ref, eng, s=1, alpha=0.4, color="#3a6ea5")
    lo, hi = float(min(ref.min(), eng.min())), float(max(ref.max(), eng.max()))
    b.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    b.set_xlabel(_("reference (fp32, CPU)"))
    b.set_ylabel(_("engine"))
    b.set_title(scatter := _("first prompt, {tokens:,} evenly spaced tokens", tokens=ref.size), fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return data.attach(fig, data.logits_error(section, hist, scatter))


def _med_err(stats):
    """Medians and asymmetric interquartile error bars of a list of Stat."""
    med = np.array([s.median for s in stats])
    return med, np.array([med - [s.q1 for s in stats], [s.q3 for s in stats] - med])


@with_fonts
def sweeps(length_rows, conc_rows, title: str):
    """Prefill / decode / TTFT against input length, and throughput against concurrency (medians, IQR bars)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    L = [r.input_len for r in length_rows]
    axes[0].errorbar(L, *_med_err([r.prefill_ms for r in length_rows]), fmt="o-", capsize=3,
                     label=_("prefill (TTFT, alone)"))
    axes[0].errorbar(L, *_med_err([r.ttft_concurrent_ms for r in length_rows]), fmt="s--", capsize=3,
                     label=_("TTFT, {requests} at once (chunked prefill)",
                                 requests=length_rows[0].concurrent_requests))
    axes[0].set_xlabel(_("input tokens"))
    axes[0].set_ylabel("ms")
    axes[0].set_xscale("log", base=2)
    axes[0].legend(fontsize=8)
    axes[0].set_title(_("time to first token"), fontsize=10)
    axes[1].errorbar(L, *_med_err([r.tpot_ms for r in length_rows]), fmt="o-", capsize=3, color="#b5523b")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel(_("input tokens"))
    axes[1].set_ylabel(_("ms per output token"))
    axes[1].set_title(_("decode latency (TPOT, alone)"), fontsize=10)
    c = [r.concurrency for r in conc_rows]
    thr, err = _med_err([r.output_throughput for r in conc_rows])
    axes[2].errorbar(c, thr, err, fmt="o-", capsize=3, label=_("measured (median of runs)"))
    axes[2].plot(c, [thr[0] * n for n in c], ":", color="gray", label=_("linear from concurrency 1"))
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel(_("concurrent requests"))
    axes[2].set_ylabel(_("output tokens/s"))
    axes[2].legend(fontsize=8)
    axes[2].set_title(_("throughput scaling"), fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    drawn = [(axes[0], 0, L, [r.prefill_ms for r in length_rows]), (axes[0], 1, L, [r.ttft_concurrent_ms for r in length_rows]),
             (axes[1], None, L, [r.tpot_ms for r in length_rows]), (axes[2], 0, c, [r.output_throughput for r in conc_rows])]
    rows = [(ax.get_title(), "" if i is None else ax.get_legend_handles_labels()[1][i], ax.get_xlabel(), x, st)
            for ax, i, xs, stats in drawn for x, st in zip(xs, stats)]
    return data.attach(fig, data.series(rows))


@with_fonts
def greedy_agreement(rows, title: str):
    """Per prompt: 20-token match rate, and where the sequences first diverge."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.4))
    names = [r.prompt[:28] + ("…" if len(r.prompt) > 28 else "") for r in rows]
    rates = [100 * r.match_rate for r in rows]
    bars = ax.barh(names, rates, color="#3a6ea5")
    for b, r in zip(bars, rows):
        label = _("identical") if r.first_divergence is None else _("diverges at token {token}",
                                                                     token=r.first_divergence)
        ax.text(min(b.get_width() + 1, 75), b.get_y() + b.get_height() / 2, label, va="center",
                fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel(_("position-wise match of the greedy tokens (%)"))
    ax.invert_yaxis()
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return data.attach(fig, data.greedy_agreement(rows))


@with_fonts
def tuning(section, title: str):
    """TPOT at concurrency 1 (median, IQR) and roofline fraction per configuration."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.4))
    names = [r.name for r in section.rows]
    med, err = _med_err([r.tpot_ms for r in section.rows])
    a.barh(names, med, xerr=err, color="#3a6ea5", capsize=3)
    a.set_xlabel(_("TPOT at concurrency 1 (ms, median and IQR)"))
    a.invert_yaxis()
    frac = [100 * (r.fraction or 0) for r in section.rows]
    b.barh(names, frac, color="#b5523b")
    b.axvline(100, color="k", lw=0.8)
    b.set_xlabel(_("fraction of the measured bandwidth roofline (%)"))
    b.invert_yaxis()
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return data.attach(fig, data.tuning(section))


@with_fonts
def thumbnail(bench=None, sweep=None):
    """A small picture for the landing page's card: a benchmark's per-request TPOT distribution, or, without
    one, a concurrency sweep's throughput against concurrency."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.2, 1.6))
    if bench is not None:
        tpot = np.asarray(bench.tpot_ms, dtype=float)
        if tpot.size:
            ax.hist(tpot, bins=min(20, max(5, tpot.size // 2)), color="#3a6ea5")
            ax.axvline(np.median(tpot), color="k", ls="--", lw=1)
        ax.set_xlabel(_("TPOT per request (ms)"), fontsize=8)
        ax.set_yticks([])
    else:
        ax.plot([p.concurrency for p in sweep], [p.output_throughput.median for p in sweep], "o-", color="#3a6ea5",
                ms=3)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("concurrency"), fontsize=8)
        ax.set_ylabel(_("tokens/s"), fontsize=8)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    if bench is not None:
        return data.attach(fig, data.latency_distributions([(_("TPOT per request"), bench.tpot_ms)]))
    return data.attach(fig, data.series([("", "", _("concurrency"), p.concurrency, p.output_throughput)
                                         for p in sweep]))


@with_fonts
def models_compared(rows, title: str):
    """Throughput and median TPOT of every model on every hardware: ``rows`` of (model, hardware, throughput
    Stat or None, TPOT Stat or None); bars at the medians, whiskers over the interquartile range."""
    plt = _plt()
    models = list(dict.fromkeys(r[0] for r in rows))
    hardware = list(dict.fromkeys(r[1] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.6 + 0.55 * max(1, len(models)) * max(1, len(hardware)) ** 0.5))
    height = 0.8 / max(1, len(hardware))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, i, label in ((axes[0], 2, _("output throughput (tokens/s)")), (axes[1], 3, _("median TPOT (ms)"))):
        for j, hw in enumerate(hardware):
            ys, meds, lo, hi = [], [], [], []
            for r in rows:
                if r[1] == hw and r[i] is not None:
                    s = r[i]
                    ys.append(models.index(r[0]) + (j - (len(hardware) - 1) / 2) * height)
                    meds.append(s.median)
                    lo.append(s.median - s.q1)
                    hi.append(s.q3 - s.median)
            if ys:
                ax.barh(ys, meds, height=height * 0.9, xerr=[lo, hi], color=colors[j % len(colors)], label=hw,
                        error_kw={"lw": 0.8, "capsize": 2})
        ax.set_yticks(range(len(models)), models if ax is axes[0] else [""] * len(models))
        ax.invert_yaxis()
        ax.set_xlabel(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if not handles:
        handles, labels = axes[1].get_legend_handles_labels()
    below = 0.25 * len(labels) + 0.2  # inches for the legend, one line per hardware, under the bars
    fig.set_figheight(fig.get_figheight() + below)
    fig.legend(handles, labels, loc="lower center", fontsize=7, ncol=1, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, below / fig.get_figheight(), 1, 1))
    return data.attach(fig, data.models_compared(rows))


@with_fonts
def paired_forest(ratios, title: str, labels: list[str] | None = None):
    """Paired ratios B/A (:class:`~npu_tutorials.record.schema_base.PairedRatio`): every round's ratio (dots), their
    median (bar) and the interval (line), around 1; grey where no change is called.  ``labels``: the rows' names
    (default: each figure's label)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.7 + 0.55 * max(1, len(ratios))))
    for i, p in enumerate(ratios):
        colour = "#888888" if p.verdict == "no measurable change" else (
            "#2e7d32" if p.verdict == "B better" else "#b5523b")
        ax.plot([p.low, p.high], [i, i], color=colour, lw=2.5)
        ax.plot([p.median], [i], marker="|", markersize=16, color=colour)
        ax.scatter(p.ratios, [i] * len(p.ratios), s=12, color="k", alpha=0.5, zorder=3)
    ax.axvline(1.0, color="k", lw=0.8)
    labels = labels or [_(p.label) for p in ratios]
    ax.set_yticks(range(len(ratios)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(_("B/A per round (dots), median (bar) and interval (line)"))
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return data.attach(fig, data.paired_forest(ratios, labels))


@with_fonts
def history(series, figures, title: str):
    """Headline figures across runs, one panel per figure (``figures``: (key, label) pairs): ``series`` of (machine
    kind, points), each point (date text, {key: Stat}, commit, versions text[, its document's identifier]) in date order.  The runs stand in date
    order along the axis, one slot each; a median per run with whiskers over its interquartile range and its commit
    beside it; where the versions change from the kind's run before, a dashed line with the new versions."""
    plt = _plt()
    slots = sorted({(d, c) for _kind, points in series for d, _f, c, *_rest in points})
    fig, axes = plt.subplots(len(figures), 1, figsize=(9, 1.2 + 2.1 * len(figures)), sharex=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, (key, label) in enumerate(figures):
        ax = axes[row][0]
        for j, (kind, points) in enumerate(series):
            pts = [(slots.index((d, c)), f[key], c, v) for d, f, c, v, *_rest in points if key in f]
            if not pts:
                continue
            color = colors[j % len(colors)]
            xs, stats = [x for x, *_r in pts], [st for _x, st, *_r in pts]
            ax.errorbar(xs, [st.median for st in stats], yerr=[[st.median - st.q1 for st in stats],
                                                                [st.q3 - st.median for st in stats]],
                        marker="o", ms=4, lw=1, capsize=3, color=color, label=kind if row == 0 else None)
            for x, st, commit, _v in pts:
                ax.annotate(commit, (x, st.median), textcoords="offset points", xytext=(5, 3), fontsize=6)
            for (_x0, _s0, _c0, before), (x, _s, _c, now) in zip(pts, pts[1:]):
                if now != before:
                    ax.axvline(x - 0.5, color=color, ls="--", lw=0.8, alpha=0.7)
                    if row == 0:
                        ax.annotate(now, (x - 0.5, 1), xycoords=("data", "axes fraction"), xytext=(2, -2),
                                    textcoords="offset points", fontsize=6, va="top", rotation=90)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.margins(x=0.15)
    axes[-1][0].set_xticks(range(len(slots)), [d for d, _c in slots], fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        axes[0][0].legend(handles, labels, fontsize=7, frameon=False, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return data.attach(fig, data.history(series, figures))
