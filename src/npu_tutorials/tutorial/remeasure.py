"""A model's gated figures measured again, apart from any page: one independent run of the steps its
page runs for them (:func:`npu_tutorials.record.headline.gated_steps`), a fresh ``Tutorial`` and server,
results in a scratch folder.  ``scripts/repeatability.py`` runs it to measure the noise, and the gate's
confirmation (``make check GATE=1 CONFIRM=N``) runs it to measure a figure beyond its limit again."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..inputs.cards import load_card
from ..record.headline import gated_steps
from ..record.schema import ResultsDoc
from .facade import Tutorial


def measure_gated(key: str) -> ResultsDoc:
    """One independent run of card ``key``'s gated steps; its results document.  Everything it started
    is stopped, after success or error; the build's own results are untouched."""
    steps = gated_steps(load_card(key))
    before = os.environ.get("TUTORIAL_RESULTS_DIR")
    with tempfile.TemporaryDirectory(prefix="remeasure-") as work:
        os.environ["TUTORIAL_RESULTS_DIR"] = str(Path(work) / "results")
        try:
            tut = Tutorial(key)
            try:
                tut.prepare_weights()
                tut.start_server()
                for step in steps:
                    getattr(tut, step)()
                tut.finish()
            except BaseException:
                tut.stop()
                raise
        finally:
            if before is None:
                os.environ.pop("TUTORIAL_RESULTS_DIR", None)
            else:
                os.environ["TUTORIAL_RESULTS_DIR"] = before
    return tut.doc
