"""Engine-vs-reference agreement on the serving engine itself.

The server runs with ``--max-logprobs -1 --logprobs-mode raw_logits``; a
completion request for one token whose ``logprobs`` is the vocabulary size then returns the raw
logits of the whole vocabulary at the prompt's last position.  The vocabulary size, not -1: vLLM 0.23.0 to
0.27.1 (the vLLM of vllm-ascend v0.23.0, v0.25.1rc1 and main) refuse ``logprobs: -1`` with HTTP 400
("`logprobs` must be a positive value.", ``CompletionRequest.check_logprobs`` in
``vllm/entrypoints/openai/completion/protocol.py``); only 0.32.0 accepts it.  ``--max-logprobs -1`` lets a
request ask for up to the model's vocabulary size (``SamplingParams`` reads -1 as ``get_vocab_size()``) in
each of them; tests/test_vllm_releases.py sends every request body through each release's own classes.  The same
token ids go through the fp32 CPU reference, and :mod:`metrics` compares them.

vllm-ascend ignores ``--logprobs-mode raw_logits`` and returns log-probabilities;
every comparison detects the form the engine returned (:func:`metrics.logits_form`)
and compares like with like, and the reports record it (``compared_as``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import metrics, reference
from ..inputs.accuracy_spec import LogitsCheck
from ..core.threads import beside
from ..core.errors import TutorialError
from ..engine.server import VLLMServer
from ..core.messages import N_
from ..core.tables import Verdict
from ..inputs.weights import STANDIN_VERDICT

# Server flags that make full-vocabulary logits available.
RAW_LOGITS_FLAGS = ["--max-logprobs", "-1", "--logprobs-mode", "raw_logits"]
# The names LogitsReport.verdict gives its checks, marked for the message catalog here (not in the function,
# whose source is part of checks.controls.check_digest): stored in English, translated where shown (Verdict).
VERDICT_METRICS = (N_("normalized MSE"), N_("top-1 agreement"), N_("splits at decisive positions"),
                   N_("near-tie splits with the error within the bound"),
                   N_("near-tie splits with the pair error within the bound"), N_("near-tie splits per judged position"),
                   N_("top-1 agreement, excused near-ties counted as agreeing"))


def engine_last_logits(server: VLLMServer, model: str, ids: list[int], vocab_size: int) -> np.ndarray:
    """The engine's full-vocabulary vector for the next token after ``ids``: raw logits, or
    log-probabilities where the backend ignores ``--logprobs-mode`` (tell with
    :func:`metrics.logits_form`)."""
    r = server.post("/v1/completions", {
        "model": model, "prompt": ids, "max_tokens": 1, "temperature": 0.0,
        "logprobs": vocab_size, "return_tokens_as_token_ids": True,
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


def one_form(forms: list[str]) -> str:
    """The single form every vector of one comparison came in (a mix means a broken engine reply)."""
    kinds = sorted(set(forms))
    if len(kinds) != 1:
        raise TutorialError(f"the engine returned a mix of raw logits and log-probabilities ({forms}); "
                            "cannot compare them with one definition")
    return kinds[0]


@dataclass
class LogitsReport:
    rows: list[dict]
    thresholds: dict
    errors: np.ndarray = field(repr=False)
    sample: tuple[np.ndarray, np.ndarray] = field(repr=False)
    real_weights: bool = False
    rule: metrics.SplitRule | None = None  # the card's split rule (accuracy.splits); None: no split is excused
    compared_as: str = "logits"  # the engine's form: "logits" or "logprobs" (metrics.COMPARED_AS says it in words)

    @property
    def summary(self) -> dict:
        m = lambda k: float(np.mean([r[k] for r in self.rows]))  # noqa: E731
        d = metrics.decisive_top1(self.rows, self.rule)
        return {"nmse_pct": m("nmse_pct"), "cosine": m("cosine"), "top1_pct": d["top1_pct"], "top1_ties": d["ties"],
                "top1_strict_pct": d["top1_strict_pct"], **metrics.split_counts(d["flip_kinds"]),
                "top5_pct": 100 * m("top5_overlap"), "max_abs_err": max(r["max_abs_err"] for r in self.rows),
                "mean_abs_err": m("mean_abs_err"), "kl_nats": m("kl_nats"), "prompts": len(self.rows),
                "decisive_prompts": d["decisive_positions"], "top1_decisive_pct": d["top1_decisive_pct"],
                "flips_at_decisive": d["flips_at_decisive"], "compared_as": self.compared_as}

    def verdict(self, reported: dict | None = None) -> Verdict:
        s = self.summary
        t = self.thresholds
        checks = [
            ("normalized MSE", f"{s['nmse_pct']:.4f} %", f"< {t['nmse_pct_max']} %", s["nmse_pct"] < t["nmse_pct_max"]),
            ("top-1 agreement, excused near-ties counted as agreeing",
             f"{s['top1_pct']:.1f} % ({s['top1_strict_pct']:.1f} % strict)", f">= {t['top1_pct_min']} %",
             s["top1_pct"] >= t["top1_pct_min"]),
            *metrics.split_checks(metrics.decisive_top1(self.rows, self.rule)["flip_kinds"], self.rule, len(self.rows)),
        ]
        return Verdict(checks, "" if self.real_weights else STANDIN_VERDICT)


def logits_agreement(server: VLLMServer, model: str, weights_path: Path, check: LogitsCheck, vocab_size: int,
                     real_weights: bool, rule: metrics.SplitRule | None = None) -> LogitsReport:
    """Each prompt's last-position vector from the engine against the reference, in one form.

    Rows: ``{"prompt", "num_tokens", **metrics.compare_logits(...)}``; ``errors`` and ``sample``
    are in the compared form (engine - reference)."""
    rows, errs, sample = [], [], None
    prompt_ids = [reference.tokenize(weights_path, prompt) for prompt in check.prompts]
    with beside(1) as ex:  # the engine answers while the reference loads and runs
        pending = [ex.submit(engine_last_logits, server, model, ids, vocab_size) for ids in prompt_ids]
        refs = [reference.last_logits(weights_path, ids)[:vocab_size] for ids in prompt_ids]
        engs = [f.result() for f in pending]
    for prompt, ids, eng, ref in zip(check.prompts, prompt_ids, engs, refs):
        row = {"prompt": prompt, "num_tokens": len(ids), **metrics.compare_logits(eng, ref)}
        rows.append(row)
        x, r = metrics.comparable(eng, ref, row["compared_as"])
        errs.append((x - r).astype(np.float32))
        if sample is None:
            sample = (x.astype(np.float32), r.astype(np.float32))
    form = one_form([r["compared_as"] for r in rows])
    return LogitsReport(rows, check.thresholds.model_dump(), np.concatenate(errs), sample, real_weights, rule, form)
