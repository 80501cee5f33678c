"""Paired comparisons: is B faster than A on this host?

A host's speed drifts between hours (15-50 % on the shared 2-core VMs this site is built on), so a figure
measured now against one recorded earlier can only show large changes.  Measured alternately on the same host,
A B, B A, A B, ..., each round's ratio B/A sees the same drift on both sides, and it cancels.

* :func:`interleaved` runs ``k`` rounds, the side that goes first alternating (a slow drift within a round
  then favours neither side over the rounds);
* :func:`paired_ratio` judges one figure over the rounds: the median of the per-round ratios B/A, and an exact,
  distribution-free interval for that median (the sign test's order statistics: the true median lies between
  the ``j``-th smallest and the ``j``-th largest ratio with probability ``1 - 2 P(Bin(k, 1/2) < j)``).  B is
  called better or worse only when the interval excludes 1; otherwise "no measurable change".

The figures of each round are the page's own headline figures
(:func:`npu_tutorials.record.headline.headline_figures`), so a ratio compares what the page shows.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable

from ..record.schema_base import PairedRatio

CONFIDENCE = 0.95
ROUNDS_95 = 6  # the fewest rounds whose interval reaches CONFIDENCE: the range of 6 ratios, 96.9 %


def order_of(k: int) -> list[str]:
    """Who goes first in each of ``k`` rounds: AB, BA, AB, ..."""
    return ["AB" if i % 2 == 0 else "BA" for i in range(k)]


def interleaved(measure_a: Callable[[int], dict[str, float]], measure_b: Callable[[int], dict[str, float]],
                k: int) -> tuple[list[str], list[dict[str, float]], list[dict[str, float]]]:
    """Run ``k`` rounds, each side once per round (``measure_x(round)`` returns its figures), the first side
    alternating: ``(order, rounds_a, rounds_b)``."""
    if k < 1:
        raise ValueError("a paired comparison needs at least one round")
    order, ra, rb = order_of(k), [], []
    for i, first in enumerate(order):
        for side in first:
            (ra if side == "A" else rb).append((measure_a if side == "A" else measure_b)(i))
    return order, ra, rb


def coverage(k: int, j: int) -> float:
    """The exact coverage of ``[x(j), x(k-j+1)]`` (sorted samples, 1-based) for the median of ``k`` samples."""
    tail = sum(math.comb(k, i) for i in range(j)) / 2 ** k
    return 1.0 - 2.0 * tail


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(low, high, coverage)``: the narrowest order-statistic interval for the median of ``values`` whose
    coverage is at least ``confidence``; with too few values for that (5 or fewer at 95 %), the widest one
    (the range) and the coverage it has."""
    x = sorted(values)
    k = len(x)
    j = 1
    while j + 1 <= (k + 1) // 2 and coverage(k, j + 1) >= confidence:
        j += 1
    return x[j - 1], x[k - j], coverage(k, j)


def paired_ratio(key: str, label: str, unit: str, better: str, a: list[float], b: list[float],
                 confidence: float = CONFIDENCE) -> PairedRatio:
    """Figure ``key`` of each round, side A's values ``a`` and B's ``b`` (same rounds, same order), as the
    ratio B/A with its interval and verdict."""
    if len(a) != len(b) or not a:
        raise ValueError(f"{key}: the two sides have {len(a)} and {len(b)} rounds")
    ratios = [vb / va for va, vb in zip(a, b)]
    low, high, cov = median_interval(ratios, confidence)
    if low > 1.0 or high < 1.0:
        up = low > 1.0
        verdict = "B better" if up == (better == "higher") else "B worse"
    else:
        verdict = "no measurable change"
    return PairedRatio(key=key, label=label, unit=unit, better=better, ratios=ratios,
                       median=statistics.median(ratios), low=low, high=high, confidence=cov, k=len(ratios),
                       verdict=verdict)


def paired_ratios(rounds_a: list[dict[str, float]], rounds_b: list[dict[str, float]],
                  metrics: list[tuple[str, str, str, str]]) -> list[PairedRatio]:
    """Every figure of ``metrics`` (key, label, unit, better) that both sides measured in every round."""
    out = []
    for key, label, unit, better in metrics:
        if all(key in r for r in rounds_a + rounds_b):
            out.append(paired_ratio(key, label, unit, better, [r[key] for r in rounds_a],
                                    [r[key] for r in rounds_b]))
    return out


def in_blocks(rounds_a: list[dict[str, float]], rounds_b: list[dict[str, float]],
              metrics: list[tuple[str, str, str, str]], k: int) -> list[list[PairedRatio]]:
    """A long comparison cut into consecutive blocks of ``k`` rounds, each judged as a comparison of ``k``
    rounds would be (what ``make compare K=k`` would have said at each point of the session); the rest of the
    rounds left out.  The methods page's resolution and false alarms are counted over these blocks."""
    n = len(rounds_a) // k
    return [paired_ratios(rounds_a[i * k:(i + 1) * k], rounds_b[i * k:(i + 1) * k], metrics) for i in range(n)]
