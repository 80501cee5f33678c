"""Steps that read what earlier builds recorded (``results/``): other hardware, and sections left to the full
profile."""

from __future__ import annotations

import typing

from ..record.schema import RecordedSection, ResultsDoc
from .state import TutorialState
from ..record.results import recorded, section_from_records


class RecordSteps:
    """This model's recorded documents, read for this build."""

    def __init__(self, state: TutorialState):
        self.s = state

    def recorded(self) -> list[ResultsDoc]:
        """Documents of this model recorded by earlier builds on other hardware (``results/``); a file that
        cannot be read is named on the terminal and in ``recorded_errors`` (the gate fails on it)."""
        errors = self.s.recorded_errors
        errors.clear()
        docs = recorded(self.s.card.key, errors=errors)
        for e in errors:
            self.s.progress.say(f"left out a recorded document: {e}")
        return docs

    def from_record(self, section: str, why: str):
        """``section`` (``tuning`` or ``transformers_baseline``) as an earlier build recorded it (``results/``),
        for a profile that leaves it to the full one: the value and its provenance go into this document
        (``results.from_records``), or, with no fitting record, ``results.not_measured`` says so.  Returns the
        value or None."""
        s = self.s
        if section not in typing.get_args(RecordedSection):
            raise ValueError(f"no section {section!r} can be shown from a record ({typing.get_args(RecordedSection)})")
        value, origin = section_from_records(s.doc, section, recorded(s.card.key), why)
        if origin is None:
            s.results.not_measured[section] = (f"{why}; no build recorded it for {s.backend}, {s.dtype} "
                                               f"and these weights (results/{s.card.key}/)")
            s.progress.say(f"{section}: not measured in this build, and no record holds it")
        else:
            s.results.from_records[section] = origin
            s.progress.say(f"{section}: not measured in this build; shown as {origin.file} recorded it "
                           f"(built {origin.built_at} on {origin.machine})")
        return value
