"""Engine-vs-reference agreement on the serving engine itself.

The server runs with ``--max-logprobs -1 --logprobs-mode raw_logits``; a
completion request for one token with ``logprobs=-1`` then returns the raw
logits of the whole vocabulary at the prompt's last position.  The same
token ids go through the fp32 CPU reference, and :mod:`metrics` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import metrics, reference
from .cards import LogitsCheck
from .errors import TutorialError
from .server import VLLMServer
from .tables import Table, Verdict, fmt

# Server flags that make full-vocabulary logits available.
RAW_LOGITS_FLAGS = ["--max-logprobs", "-1", "--logprobs-mode", "raw_logits"]


def engine_last_logits(server: VLLMServer, model: str, ids: list[int], vocab_size: int) -> np.ndarray:
    """Raw logits over the whole vocabulary for the next token after ``ids``."""
    r = server.post("/v1/completions", {
        "model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0,
        "logprobs": -1, "return_tokens_as_token_ids": True,
    })
    top = r["choices"][0]["logprobs"]["top_logprobs"][0]
    if len(top) != vocab_size:
        raise TutorialError(f"the engine returned {len(top)} logits, expected {vocab_size}: "
                            "start the server with --max-logprobs -1 --logprobs-mode raw_logits")
    out = np.full(vocab_size, np.nan)
    for key, value in top.items():
        out[int(key.removeprefix("token_id:"))] = value
    if np.isnan(out).any():
        raise TutorialError("the engine's logits do not cover every token id")
    return out


@dataclass
class LogitsReport:
    rows: list[dict]
    thresholds: dict
    errors: np.ndarray = field(repr=False)
    sample: tuple[np.ndarray, np.ndarray] = field(repr=False)
    real_weights: bool = False

    @property
    def summary(self) -> dict[str, float]:
        m = lambda k: float(np.mean([r[k] for r in self.rows]))  # noqa: E731
        return {"nmse_pct": m("nmse_pct"), "cosine": m("cosine"), "top1_pct": 100 * m("top1_match"),
                "top5_pct": 100 * m("top5_overlap"), "max_abs_err": max(r["max_abs_err"] for r in self.rows),
                "mean_abs_err": m("mean_abs_err"), "kl_nats": m("kl_nats"), "prompts": len(self.rows)}

    def table(self) -> Table:
        cols = ["prompt", "tokens", "normalized MSE (%)", "cosine", "top-1", "top-5 overlap",
                "max |err|", "mean |err|", "KL (nats)", "ref. top-1/top-2 gap"]
        rows = [[r["prompt"], r["num_tokens"], r["nmse_pct"], fmt(r["cosine"], 6), "match" if r["top1_match"] else
                 "differs", f"{100 * r['top5_overlap']:.0f} %", r["max_abs_err"], r["mean_abs_err"], r["kl_nats"],
                 r["reference_top2_margin"]] for r in self.rows]
        flips = [r for r in self.rows if not r["top1_match"]]
        note = ""
        if flips:
            note = (f"{len(flips)} prompt(s) changed their top-1 token; there the reference's gap between its two "
                    f"best tokens ({', '.join(fmt(r['reference_top2_margin']) for r in flips)}) is smaller than the "
                    f"largest logit error ({', '.join(fmt(r['max_abs_err']) for r in flips)}): a near-tie that "
                    "the engine's rounding can flip.")
        return Table(cols, rows, caption="Last-position logits, engine vs fp32 CPU reference, whole vocabulary",
                     note=note)

    def verdict(self, reported: dict | None = None) -> Verdict:
        s = self.summary
        t = self.thresholds
        checks = [
            ("normalized MSE", f"{s['nmse_pct']:.4f} %", f"< {t['nmse_pct_max']} %", s["nmse_pct"] < t["nmse_pct_max"]),
            ("top-1 agreement", f"{s['top1_pct']:.1f} %", f">= {t['top1_pct_min']} %", s["top1_pct"] >= t["top1_pct_min"]),
        ]
        caveat = ("" if self.real_weights else
                  "stand-in (random) weights: these figures measure how exactly the engine computes the "
                  "same network as the reference, not the quality of the model.")
        return Verdict(checks, caveat)


def logits_agreement(server: VLLMServer, model: str, weights_path: Path, check: LogitsCheck, vocab_size: int,
                     real_weights: bool) -> LogitsReport:
    rows, errs, sample = [], [], None
    for prompt in check.prompts:
        ids = reference.tokenize(weights_path, prompt)
        eng = engine_last_logits(server, model, ids, vocab_size)
        ref = reference.last_logits(weights_path, ids)[:vocab_size]
        row = {"prompt": prompt, "num_tokens": len(ids), **metrics.compare_logits(eng, ref)}
        rows.append(row)
        errs.append((eng - ref).astype(np.float32))
        if sample is None:
            sample = (eng.astype(np.float32), ref.astype(np.float32))
    return LogitsReport(rows, check.thresholds.model_dump(), np.concatenate(errs), sample, real_weights)
