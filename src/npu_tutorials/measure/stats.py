"""Summaries of repeated measurements: median and interquartile range.

Every headline figure comes from several samples (requests, or repeated
runs); pages show ``median (IQR q1–q3, n=…)`` so a reader sees the spread
beside the value.  Quartiles are numpy's default (linear interpolation).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from ..record.schema_base import Stat

KEYS = ("median", "q1", "q3", "min", "max", "n")


def summarize(values: Iterable[float]) -> dict:
    """``{"median", "q1", "q3", "min", "max", "n"}`` of ``values`` (floats; ``n`` an int).

    Raises ``ValueError`` on an empty or non-finite sample: a figure without
    samples must not become a number on a page.
    """
    a = np.asarray([float(v) for v in values], dtype=np.float64)
    if a.size == 0:
        raise ValueError("no samples to summarize")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"non-finite samples: {a[~np.isfinite(a)].tolist()[:5]}")
    return Stat.of(a).model_dump()  # one definition of median and quartiles: schema's Stat

