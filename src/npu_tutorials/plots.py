"""Matplotlib figures for the tutorial pages (sphinx-gallery scrapes open figures)."""

from __future__ import annotations

import numpy as np


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:
            pass
    import matplotlib.pyplot as plt

    return plt


def latency_distributions(bench, title: str):
    """Per-request TTFT, TPOT and all inter-token latencies of one benchmark run."""
    plt = _plt()
    d = bench.data
    ttft = 1000 * np.asarray(d.get("ttfts", []), dtype=float)
    tpot = np.asarray(bench.per_request_tpot_ms(), dtype=float)
    itl = 1000 * np.asarray([x for req in d.get("itls", []) for x in req], dtype=float)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, values, name in zip(axes, (ttft, tpot, itl), ("TTFT per request", "TPOT per request",
                                                            "inter-token latency (all tokens)")):
        if values.size:
            ax.hist(values, bins=min(30, max(5, values.size // 2)), color="#3a6ea5")
            ax.axvline(np.median(values), color="k", ls="--", lw=1, label=f"median {np.median(values):.1f} ms")
            ax.legend(fontsize=8)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("ms")
    axes[0].set_ylabel("count")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def logits_error(report, title: str):
    """Histogram of engine - reference over every vocabulary entry, and engine vs reference."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    a.hist(report.errors, bins=120, color="#b5523b", log=True)
    a.set_xlabel("engine logit - reference logit")
    a.set_ylabel("count (log)")
    a.set_title(f"error over {report.errors.size:,} logits ({len(report.rows)} prompts)", fontsize=10)
    eng, ref = report.sample
    step = max(1, ref.size // 20000)
    b.scatter(ref[::step], eng[::step], s=1, alpha=0.4, color="#3a6ea5")
    lo, hi = float(min(ref.min(), eng.min())), float(max(ref.max(), eng.max()))
    b.plot([lo, hi], [lo, hi], color="k", lw=0.8)
    b.set_xlabel("reference logit (fp32, CPU)")
    b.set_ylabel("engine logit")
    b.set_title(f"first prompt, every {step}th token", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def sweeps(length_rows: list[dict], conc_rows: list[dict], title: str):
    """Prefill / decode / TTFT against input length, and throughput against concurrency."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    L = [r["input_len"] for r in length_rows]
    axes[0].plot(L, [r["prefill_ms"] for r in length_rows], "o-", label="prefill (TTFT, alone)")
    axes[0].plot(L, [r["ttft_concurrent_ms"] for r in length_rows], "s--",
                 label=f"TTFT, {length_rows[0]['concurrent_requests']} at once (chunked prefill)")
    axes[0].set_xlabel("input tokens")
    axes[0].set_ylabel("ms")
    axes[0].set_xscale("log", base=2)
    axes[0].legend(fontsize=8)
    axes[0].set_title("time to first token", fontsize=10)
    axes[1].plot(L, [r["tpot_ms"] for r in length_rows], "o-", color="#b5523b")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("input tokens")
    axes[1].set_ylabel("ms per output token")
    axes[1].set_title("decode latency (TPOT, alone)", fontsize=10)
    c = [r["concurrency"] for r in conc_rows]
    thr = [r["output_throughput"] for r in conc_rows]
    axes[2].plot(c, thr, "o-", label="measured")
    axes[2].plot(c, [thr[0] * n for n in c], ":", color="gray", label="linear from concurrency 1")
    axes[2].set_xscale("log", base=2)
    axes[2].set_xlabel("concurrent requests")
    axes[2].set_ylabel("output tokens/s")
    axes[2].legend(fontsize=8)
    axes[2].set_title("throughput scaling", fontsize=10)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def greedy_agreement(rows, title: str):
    """Per prompt: 20-token match rate, and where the sequences first diverge."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 3.4))
    names = [r.prompt[:28] + ("…" if len(r.prompt) > 28 else "") for r in rows]
    rates = [100 * r.to_dict()["match_rate"] for r in rows]
    bars = ax.barh(names, rates, color="#3a6ea5")
    for b, r in zip(bars, rows):
        label = "identical" if r.first_divergence is None else f"diverges at token {r.first_divergence}"
        ax.text(min(b.get_width() + 1, 75), b.get_y() + b.get_height() / 2, label, va="center", fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("position-wise match of the greedy tokens (%)")
    ax.invert_yaxis()
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig
