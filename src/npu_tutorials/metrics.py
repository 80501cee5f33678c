"""Numerical agreement between an engine's logits and a reference's.

Pure numpy; every function takes the engine's vector first and the
reference's second.  Definitions:

* normalized MSE (%) = 100 * mean((x - r)^2) / mean(r^2)
* cosine = x.r / (|x| |r|)
* top-k agreement: the reference's top-1 is the engine's top-1 (k=1); for
  k>1 the fraction of the reference's top-k set that is in the engine's top-k
* KL(P_ref || P_engine) of the softmax distributions, in nats
"""

from __future__ import annotations

import numpy as np


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
    x = _as64(x)
    k = min(k, x.size)
    idx = np.argpartition(-x, k - 1)[:k]
    return idx[np.argsort(-x[idx], kind="stable")]


def topk_agreement(x, ref, k: int) -> float:
    """1.0 when the top-k sets agree (k=1: same argmax)."""
    k = min(k, _as64(ref).size)
    return len(set(topk_ids(x, k)) & set(topk_ids(ref, k))) / k


def log_softmax(x) -> np.ndarray:
    x = _as64(x)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def kl_divergence(x, ref) -> float:
    """KL(softmax(ref) || softmax(x)) in nats."""
    lp_x, lp_r = log_softmax(x), log_softmax(ref)
    return float(np.sum(np.exp(lp_r) * (lp_r - lp_x)))


def compare_logits(x, ref) -> dict[str, float]:
    """All agreement metrics of one position's full-vocabulary logits."""
    x, ref = _as64(x), _as64(ref)
    if x.shape != ref.shape:
        raise ValueError(f"shape mismatch: engine {x.shape} vs reference {ref.shape}")
    err = np.abs(x - ref)
    return {
        "nmse_pct": normalized_mse_pct(x, ref),
        "cosine": cosine(x, ref),
        "top1_match": topk_agreement(x, ref, 1),
        "top5_overlap": topk_agreement(x, ref, 5),
        "max_abs_err": float(err.max()),
        "mean_abs_err": float(err.mean()),
        "kl_nats": kl_divergence(x, ref),
        "engine_top1": int(np.argmax(x)),
        "reference_top1": int(np.argmax(ref)),
        "reference_top2_margin": top2_margin(ref),
    }


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
