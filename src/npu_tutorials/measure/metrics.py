"""Numerical agreement between an engine's logits and a reference's.

Pure numpy; every function takes the engine's vector first and the
reference's second.  Definitions:

* normalized MSE (%) = 100 * mean((x - r)^2) / mean(r^2)
* cosine = x.r / (|x| |r|)
* top-1 as the engine decides it: the engine's choice is its greedy argmax,
  the first index on an exact tie (``torch.argmax``, which vLLM's greedy
  sampler uses); the reference's likewise.  Where the two differ but the
  reference's token ties the engine's best value exactly, the engine could as
  well have chosen it: that is a *tie*, reported as such and counted as
  agreement, never as a flip.
* top-k agreement (k>1): the fraction of the reference's top-k set that is in
  the engine's top-k, each ordered as above
* KL(P_ref || P_engine) of the softmax distributions, in nats

The engine returns either raw logits or log-probabilities (vllm-ascend's
sampler ignores ``--logprobs-mode raw_logits`` and returns
``raw_logprobs``).  :func:`logits_form` tells them apart (over the whole
vocabulary, log-probabilities have logsumexp 0 and no positive value), and
:func:`compare_logits` compares like with like: for log-probabilities both
sides go through log-softmax, and normalized MSE and cosine are taken after
removing each vector's mean over the vocabulary (otherwise the common
-log(vocab) offset of log-probabilities dominates both and they cannot fail;
centred log-probabilities equal centred logits, so the figures match a
comparison of the centred raw logits up to the engine's rounding; the
raw-logits figures themselves are uncentred, as the reports define them, and
can read higher where the logits share a large common offset).

Splits (a top-1 flip, or the first token where two greedy sequences part) are judged on the two tokens
that contend there: the reference's top-1 and the engine's choice (at a position without a flip, the
reference's top-2).  ``pair_margin`` is the reference's lead of its top-1 over the contender; ``pair_err``
is how far the engine moved that lead, |(x[c] - x[r1]) - (ref[c] - ref[r1])|.  A flip needs
``pair_err >= pair_margin``.  :func:`split_kind` excuses a split as rounding (a *near-tie*) only when the
engine's ``pair_err`` is within :class:`SplitRule`'s ``err_max``: the largest contending-pair error that an
independent bf16 implementation (transformers bf16 against fp32, ``measure.floor``) made on calibration text
of the same kinds (plain, and chat-template answers).  The bound never comes from the engine under test: a
fault that moves the contending tokens moves ``pair_err`` past it.  And the *number* of near-tie splits is
judged too (:func:`near_tie_allowance`): no more than bf16 rounding produces at the calibration's rate over
as many judged positions; a fault too small to move one pair past the bound makes too many near-ties.
Without a calibration (:data:`NO_CALIBRATION`) no split is excused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.messages import N_


@dataclass(frozen=True)
class SplitRule:
    """When a split is rounding: the engine's error on the contending pair is within ``err_max`` (nats), and the
    near-tie splits number no more than rounding at ``rate_pct_max`` (% of judged positions) explains.  A card
    states its model's rule (``accuracy.splits``, derived from its bf16 floor record: ``measure.floor.derive``)."""

    err_max: float = 0.0
    rate_pct_max: float = 0.0


NO_CALIBRATION = SplitRule()  # a model without a recorded floor: no split is excused
# the one-sided level at which a count of near-ties is more than rounding explains (near_tie_allowance)
NEAR_TIE_ALPHA = 0.01


