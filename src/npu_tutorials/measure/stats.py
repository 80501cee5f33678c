"""Summaries of repeated measurements: median and interquartile range.

Every headline figure comes from several samples (requests, or repeated
runs); pages show ``median (IQR q1–q3, n=…)`` so a reader sees the spread
beside the value.  Quartiles are numpy's default (linear interpolation).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

KEYS = ("median", "q1", "q3", "min", "max", "n")


def summarize(values: Iterable[float]) -> dict:
    """``{"median", "q1", "q3", "min", "max", "n"}`` of ``values`` (floats; ``n`` an int).

    Raises ``ValueError`` on an empty or non-finite sample: a figure without
    samples must not become a number on a page.
    """
    from ..record.schema_base import Stat

    a = np.asarray([float(v) for v in values], dtype=np.float64)
    if a.size == 0:
        raise ValueError("no samples to summarize")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"non-finite samples: {a[~np.isfinite(a)].tolist()[:5]}")
    return Stat.of(a).model_dump()  # one definition of median and quartiles: schema's Stat


def _num(v: float, digits: int) -> str:
    if v != 0 and (abs(v) >= 10 ** digits or abs(v) < 10 ** -(digits - 1)):
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}"


def format_summary(s: dict, digits: int = 3, unit: str = "") -> str:
    """``"12.3 ms (IQR 11.9–12.8, n=16)"``; a single sample shows ``(n=1)`` only."""
    u = f" {unit}" if unit else ""
    if s["n"] == 1:
        return f"{_num(s['median'], digits)}{u} (n=1)"
    return f"{_num(s['median'], digits)}{u} (IQR {_num(s['q1'], digits)}–{_num(s['q3'], digits)}, n={s['n']})"


def relative_iqr(s: dict) -> float:
    """(q3 - q1) / median: the spread relative to the value (0 for one sample)."""
    return (s["q3"] - s["q1"]) / s["median"] if s["median"] else float("inf")


def relative_difference(a: float, b: float) -> float:
    """|a - b| / mean(a, b): the run-to-run difference of one figure."""
    m = (abs(a) + abs(b)) / 2
    return abs(a - b) / m if m else 0.0
