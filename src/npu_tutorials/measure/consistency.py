"""Engine-vs-reference consistency beyond one position: every position of a text,
greedy continuations, and text-level agreement.

All engine calls go through the serving engine (completions endpoint with
token-id prompts, so both sides see identical input).  Every engine-vs-reference
vector comparison detects whether the engine returned raw logits or
log-probabilities and compares like with like (:func:`metrics.compare_logits`).

Verdicts: :meth:`ConsistencyReport.verdict` (card thresholds),
:func:`greedy_verdict` and :func:`text_verdict` (thresholds passed in).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import metrics, reference
from .accuracy import engine_last_logits, one_form
from ..engine.server import VLLMServer
from ..core.threads import beside
from ..core.messages import N_
from ..core.tables import Verdict, fmt
from ..inputs.weights import STANDIN_VERDICT

# The names the verdicts below give their checks, marked for the message catalog here (not in the functions,
# whose source is part of checks.controls.check_digest): stored in English, translated where shown (Verdict).
VERDICT_METRICS = (N_("top-1 agreement, all positions"), N_("perplexity relative difference"),
                   N_("logits cosine (full vocabulary)"), N_("KL divergence (nats)"), N_("first-token agreement"),
                   N_("mean match rate"), N_("identical greedy outputs"),
                   N_("top-1 agreement, all positions, excused near-ties counted as agreeing"),
                   N_("first-token agreement, excused near-ties counted as agreeing"),
                   N_("mean match rate, excused near-ties counted as matching"),
                   N_("greedy outputs identical, or parted only at an excused near-tie"))
# what a verdict's split lines are called: metrics.split_checks


def engine_greedy(server: VLLMServer, model: str, ids: list[int], n: int, stop_ids: list[int] | None = None) -> list[int]:
    """Greedy continuation of ``ids`` (``n`` tokens, or up to a stop token, which is kept)."""
    body = {"model": model, "prompt": ids, "max_tokens": n, "temperature": 0.0, "return_token_ids": True,
            "skip_special_tokens": False}
    body.update({"stop_token_ids": stop_ids} if stop_ids else {"ignore_eos": True})
    r = server.post("/v1/completions", body)
    return list(r["choices"][0]["token_ids"])


def parallel(fn, items, workers: int = 8):
    with beside(workers) as ex:
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
    rule: metrics.SplitRule | None = None  # the card's split rule (accuracy.splits); None: no split is excused
    real_weights: bool = False
    compared_as: str = "logits"
    # per position: metrics.position_error(...) plus "position" (index of the predicted token)
    per_position: list[dict] = field(default_factory=list, repr=False)

    @property
    def decisive(self) -> dict:
        """``metrics.decisive_top1`` over the positions (top-1 on decisive positions beside the plain figure)."""
        return metrics.decisive_top1(self.per_position, self.rule)

    @property
    def ppl_rel_diff_pct(self) -> float:
        return 100 * abs(self.ppl_engine - self.ppl_reference) / self.ppl_reference

    def to_dict(self) -> dict:
        return {"num_tokens": self.num_tokens, "top1_pct": self.top1_pct, "ppl_engine": self.ppl_engine,
                "ppl_reference": self.ppl_reference, "ppl_rel_diff_pct": self.ppl_rel_diff_pct,
                "cosine": self.cosine, "kl_nats": self.kl_nats, "positions": len(self.positions),
                "thresholds": self.thresholds, "passed": self.verdict().passed, "compared_as": self.compared_as,
                **{k: v for k, v in self.decisive.items() if k != "top1_pct"},
                "per_position": self.per_position}

    def verdict(self) -> Verdict:
        t = self.thresholds
        checks = [
            ("top-1 agreement, all positions, excused near-ties counted as agreeing",
             f"{self.top1_pct:.2f} % ({self.decisive['top1_strict_pct']:.2f} % strict)", f"> {t['top1_pct_min']} %",
             self.top1_pct > t["top1_pct_min"]),
            ("perplexity relative difference", f"{self.ppl_rel_diff_pct:.4f} %", f"< {t['ppl_rel_diff_pct_max']} %",
             self.ppl_rel_diff_pct < t["ppl_rel_diff_pct_max"]),
            ("logits cosine (full vocabulary)", fmt(self.cosine, 7), f"> {t['cosine_min']}", self.cosine > t["cosine_min"]),
            ("KL divergence (nats)", fmt(self.kl_nats), f"< {t['kl_max']}", self.kl_nats < t["kl_max"]),
            *metrics.split_checks(self.decisive["flip_kinds"], self.rule, len(self.per_position)),
        ]
        return Verdict(checks, _caveat(self.real_weights))


def forward_consistency(server: VLLMServer, model: str, ref_path, check, vocab_size: int,
                        real_weights: bool, rule: metrics.SplitRule | None = None) -> ConsistencyReport:
    """Every position of ``check.text``: the engine's full-vocabulary logits for each prefix
    (one request per position; the engine returns the whole vocabulary only for the position
    after a prompt) against the reference's single forward pass.  A ``check.chat`` check judges instead every
    position of the fp32 reference's greedy answer (``check.positions`` tokens, no stop) to ``check.text`` sent
    through the chat template: the positions a chat answer is generated at."""
    ids = reference.tokenize(ref_path, check.text)
    ends = list(range(1, len(ids)))  # predict ids[end] from ids[:end]
    if check.chat:
        prompt = reference.chat_ids(ref_path, check.text)
        ids = prompt + reference.greedy(ref_path, prompt, check.positions)
        ends = list(range(len(prompt), len(ids)))
    with beside(4) as ex:
        pending = [ex.submit(engine_last_logits, server, model, ids[:end], vocab_size) for end in ends]
        ref_logits = reference.all_logits(ref_path, ids)[:, :vocab_size]  # meanwhile: the reference's pass
        eng = [f.result() for f in pending]
    rows, eng_lp, ref_lp = [], [], []
    for end, e in zip(ends, eng):
        r = ref_logits[end - 1]
        rows.append(metrics.compare_logits(e, r))
        eng_lp.append(metrics.log_softmax(e)[ids[end]])  # log-softmax is the identity on log-probabilities
        ref_lp.append(metrics.log_softmax(r)[ids[end]])
    form = one_form([r["compared_as"] for r in rows])
    eng_lp, ref_lp = np.array(eng_lp), np.array(ref_lp)
    return ConsistencyReport(
        num_tokens=len(ids),
        top1_pct=metrics.decisive_top1(rows, rule)["top1_pct"], rule=rule,
        ppl_engine=float(np.exp(-eng_lp.mean())), ppl_reference=float(np.exp(-ref_lp.mean())),
        cosine=float(np.mean([r["cosine"] for r in rows])), kl_nats=float(np.mean([r["kl_nats"] for r in rows])),
        positions=ends, per_position_logprob_diff=(eng_lp - ref_lp).tolist(),
        thresholds=check.thresholds.model_dump(), real_weights=real_weights, compared_as=form,
        per_position=[{"position": end, **metrics.position_error(r)} for end, r in zip(ends, rows)])


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
    # metrics.position_error of this prompt's own engine-vs-reference vectors: at the first
    # generated position, and at the first divergence (the common prefix, where the two differ)
    error_first_token: dict | None = None
    error_at_divergence: dict | None = None

    @property
    def exact(self) -> bool:
        return self.engine_ids == self.reference_ids

    @property
    def similarity(self) -> float:
        return similarity(self.engine_text, self.reference_text)

    @property
    def first_token_same(self) -> bool:
        return self.engine_ids[:1] == self.reference_ids[:1]

    def to_dict(self) -> dict:
        return {"prompt": self.prompt, "engine_text": self.engine_text, "reference_text": self.reference_text,
                "engine_ids": self.engine_ids, "reference_ids": self.reference_ids, "exact": self.exact,
                "first_divergence": self.first_divergence, "similarity": self.similarity,
                "margin_at_divergence": self.margin_at_divergence, "first_token_same": self.first_token_same,
                "error_first_token": self.error_first_token, "error_at_divergence": self.error_at_divergence,
                **metrics.sequence_match(self.engine_ids, self.reference_ids)}


def _vocab_size(ref_path) -> int:
    return int(json.loads((Path(ref_path) / "config.json").read_text())["vocab_size"])


def text_consistency(server: VLLMServer, model: str, ref_path, prompts: list[str], n: int, *, chat: bool,
                     stop_ids: list[int] | None = None, vocab_size: int | None = None,
                     measure_errors: bool = True) -> list[TextRow]:
    """Greedy outputs of engine and reference for each prompt, side by side.

    With ``measure_errors`` (default), each row carries its own engine error: the full-vocabulary
    comparison at its first generated position and, where the sequences diverge, at the
    divergence point (engine and reference fed the same common prefix), each with the
    reference's top-1/top-2 margin beside the error, so a tie is told apart from a fault.
    ``vocab_size`` defaults to the reference checkpoint's config.
    """
    prompt_ids = [reference.chat_ids(ref_path, p) if chat else reference.tokenize(ref_path, p) for p in prompts]
    vocab = vocab_size or _vocab_size(ref_path)

    def error(engine_vector: np.ndarray, ref_row: np.ndarray) -> dict:
        return metrics.position_error(metrics.compare_logits(engine_vector, ref_row[:vocab]))

    rows = []
    with beside(8) as ex:
        greedy = [ex.submit(engine_greedy, server, model, ids, n, stop_ids) for ids in prompt_ids]
        reference.load_model(str(ref_path))  # meanwhile: the fp32 reference
        eng = [f.result() for f in greedy]
        # each prompt's first position: the engine answers while the reference checks its tokens
        firsts = [ex.submit(engine_last_logits, server, model, ids, vocab) for ids in prompt_ids] \
            if measure_errors else []
        # the reference's own greedy tokens, checked along the engine's in one pass (reference.greedy_along),
        # with its logits at every position both were fed the same prefix
        along = reference.greedy_along(ref_path, prompt_ids, eng, n, stop_ids)
        for i, (p, ids, e, (r, fed)) in enumerate(zip(prompts, prompt_ids, eng, along)):
            k = metrics.sequence_match(e, r)["first_divergence"]
            margin = first = at_div = None
            if k is not None and k < len(r):
                margin = metrics.top2_margin(fed[k])
            if measure_errors:
                first = error(firsts[i].result(), fed[0])
                if k is not None and k < len(r):
                    at_div = first if k == 0 else error(engine_last_logits(server, model, ids + r[:k], vocab), fed[k])
            rows.append(TextRow(p, e, r, reference.decode(ref_path, e), reference.decode(ref_path, r), k, margin,
                                first, at_div))
    return rows


def judged_positions(rows: list[TextRow]) -> int:
    """The positions a set of greedy rows judges: each row's up to and including its first divergence (after a
    split the two sides continue different prefixes), or all of the reference's tokens."""
    return sum(len(r.reference_ids) if r.first_divergence is None else r.first_divergence + 1 for r in rows)


