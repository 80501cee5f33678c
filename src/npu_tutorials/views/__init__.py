"""Every table and plot on a tutorial page, as a view of a results document and the model card.

``Views(doc, card)`` draws from nothing else, so the same views render this
build's document and documents recorded on other hardware::

    show = Views(read_doc("results/qwen2.5-0.5b/npu-ascend910b3.json"), load_card("qwen2.5-0.5b"))
    show.bench_table()

May import: ``core``, ``inputs``, ``engine``, ``record``, ``measure``, ``checks`` (the gate's verdicts).
"""

from __future__ import annotations

from .accuracy import AccuracyViews
from .compare import CompareViews
from .deploy import DeployViews
from .performance import PerformanceViews
from .serving import ServingViews


class Views(ServingViews, AccuracyViews, PerformanceViews, CompareViews, DeployViews):
    """Tables (HTML in the gallery, text elsewhere) and matplotlib figures of one document."""


__all__ = ["Views"]