def _as64(x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("expected a non-empty 1-D vector")
    return a


def normalized_mse_pct(x, ref) -> float:
    x, ref = _as64(x), _as64(ref)
    return float(100.0 * np.mean((x - ref) ** 2) / np.mean(ref**2))


def cosine(x, ref) -> float:
    x, ref = _as64(x), _as64(ref)
    return float(np.dot(x, ref) / (np.linalg.norm(x) * np.linalg.norm(ref)))


def topk_ids(x, k: int) -> np.ndarray:
    """The ``k`` largest entries' indices, largest first; equal values in index order (so
    ``topk_ids(x, 1)[0]`` is the first index of the maximum, as ``torch.argmax`` picks it)."""
    x = _as64(x)
    k = min(k, x.size)
    kth = np.partition(-x, k - 1)[k - 1]
    cand = np.nonzero(-x <= kth)[0]  # every entry at least as large as the k-th, ties included
    return cand[np.lexsort((cand, -x[cand]))][:k]


def top1(x) -> int:
    """The engine's greedy choice: the first index of the largest value."""
    return int(np.argmax(_as64(x)))


def topk_agreement(x, ref, k: int) -> float:
    """The fraction of the reference's top-k that is in the engine's top-k (k=1: same choice)."""
    k = min(k, _as64(ref).size)
    return len(set(topk_ids(x, k)) & set(topk_ids(ref, k))) / k


def agrees(row: dict) -> bool:
    """Top-1 agreement of one compared position: the same choice, or an exact tie at the engine's top."""
    return bool(row["top1_match"] or row.get("top1_tie"))


def logsumexp(x) -> float:
    x = _as64(x)
    m = x.max()
    return float(m + np.log(np.exp(x - m).sum()))


LOGPROBS_TOL = 1e-3
FORMS = ("logits", "logprobs")
COMPARED_AS = {
    "logits": N_("raw logits"),
    "logprobs": N_("log-probabilities (log-softmax on both sides; normalized MSE and cosine after removing each "
                   "vector's mean over the vocabulary)"),
}  # stored in results documents (compared_form) in English; views show _(compared_form)


def logits_form(x, tol: float = LOGPROBS_TOL) -> str:
    """``"logprobs"`` when the full-vocabulary vector ``x`` is log-probabilities (logsumexp within
    ``tol`` of 0 and no value above ``tol``), else ``"logits"``."""
    x = _as64(x)
    return "logprobs" if abs(logsumexp(x)) < tol and x.max() <= tol else "logits"


def comparable(x, ref, form: str) -> tuple[np.ndarray, np.ndarray]:
    """The engine's vector and the reference's in the same form (``form`` is the engine's)."""
    x, ref = _as64(x), _as64(ref)
    if form == "logits":
        return x, ref
    if form == "logprobs":
        return log_softmax(x), log_softmax(ref)
    raise ValueError(f"form must be one of {FORMS}, not {form!r}")


def log_softmax(x) -> np.ndarray:
    x = _as64(x)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def kl_divergence(x, ref) -> float:
    """KL(softmax(ref) || softmax(x)) in nats."""
    lp_x, lp_r = log_softmax(x), log_softmax(ref)
    return float(np.sum(np.exp(lp_r) * (lp_r - lp_x)))


def compare_logits(x, ref, form: str | None = None) -> dict:
    """All agreement metrics of one position's full-vocabulary vectors.

    ``x`` is what the engine returned, ``ref`` the reference's raw logits; ``form`` is the
    engine's form (detected with :func:`logits_form` when None).  Keys: ``nmse_pct``,
    ``cosine``, ``top1_match`` (0/1: the engine's choice is the reference's), ``top1_tie`` (they
    differ, but the reference's token ties the engine's best value exactly), ``top5_overlap``, ``max_abs_err``, ``mean_abs_err``,
    ``err_spread`` (max - min of the error), ``kl_nats``, ``engine_top1``, ``reference_top1``,
    ``reference_top2_margin``, ``decisive`` (margin > max_abs_err: with this engine's error a flip would need
    errors of opposite sign; descriptive, no verdict reads it), ``contender``, ``pair_margin`` and ``pair_err`` (the
    module docstring), ``compared_as``
    (``"logits"`` or ``"logprobs"``).
    """
    x, ref = _as64(x), _as64(ref)
    if x.shape != ref.shape:
        raise ValueError(f"shape mismatch: engine {x.shape} vs reference {ref.shape}")
    form = form or logits_form(x)
    x, ref = comparable(x, ref, form)
    # log-probabilities: centre both for nMSE and cosine (see the module docstring)
    xc, rc = (x - x.mean(), ref - ref.mean()) if form == "logprobs" else (x, ref)
    d = x - ref
    err = np.abs(d)
    margin = top2_margin(ref)
    spread = float(d.max() - d.min())
    e1, r1 = top1(x), top1(ref)
    c = e1 if e1 != r1 else int(topk_ids(ref, 2)[-1])  # the contender: the engine's choice, else the runner-up
    return {
        "nmse_pct": normalized_mse_pct(xc, rc),
        "cosine": cosine(xc, rc),
        "top1_match": float(e1 == r1),
        "top1_tie": bool(e1 != r1 and x[r1] == x[e1]),
        "top5_overlap": topk_agreement(x, ref, 5),
        "max_abs_err": float(err.max()),
        "mean_abs_err": float(err.mean()),
        "err_spread": spread,
        "kl_nats": kl_divergence(x, ref),
        "engine_top1": e1,
        "reference_top1": r1,
        "reference_top2_margin": margin,
        "decisive": bool(margin > float(err.max())),
        "contender": c,
        "pair_margin": float(ref[r1] - ref[c]),
        "pair_err": float(abs(d[c] - d[r1])),
        "compared_as": form,
    }


def decisive_top1(rows: list[dict], rule: SplitRule | None = None) -> dict:
    """Top-1 agreement over all positions and over decisive ones (rows from :func:`compare_logits`).

    Returns ``{"top1_pct", "top1_strict_pct", "ties", "decisive_positions", "top1_decisive_pct", "flips",
    "flips_at_decisive", "flip_kinds", "positions", **split_counts}``: ``top1_strict_pct`` counts agreement (exact
    ties at the engine's top included, :func:`agrees`); ``top1_pct`` also counts the flips ``rule`` excuses as
    rounding (:func:`split_kind`), and says so wherever it is shown.  A position is decisive when the reference's
    top-1/top-2 margin exceeds ``rule.err_max`` (a flip there is a fault, whatever the engine's error);
    ``top1_decisive_pct`` is None when no position is.
    """
    if not rows:
        raise ValueError("no positions")
    rule = rule or NO_CALIBRATION
    dec = [r for r in rows if r["reference_top2_margin"] > rule.err_max]
    kinds = [split_kind(r, rule) for r in rows if not agrees(r)]
    return {"top1_pct": 100.0 * (sum(agrees(r) for r in rows) + kinds.count("near-tie")) / len(rows),
            "top1_strict_pct": 100.0 * sum(agrees(r) for r in rows) / len(rows),
            "ties": sum(bool(r.get("top1_tie")) for r in rows),
            "decisive_positions": len(dec),
            "top1_decisive_pct": 100.0 * sum(agrees(r) for r in dec) / len(dec) if dec else None,
            "flips": sum(not agrees(r) for r in rows), "positions": len(rows),
            "flips_at_decisive": sum(not agrees(r) for r in dec), "flip_kinds": kinds, **split_counts(kinds)}


def position_error(row: dict) -> dict:
    """The near-tie view of one position: margins beside the engine's error there."""
    return {k: row[k] for k in ("top1_match", "top1_tie", "engine_top1", "reference_top1", "reference_top2_margin",
                                "max_abs_err", "err_spread", "decisive", "kl_nats", "nmse_pct", "contender",
                                "pair_margin", "pair_err", "compared_as")}


# How a split is judged (split_kind); stored in English, translated where shown.
SPLIT_KINDS = {"decisive": N_("decisive"), "near-tie": N_("near-tie"), "beyond bound": N_("beyond the error bound"),
               "unmeasured": N_("error not measured")}


def split_kind(error: dict | None, rule: SplitRule | None = None) -> str:
    """How one split is judged from the engine's error at its position (:func:`position_error`), by ``rule``:
    ``"decisive"`` (the reference led the engine's choice by more than ``err_max``: no rounding flips that),
    ``"beyond bound"`` (a near-tie, but the engine moved the contending pair by more than ``err_max``),
    ``"near-tie"`` (rounding, excused) or ``"unmeasured"`` (no pair error to judge it by).  All but a near-tie are
    faults."""
    rule = rule or NO_CALIBRATION
    if not error or error.get("pair_err") is None:
        return "unmeasured"
    if error["pair_margin"] > rule.err_max:
        return "decisive"
    return "beyond bound" if error["pair_err"] > rule.err_max else "near-tie"


def excused(kind: str) -> bool:
    return kind == "near-tie"


def split_counts(kinds: list[str]) -> dict:
    """``{"splits", "decisive_splits", "near_tie_splits", "beyond_bound_splits", "unmeasured_splits"}``."""
    return {"splits": len(kinds), "decisive_splits": kinds.count("decisive"),
            "near_tie_splits": kinds.count("near-tie"), "beyond_bound_splits": kinds.count("beyond bound"),
            "unmeasured_splits": kinds.count("unmeasured")}


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p)."""
    if p <= 0:
        return 0.0
    if p >= 1:
        return 1.0 if k < n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
             for i in range(k + 1, n + 1)]
    return float(sum(math.exp(t) for t in terms))


def near_tie_allowance(positions: int, rate_pct: float, alpha: float = NEAR_TIE_ALPHA) -> int:
    """The most near-tie splits that rounding at ``rate_pct`` % per position explains over ``positions`` judged
    positions: the smallest k with P(X > k) <= ``alpha`` for X ~ Binomial(positions, rate)."""
    p = rate_pct / 100.0
    k = 0
    while k < positions and _binom_sf(k, positions, p) > alpha:
        k += 1
    return k


def rate_upper_pct(events: int, trials: int, alpha: float = 0.05) -> float:
    """The one-sided ``1 - alpha`` Clopper-Pearson upper bound of a rate (%): the p at which ``events`` or fewer
    in ``trials`` has probability ``alpha``."""
    if trials <= 0:
        raise ValueError("no trials")
    lo, hi = events / trials, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1.0 - _binom_sf(events, trials, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return 100.0 * hi


def rate_interval_pct(events: int, trials: int, conf: float = 0.95) -> tuple[float, float]:
    """The two-sided Clopper-Pearson ``conf`` interval of a rate (%), e.g. a score of ``events`` in ``trials``."""
    alpha = (1 - conf) / 2
    hi = 100.0 if events >= trials else rate_upper_pct(events, trials, alpha)
    lo = 0.0 if events <= 0 else 100.0 - rate_upper_pct(trials - events, trials, alpha)
    return lo, hi


def split_checks(kinds: list[str], rule: SplitRule | None, positions: int) -> list[tuple[str, str, str, bool]]:
    """The three verdict lines every check with splits carries: no split is a fault (decisive, or unmeasured); no
    near-tie split moved its contending pair beyond ``rule.err_max``; and the near-tie splits are no more than
    rounding explains over the ``positions`` judged (:func:`near_tie_allowance`)."""
    rule = rule or NO_CALIBRATION
    c = split_counts(kinds)
    faults = c["decisive_splits"] + c["unmeasured_splits"]
    near = c["near_tie_splits"] + c["beyond_bound_splits"]
    allowed = near_tie_allowance(positions, rule.rate_pct_max)
    return [("splits at decisive positions", f"{faults}", "= 0", faults == 0),
            ("near-tie splits with the pair error within the bound", f"{c['near_tie_splits']} / {near}",
             f"pair error <= {rule.err_max:g} nats", c["beyond_bound_splits"] == 0),
            ("near-tie splits per judged position", f"{near} / {positions}",
             f"<= {allowed} (rounding: {rule.rate_pct_max:g} %)", near <= allowed)]


def top2_margin(x) -> float:
    """Gap between the largest and the second-largest logit: a top-1 flip needs an error this large."""
    a, b = _as64(x)[topk_ids(x, 2)]
    return float(a - b)


def sequence_match(a: list[int], b: list[int]) -> dict[str, float | int | None]:
    """Position-wise match of two token sequences (length of the reference ``b``).

    ``first_divergence`` is the 0-based index of the first differing token, or None.
    """
    n = len(b)
    if n == 0:
        raise ValueError("empty reference sequence")
    same = sum(1 for i in range(n) if i < len(a) and a[i] == b[i])
    first = next((i for i in range(n) if i >= len(a) or a[i] != b[i]), None)
    return {"match_rate": same / n, "first_divergence": first, "length": n}
