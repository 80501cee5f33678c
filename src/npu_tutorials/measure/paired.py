"""Paired comparisons: is B faster than A on this host?

A host's speed drifts between hours (15-50 % on the shared 2-core VMs this site is built on), so a figure
measured now against one recorded earlier can only show large changes.  Measured alternately on the same host,
A B, B A, A B, ..., each round's ratio B/A sees the same drift on both sides, and it cancels.

* :func:`interleaved` runs ``k`` rounds, the side that goes first alternating (a slow drift within a round
  then favours neither side over the rounds);
* with a control (``make compare CONTROL=1``), A runs twice per round, as A and as "A again" (C), the three
  in the six orders in turn; the ratios C/A are what this host's noise alone makes of two identical sides,
  measured in the same session, so the reader sees how often it calls a change where there is none;
* :func:`paired_ratio` judges one figure over the rounds: the median of the per-round ratios B/A, and an exact,
  distribution-free interval for that median (the sign test's order statistics: the true median lies between
  the ``j``-th smallest and the ``j``-th largest ratio with probability ``1 - 2 P(Bin(k, 1/2) < j)``).  B is
  called better or worse only when the interval excludes 1 at 95 % coverage or more (6 rounds or more);
  otherwise "no measurable change".

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
# make compare's default: on the 2-core CPU machine kind, the fewest rounds that called a real 10-15 % TPOT slowdown
# in every block measured (10 of 10 blocks; 6 rounds: 14 of 17; the methods page, results/methods/paired-*-448*.json)
ROUNDS_DEFAULT = 10


def order_of(k: int, sides: str = "AB") -> list[str]:
    """Who runs when in each of ``k`` rounds.  Two sides: AB, BA, AB, ...  Three (a comparison with its
    control, A run twice): the six orders of ``sides`` in turn, so that over every six rounds each side runs
    in each place twice and each pair of sides runs in each order three times."""
    if len(sides) == 2:
        turns = [sides, sides[::-1]]
    else:
        a, b, c = sides
        turns = [a + b + c, c + b + a, b + c + a, a + c + b, c + a + b, b + a + c]
    return [turns[i % len(turns)] for i in range(k)]


def interleaved_sides(measures: dict[str, Callable[[int], dict[str, float]]], k: int,
                      after_round: Callable[[list[str], dict[str, list[dict[str, float]]]], None] | None = None,
                      ) -> tuple[list[str], dict[str, list[dict[str, float]]]]:
    """Run ``k`` rounds, each side of ``measures`` (one letter each, two or three) once per round in the
    order :func:`order_of` gives: ``(order, {side: its rounds})``; ``after_round(order so far, rounds so far)``
    is called after each round (a long comparison keeps what it has measured)."""
    if k < 1:
        raise ValueError("a paired comparison needs at least one round")
    order = order_of(k, "".join(measures))
    rounds: dict[str, list[dict[str, float]]] = {s: [] for s in measures}
    for i, turn in enumerate(order):
        for side in turn:
            rounds[side].append(measures[side](i))
        if after_round:
            after_round(order[:i + 1], rounds)
    return order, rounds


def interleaved(measure_a: Callable[[int], dict[str, float]], measure_b: Callable[[int], dict[str, float]],
                k: int) -> tuple[list[str], list[dict[str, float]], list[dict[str, float]]]:
    """Run ``k`` rounds, each side once per round (``measure_x(round)`` returns its figures), the first side
    alternating: ``(order, rounds_a, rounds_b)``."""
    order, rounds = interleaved_sides({"A": measure_a, "B": measure_b}, k)
    return order, rounds["A"], rounds["B"]


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
    if cov >= confidence and (low > 1.0 or high < 1.0):  # fewer rounds than a 95 % interval needs call nothing
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
    n = min(len(rounds_a), len(rounds_b)) // k
    return [paired_ratios(rounds_a[i * k:(i + 1) * k], rounds_b[i * k:(i + 1) * k], metrics) for i in range(n)]
