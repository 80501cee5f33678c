"""Every table and plot on a tutorial page, as a view of a results document and the model card.

``Views(doc, card, recorded)`` draws from nothing else (``recorded``: the model's documents recorded on
other hardware, which the site hands to the views), so the same views render this build's document and
documents recorded on other hardware::

    show = Views(read_doc("results/qwen2.5-0.5b/npu-ascend910b3.json"), load_card("qwen2.5-0.5b"))
    show.environment()                # about the build itself: directly on show
    show.serving.bench_table()        # a section's views: under the section's name

May import: ``core``, ``inputs``, ``engine``, ``record``, ``measure``, ``checks`` (the gate's verdicts).
"""

from __future__ import annotations

from ..inputs.cards import Card
from ..record.schema import ResultsDoc
from .accuracy import AccuracyViews, TaskViews, TextViews
from .compare import CompareViews
from .deploy import DeployViews
from .performance import PerformanceViews, TuningViews
from .refs import Show, ViewRef
from .serving import BuildViews, ServingViews


class Views(BuildViews, DeployViews):
    """Tables (HTML in the gallery, text elsewhere) and matplotlib figures of one document.

    The views of the build itself (environment, weights, conditions, provenance, this build's commands)
    are methods of ``show``; each section of the report has its own views object:

    ``show.serving``      the offline example, the functional check, the benchmark (:class:`ServingViews`)
    ``show.accuracy``     logits against the fp32 reference (:class:`AccuracyViews`)
    ``show.text``         greedy text against the reference (:class:`TextViews`)
    ``show.tasks``        task scores (:class:`TaskViews`)
    ``show.performance``  the sweeps and efficiency (:class:`PerformanceViews`)
    ``show.tuning``       the tuning comparison (:class:`TuningViews`)
    ``show.compare``      other hardware and the regression gate (:class:`CompareViews`)
    """

    def __init__(self, doc: ResultsDoc, card: Card, recorded: list[ResultsDoc] | None = None):
        super().__init__(doc, card, recorded)
        self.serving = ServingViews(doc, card, recorded)
        self.accuracy = AccuracyViews(doc, card, recorded)
        self.text = TextViews(doc, card, recorded)
        self.tasks = TaskViews(doc, card, recorded)
        self.performance = PerformanceViews(doc, card, recorded)
        self.tuning = TuningViews(doc, card, recorded)
        self.compare = CompareViews(doc, card, recorded)


__all__ = ["AccuracyViews", "BuildViews", "CompareViews", "PerformanceViews", "ServingViews", "Show", "TaskViews",
           "TextViews", "TuningViews", "ViewRef", "Views"]
