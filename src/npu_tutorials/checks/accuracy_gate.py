"""The regression gate's accuracy side: a recorded document's verdict lines against this build's, as numbers
(:func:`accuracy_regressions`, which :func:`npu_tutorials.checks.gate.gate` calls)."""

from __future__ import annotations

import re

from ..record.schema import ResultsDoc


_NUM = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")
_LIMIT = re.compile(r"^\s*(<=|>=|<|>)\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)")
# A verdict line's name in a document recorded before the split rule -> its name now (the same quantity, now
# labelled with what it counts); a baseline's line is matched under its name now.
RENAMED = {"top-1 agreement": "top-1 agreement, excused near-ties counted as agreeing",
           "top-1 agreement, all positions": "top-1 agreement, all positions, excused near-ties counted as agreeing",
           "first-token agreement": "first-token agreement, excused near-ties counted as agreeing",
           "mean match rate": "mean match rate, excused near-ties counted as matching",
           "identical greedy outputs": "greedy outputs identical, or parted only at an excused near-tie",
           "near-tie splits with the error within the bound": "near-tie splits with the pair error within the bound"}


def _value(measured: str) -> float | None:
    """A verdict line's measured value: its first number (``"100.0 % (94.1 % strict)"``: 100.0), the count before a
    slash (``"2 / 17"``: 2), a sum of counts (``"6 + 3 / 10"``: 9)."""
    head = (measured or "").split("/")[0].split("(")[0]
    nums = _NUM.findall(head)
    if not nums:
        return None
    return sum(float(n) for n in nums) if "+" in head.replace("e+", "") else float(nums[0])


def _margin(measured: str, threshold: str) -> float | None:
    """Signed distance of a check's measured value from its threshold (positive: on the passing side); None where
    the threshold is not a bound on the measured value (``"= 0"``, ``"pair error <= 0.38 nats"``)."""
    t, value = _LIMIT.match(threshold or ""), _value(measured)
    if not t or value is None:
        return None
    limit = float(t.group(2))
    return limit - value if t.group(1).startswith("<") else value - limit


def _accuracy_checks(doc: ResultsDoc) -> dict[tuple[str, str], object]:
    r = doc.results
    out = {}
    for name in ("logits_agreement", "forward_consistency", "chat_consistency", "greedy_agreement",
                 "text_consistency"):
        sec = getattr(r, name)
        if sec is not None:
            out[(name, "")] = sec
            for c in sec.checks:
                out[(name, RENAMED.get(c.metric, c.metric))] = c
    return out


def accuracy_regressions(current: ResultsDoc, base: ResultsDoc) -> list[str]:
    """Accuracy checks and metrics of the baseline that are missing now, fail now, or kept less than half
    of the baseline's margin to their threshold."""
    now, then = _accuracy_checks(current), _accuracy_checks(base)
    out = []
    for (section, metric), b in then.items():
        what = section.replace("_", " ") + (f": {metric}" if metric else "")
        if (section, metric) not in now:
            out.append(f"{what} is in the baseline and missing now")
            continue
        if not metric:
            continue
        c = now[(section, metric)]
        if b.passed and not c.passed:
            out.append(f"{what} passed in the baseline ({b.measured}) and fails now ({c.measured}, {c.threshold})")
            continue
        mb, mc = _margin(b.measured, b.threshold), _margin(c.measured, c.threshold)
        if mb is not None and mc is not None and mc < mb - abs(mb) / 2 and mc != mb:
            out.append(f"{what} moved toward its threshold {c.threshold}: {c.measured} now, {b.measured} in the "
                       "baseline (less than half the margin left)")
    return out