def split_kinds(rows: list[TextRow], rule: metrics.SplitRule | None) -> list[str | None]:
    """Per row: None where engine and reference agree to the end, else :func:`metrics.split_kind` of its first
    divergence (a row measured without errors cannot excuse a split)."""
    return [None if r.first_divergence is None else metrics.split_kind(r.error_at_divergence, rule)
            for r in rows]


def greedy_summary(rows: list[TextRow], rule: metrics.SplitRule | None = None) -> dict:
    """``{"prompts", "first_token_agreement_pct", "mean_match_rate_pct", "exact", "divergences",
    "divergences_at_decisive", "strict_first_token_agreement_pct", "strict_mean_match_rate_pct", **split_counts}``.

    A row that parts at a near-tie within the bound (:func:`metrics.split_kind`) agrees as far as the
    comparison can judge: after the split the two continue different prefixes.  So it counts as agreeing in
    the first-token agreement (where it parted at the first token) and as a full match in the mean match rate;
    the ``strict_`` figures count every split against.  ``divergences_at_decisive`` counts divergences where
    the reference's margin exceeded the engine's error (None where some row was measured without errors)."""
    if not rows:
        raise ValueError("no rows")
    kinds = split_kinds(rows, rule)
    div = [r for r in rows if r.first_divergence is not None]
    measured = all(r.error_at_divergence is not None for r in div if r.first_divergence < len(r.reference_ids))
    rates = [metrics.sequence_match(r.engine_ids, r.reference_ids)["match_rate"] for r in rows]
    ok = [k is not None and metrics.excused(k) for k in kinds]
    return {"prompts": len(rows),
            "first_token_agreement_pct": 100.0 * sum(r.first_token_same or (e and r.first_divergence == 0)
                                                     for r, e in zip(rows, ok)) / len(rows),
            "mean_match_rate_pct": 100.0 * float(np.mean([1.0 if e else m for m, e in zip(rates, ok)])),
            "strict_first_token_agreement_pct": 100.0 * sum(r.first_token_same for r in rows) / len(rows),
            "strict_mean_match_rate_pct": 100.0 * float(np.mean(rates)),
            "exact": sum(r.exact for r in rows), "divergences": len(div),
            "divergences_at_decisive": sum(k == "decisive" for k in kinds) if measured else None,
            "excused": sum(k is not None and metrics.excused(k) for k in kinds),
            "positions": judged_positions(rows),
            **metrics.split_counts([k for k in kinds if k is not None])}


