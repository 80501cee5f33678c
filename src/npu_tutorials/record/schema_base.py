"""The statistic every headline figure of a results document uses, and the stored sentence."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ..core.messages import _
from ..core.model import StrictModel


# -- shared pieces -----------------------------------------------------------------------
class Stat(StrictModel):
    """A figure from several samples: median, spread (quartiles, range) and sample size."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    n: int = Field(ge=1)

    @classmethod
    def of(cls, values) -> "Stat":
        import numpy as np

        a = np.asarray([float(v) for v in values], dtype=float)
        if a.size == 0:
            raise ValueError("a statistic needs at least one sample")
        q1, med, q3 = np.percentile(a, [25, 50, 75])
        return cls(median=float(med), q1=float(q1), q3=float(q3), min=float(a.min()), max=float(a.max()), n=int(a.size))

    def text(self, digits: int = 1, unit: str = "") -> str:
        u = f" {unit}" if unit else ""
        if self.n == 1:
            return f"{self.median:.{digits}f}{u} (n=1)"
        return f"{self.median:.{digits}f}{u} (IQR {self.q1:.{digits}f}–{self.q3:.{digits}f}, n={self.n})"


class Message(StrictModel):
    """A sentence a results document stores as its message and fields (a message marked with ``N_()`` where
    the sentence is made), so each language's pass shows it from its own catalog (:meth:`shown`).  A plain
    string (a document written before messages were stored) is a message with no fields."""

    msgid: str
    fields: dict[str, str | int | float] = {}

    @model_validator(mode="before")
    @classmethod
    def _plain(cls, value: Any) -> Any:
        return {"msgid": value} if isinstance(value, str) else value

    @classmethod
    def of(cls, msgid: str, **fields: str | int | float) -> "Message":
        return cls(msgid=msgid, fields=fields)

    def shown(self) -> str:
        """The sentence in the language being rendered."""
        return _(self.msgid, **self.fields)

    def __str__(self) -> str:  # the English sentence (logs, the terminal)
        return self.msgid.format(**self.fields) if self.fields else self.msgid


class PairedRatio(StrictModel):
    """One figure, B against A: the ratio B/A of each round, their median and a distribution-free interval for
    that median (the sign test's order statistics), and what it says."""

    key: str
    label: str
    unit: str
    better: Literal["higher", "lower"]
    ratios: list[float]
    median: float
    low: float
    high: float
    confidence: float = Field(description="the interval's exact coverage (>= 0.95 from 6 rounds on)")
    k: int
    verdict: Literal["B better", "B worse", "no measurable change"]

    @property
    def called(self) -> bool:
        """Whether it calls a change (better or worse)."""
        return self.verdict != "no measurable change"

    @property
    def width_pct(self) -> float:
        """The interval's width as a share of the ratio, in per cent: the resolution of its rounds."""
        return 100 * (self.high - self.low)
