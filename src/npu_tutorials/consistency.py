"""Engine-vs-reference consistency beyond one position: every position of a text,
greedy continuations, and text-level agreement.

All engine calls go through the serving engine (completions endpoint with
token-id prompts, so both sides see identical input).
"""

from __future__ import annotations

import difflib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from . import metrics, reference
from .accuracy import engine_last_logits
from .server import VLLMServer
from .tables import Table, Verdict, fmt


def engine_greedy(server: VLLMServer, model: str, ids: list[int], n: int, stop_ids: list[int] | None = None) -> list[int]:
    """Greedy continuation of ``ids`` (``n`` tokens, or up to a stop token, which is kept)."""
    body = {"model": model, "prompt": ids, "max_tokens": n, "temperature": 0.0, "return_token_ids": True,
            "skip_special_tokens": False}
    body.update({"stop_token_ids": stop_ids} if stop_ids else {"ignore_eos": True})
    r = server.post("/v1/completions", body)
    return list(r["choices"][0]["token_ids"])


def parallel(fn, items, workers: int = 8):
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(fn, items))


# -- one forward pass over a fixed text -------------------------------------------------
@dataclass
class ConsistencyReport:
    num_tokens: int
    top1_pct: float
    ppl_engine: float
    ppl_reference: float
    cosine: float
    kl_nats: float
    positions: list[int]
    per_position_logprob_diff: list[float] = field(repr=False)
    thresholds: dict = field(default_factory=dict)
    real_weights: bool = False

    @property
    def ppl_rel_diff_pct(self) -> float:
        return 100 * abs(self.ppl_engine - self.ppl_reference) / self.ppl_reference

    def to_dict(self) -> dict:
        return {"num_tokens": self.num_tokens, "top1_pct": self.top1_pct, "ppl_engine": self.ppl_engine,
                "ppl_reference": self.ppl_reference, "ppl_rel_diff_pct": self.ppl_rel_diff_pct,
                "cosine": self.cosine, "kl_nats": self.kl_nats, "positions": len(self.positions),
                "thresholds": self.thresholds, "passed": self.verdict().passed}

    def verdict(self) -> Verdict:
        t = self.thresholds
        checks = [
            ("top-1 agreement, all positions", f"{self.top1_pct:.2f} %", f"> {t['top1_pct_min']} %",
             self.top1_pct > t["top1_pct_min"]),
            ("perplexity relative difference", f"{self.ppl_rel_diff_pct:.4f} %", f"< {t['ppl_rel_diff_pct_max']} %",
             self.ppl_rel_diff_pct < t["ppl_rel_diff_pct_max"]),
            ("logits cosine (full vocabulary)", fmt(self.cosine, 7), f"> {t['cosine_min']}", self.cosine > t["cosine_min"]),
            ("KL divergence (nats)", fmt(self.kl_nats), f"< {t['kl_max']}", self.kl_nats < t["kl_max"]),
        ]
        caveat = "" if self.real_weights else (
            "stand-in (random) weights: near-uniform next-token distributions make ties, and so top-1 flips, "
            "far likelier than with trained weights; the figures measure the engine's arithmetic only.")
        return Verdict(checks, caveat)


