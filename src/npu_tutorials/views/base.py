"""What every view needs: the document, the card, and clear errors for missing sections."""

from __future__ import annotations

from typing import Any

from ..inputs.cards import Card
from ..core.errors import TutorialError
from ..core.messages import _
from ..record.schema import Check, ResultsDoc
from ..engine.platform import platform_for
from ..record.schema_base import Message
from ..core.tables import Note, Verdict
from ..inputs.weights import STANDIN_VERDICT


def shown(value) -> str:
    """A stored sentence (:class:`~npu_tutorials.record.schema_base.Message`) in the language being rendered;
    anything else as it is."""
    return value.shown() if isinstance(value, Message) else str(value)


def memory_rows(m, backend: str) -> list[list[str]]:
    """The memory the served engine held while it was measured (a document's ``results.memory``, ``m``), as rows
    of label, value and unit; none for a document that predates the measurement."""
    if m is None:
        return []
    rows = []
    if m.host_peak_rss_mib is not None:
        rows.append([_("server peak resident memory, host (its processes, {n} samples)", n=m.samples),
                     f"{m.host_peak_rss_mib / 1024:.2f}", "GiB"])
    if m.device_peak_mib is not None:
        rows.append([_("device memory held, peak ({source})", source=m.device_source),
                     f"{m.device_peak_mib / 1024:.2f}", "GiB"])
    elif platform_for(backend).accelerator:
        rows.append([_("device memory held"), _("not read: the device's tool listed none of its processes"), ""])
    if m.kv_cache_tokens is not None:
        size = f"{m.kv_cache_tokens:,}" + (f" ({m.kv_cache_gib:g} GiB)" if m.kv_cache_gib else "")
        rows.append([_("KV cache, as vLLM reports it"), size, _("tokens")])
    return rows


def memory_note(m, backend: str) -> str:
    """The memory rows in one sentence (for a table whose columns are not metrics), or ''."""
    rows = memory_rows(m, backend)
    return _("Memory while it was measured: {rows}.", rows="; ".join(f"{r[0]} {r[1]} {r[2]}".strip()
                                                                     for r in rows)) if rows else ""


class BaseViews:
    """Views of one results document and its model card (nothing else)."""

    def __init__(self, doc: ResultsDoc, card: Card, recorded: list[ResultsDoc] | None = None):
        if doc.model != card.key:
            raise TutorialError(f"results for {doc.model!r} cannot be shown with the card of {card.key!r}")
        self.doc, self.card, self.recorded = doc, card, list(recorded or [])

    @property
    def r(self):
        return self.doc.results

    @property
    def prov(self):
        return self.doc.provenance

    @property
    def backend(self) -> str:
        return self.prov.backend

    @property
    def dtype(self) -> str:
        return self.prov.engine_dtype

    @property
    def real(self) -> bool:
        return bool(self.prov.weights and self.prov.weights.kind == "real")

    def need(self, section: str) -> Any:
        """The document's section ``section``, or one clear error that the step has not run."""
        value = getattr(self.r, section)
        if value is None:
            raise TutorialError(f"the results of {self.doc.model} have no '{section}' section: "
                                "run its measurement step first (or this document predates it)")
        return value

    def recorded_note(self, section: str) -> str:
        """For a section shown from an earlier build's record (``results.from_records``): which build, where,
        and why this one did not measure it; '' for a section this build measured."""
        o = self.r.from_records.get(section)
        if o is None:
            return ""
        return _("Not measured in this build: {why}. Shown as the build of {built_at} UTC on {machine} ({profile} "
                 "profile, {dtype}, commit {commit}) recorded it in {file}; where its notes say 'this build', they "
                 "mean that one.", why=o.why, built_at=o.built_at[:16].replace('T', ' '), machine=o.machine,
                 profile=o.profile, dtype=o.engine_dtype, commit=o.git_commit[:10], file=o.file)

    def absent(self, section: str) -> Note | None:
        """A note where this build did not measure ``section`` and no record holds it, else None."""
        why = self.r.not_measured.get(section)
        return Note(_("Not measured in this build: {why}.", why=why)) if why else None

    def reported(self, key: str) -> dict:
        """The report's figures for ``key`` (from the card; never this build's)."""
        return dict(self.card.reported.figures.get(key, {}))

    @property
    def cite(self) -> str:
        return _("Reported figures are cited from the original evaluation ({source}, {hardware}); they were not "
                 "measured by this build.", source=self.card.reported.source, hardware=self.card.reported.hardware)

    def method_note(self, key: str) -> str:
        """How the report measured ``key`` differently from this page (the card's words), or ''."""
        note = self.card.reported.method_notes.get(key)
        return _(" How the report's method differs: {note}", note=note) if note else ""

    def verdict(self, checks: list[Check], caveat: str = "", section: str = "") -> Verdict:
        """A verdict table from the document's checks of ``section``, with the caveat under it, and the reason the
        card gives for each FAIL it declares as a known deviation (``accuracy.known_deviations``)."""
        known = self.card.accuracy.known_deviations
        declared = [_("{check} is a known deviation, declared by the model card: {why}", check=_(c.metric),
                      why=known[f"{section}: {c.metric}"]) for c in checks
                    if not c.passed and f"{section}: {c.metric}" in known]
        return Verdict([(c.metric, c.measured, c.threshold, c.passed) for c in checks],
                       " ".join(x for x in (caveat, *declared) if x))

    def same_arithmetic_note(self, dtype: str | None = None) -> str:
        """A comparison of two identical computations cannot differ: say so in words."""
        return (_(" The engine computed in float32 here, like the reference, so agreement this close "
                  "checks the engine's kernels only, not reduced precision.") if (dtype or self.dtype) == "float32"
                else "")

    def engine_label(self, section) -> str:
        """The engine a comparison section ran on: backend and dtype."""
        return _("{backend} engine, {dtype}", backend=self.backend,
                 dtype=getattr(section, 'engine_dtype', '') or self.dtype)

    @property
    def stand_in_caveat(self) -> str:
        return "" if self.real else _(STANDIN_VERDICT)
