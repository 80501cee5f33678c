"""The statistic every headline figure of a results document uses."""

from __future__ import annotations

from pydantic import Field

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