def _caveat(real_weights: bool) -> str:
    return "" if real_weights else STANDIN_VERDICT


def greedy_verdict(rows: list[TextRow], *, first_token_pct_min: float, mean_match_pct_min: float,
                   rule: metrics.SplitRule | None = None, real_weights: bool = False) -> Verdict:
    """PASS when first-token agreement and the mean match rate (near-tie splits excused, and labelled so:
    :func:`greedy_summary`) reach their thresholds, and the splits pass :func:`metrics.split_checks`."""
    s = greedy_summary(rows, rule)
    kinds = [k for k in split_kinds(rows, rule) if k is not None]
    return Verdict([
        ("first-token agreement, excused near-ties counted as agreeing",
         f"{s['first_token_agreement_pct']:.1f} % ({s['strict_first_token_agreement_pct']:.1f} % strict)",
         f">= {first_token_pct_min} %", s["first_token_agreement_pct"] >= first_token_pct_min),
        ("mean match rate, excused near-ties counted as matching",
         f"{s['mean_match_rate_pct']:.1f} % ({s['strict_mean_match_rate_pct']:.1f} % strict)",
         f">= {mean_match_pct_min} %", s["mean_match_rate_pct"] >= mean_match_pct_min),
        *metrics.split_checks(kinds, rule, s["positions"]),
    ], _caveat(real_weights))


def text_verdict(rows: list[TextRow], *, exact_min: int, rule: metrics.SplitRule | None = None,
                 real_weights: bool = False) -> Verdict:
    """PASS when at least ``exact_min`` of the greedy texts are identical to the reference's or part from it only
    at an excused near-tie (each counted apart), and the splits pass :func:`metrics.split_checks`."""
    kinds = split_kinds(rows, rule)
    same = sum(k is None for k in kinds)
    near = sum(k is not None and metrics.excused(k) for k in kinds)
    return Verdict([("greedy outputs identical, or parted only at an excused near-tie",
                     f"{same} + {near} / {len(rows)}", f">= {exact_min}", same + near >= exact_min),
                    *metrics.split_checks([k for k in kinds if k is not None], rule, judged_positions(rows))],
                   _caveat(real_weights))