def forward_consistency(server: VLLMServer, model: str, ref_path, check, vocab_size: int,
                        real_weights: bool) -> ConsistencyReport:
    """Every position of ``check.text``: the engine's full-vocabulary logits for each prefix
    (one request per position; the engine returns the whole vocabulary only for the position
    after a prompt) against the reference's single forward pass."""
    ids = reference.tokenize(ref_path, check.text)
    ends = list(range(1, len(ids)))  # predict ids[end] from ids[:end]
    eng = parallel(lambda end: engine_last_logits(server, model, ids[:end], vocab_size), ends, workers=4)
    ref_logits = reference.all_logits(ref_path, ids)[:, :vocab_size]
    top1, cos, kl, eng_lp, ref_lp = [], [], [], [], []
    for end, e in zip(ends, eng):
        r = ref_logits[end - 1]
        top1.append(int(np.argmax(e)) == int(np.argmax(r)))
        cos.append(metrics.cosine(e, r))
        kl.append(metrics.kl_divergence(e, r))
        eng_lp.append(metrics.log_softmax(e)[ids[end]])
        ref_lp.append(metrics.log_softmax(r)[ids[end]])
    eng_lp, ref_lp = np.array(eng_lp), np.array(ref_lp)
    return ConsistencyReport(
        num_tokens=len(ids), top1_pct=100 * float(np.mean(top1)), ppl_engine=float(np.exp(-eng_lp.mean())),
        ppl_reference=float(np.exp(-ref_lp.mean())), cosine=float(np.mean(cos)), kl_nats=float(np.mean(kl)),
        positions=ends, per_position_logprob_diff=(eng_lp - ref_lp).tolist(),
        thresholds=check.thresholds.model_dump(), real_weights=real_weights)


# -- greedy sequences ------------------------------------------------------------------
def similarity(a: str, b: str) -> float:
    """Character-level similarity ratio (difflib), 1.0 for identical texts."""
    return difflib.SequenceMatcher(None, a, b).ratio()


@dataclass
class TextRow:
    prompt: str
    engine_ids: list[int]
    reference_ids: list[int]
    engine_text: str
    reference_text: str
    first_divergence: int | None
    margin_at_divergence: float | None = None

    @property
    def exact(self) -> bool:
        return self.engine_ids == self.reference_ids

    @property
    def similarity(self) -> float:
        return similarity(self.engine_text, self.reference_text)

    def to_dict(self) -> dict:
        return {"prompt": self.prompt, "engine_text": self.engine_text, "reference_text": self.reference_text,
                "engine_ids": self.engine_ids, "reference_ids": self.reference_ids, "exact": self.exact,
                "first_divergence": self.first_divergence, "similarity": self.similarity,
                "margin_at_divergence": self.margin_at_divergence,
                **metrics.sequence_match(self.engine_ids, self.reference_ids)}


def text_consistency(server: VLLMServer, model: str, ref_path, prompts: list[str], n: int, *, chat: bool,
                     stop_ids: list[int] | None = None) -> list[TextRow]:
    """Greedy outputs of engine and reference for each prompt, side by side.

    Where the two diverge, the reference's gap between its two best logits at
    that position says how close a tie the engine's rounding broke.
    """
    prompt_ids = [reference.chat_ids(ref_path, p) if chat else reference.tokenize(ref_path, p) for p in prompts]
    eng = parallel(lambda ids: engine_greedy(server, model, ids, n, stop_ids), prompt_ids)
    rows = []
    for p, ids, e in zip(prompts, prompt_ids, eng):
        r = reference.greedy(ref_path, ids, n, stop_ids)
        m = metrics.sequence_match(e, r)
        margin = None
        if m["first_divergence"] is not None and m["first_divergence"] < len(r):
            k = m["first_divergence"]
            logits = reference.last_logits(ref_path, ids + r[:k])
            margin = metrics.top2_margin(logits)
        rows.append(TextRow(p, e, r, reference.decode(ref_path, e), reference.decode(ref_path, r),
                            m["first_divergence"], margin))
    return rows


def text_table(rows: list[TextRow], real_weights: bool, dtype: str = "bfloat16") -> Table:
    t = Table(["prompt", f"engine ({dtype})", "reference (fp32 CPU)", "exact", "first diverging token",
               "similarity", "ref. top-1/top-2 gap there"],
              [[r.prompt, r.engine_text, r.reference_text, r.exact,
                "–" if r.first_divergence is None else r.first_divergence, r.similarity,
                r.margin_at_divergence] for r in rows],
              caption="Greedy outputs, engine vs reference")
    if not real_weights:
        t.note = "Stand-in weights: both columns are random text; what matters is whether they agree, and where not, why."
    return t
