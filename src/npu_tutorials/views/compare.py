"""Views across documents: this build beside results recorded on other hardware, and the gate."""

from __future__ import annotations

from ..record.headline import METRICS, accuracy_verdict, engine_versions, headline_figures, staleness
from ..record.schema import ResultsDoc
from ..core.messages import _
from ..inputs.weights import kind_label
from ..core.tables import Note, Table
from . import plots
from .base import BaseViews


def _verdict(v: str) -> str:
    """An accuracy verdict ("PASS", "FAIL", "–") as a reader reads it."""
    return _(v) if v in ("PASS", "FAIL") else v


class CompareViews(BaseViews):
    def on_other_hardware(self, recorded: list[ResultsDoc] | None = None) -> Table:
        """This build's headline figures beside the newest recorded document of each machine kind and CPU generation
        of the same model (``recorded``; the ones the site handed to the views where not given, which include the
        records later ones replaced, for :meth:`history`)."""
        recorded = self.recorded if recorded is None else recorded
        newest: dict[str, ResultsDoc] = {}
        for d in sorted(recorded, key=lambda d: d.provenance.built_at):
            newest[d.provenance.machine.record_stem] = d
        docs = [self.doc] + [d for d in sorted(newest.values(), key=lambda d: d.provenance.built_at)
                             if d.provenance.built_at != self.prov.built_at]
        cols = ["", _("this build")] + [_("recorded {i}", i=i) for i in range(1, len(docs))]
        heads = [headline_figures(d) for d in docs]
        rows = [[_("device"), *[d.provenance.device_and_generation for d in docs]],
                ["backend, dtype", *[f"{d.provenance.backend}, {d.provenance.engine_dtype}" for d in docs]],
                [_("weights"), *[kind_label(d.provenance.weights.kind) if d.provenance.weights else "–"
                                 for d in docs]],
                [_("profile"), *[d.provenance.profile for d in docs]],
                [_("date"), *[d.provenance.built_at[:10] for d in docs]],
                ["vLLM", *[d.provenance.machine.versions.get("vllm") or "–" for d in docs]],
                ["vllm-ascend", *[d.provenance.machine.versions.get("vllm_ascend") or "–" for d in docs]],
                ["commit", *[d.provenance.git_commit[:12] for d in docs]]]
        for key, label, unit, _better in METRICS:
            if any(key in h for h in heads):
                rows.append([_(label) + (f" ({unit})" if unit else ""),
                             *[h[key].text() if key in h else "–" for h in heads]])
        rows.append([_("accuracy verdict"), *[_verdict(accuracy_verdict(d)) for d in docs]])
        rows.append([_("freshness"), _("this build"), *[staleness(d, self.doc) or _("fresh") for d in docs[1:]]])
        note = _("Recorded documents come from earlier builds on other machines (results/ in the repository, "
                 "written by make record); each column says where and when it was measured. Each figure is a "
                 "median with its interquartile range and what it is taken over: throughput over the benchmark's "
                 "runs, TTFT and TPOT over their requests (or the concurrency sweep's, where no benchmark ran).")
        if len(docs) == 1:
            note = _("No results of this model are recorded from other hardware yet (results/ in the repository).")
        return Table(cols, rows, caption=_("On other hardware"), note=note)

    def history(self):
        """This model's headline figures across its runs, one line per machine kind and weights kind with two runs
        or more (this build's and the recorded ones), in date order, each point with its commit; a change of
        versions is marked (:func:`plots.history`).  With one run per kind: a note that there is no history yet."""
        docs = [self.doc] + [d for d in self.recorded if d.provenance.built_at != self.prov.built_at]
        groups: dict[str, list] = {}
        for d in sorted(docs, key=lambda d: d.provenance.built_at):
            p = d.provenance
            heads = headline_figures(d)
            if p.status != "complete" or not heads:
                continue
            kind = f"{p.machine.slug}, {kind_label(p.weights.kind) if p.weights else '–'}"
            groups.setdefault(kind, []).append((p.built_at[:16].replace("T", " "), {k: f.stat for k, f in heads.items()},
                                                p.git_commit[:7], engine_versions(d), d.identifier))
        series = [(kind, pts) for kind, pts in groups.items() if len(pts) >= 2]
        if not series:
            return Note(_("No history yet: this model has one complete run per machine kind ({kinds}). Each run "
                          "recorded on the same kind of machine (make record) adds a point.",
                          kinds="; ".join(groups) or "–"))
        figures = [(key, _(label) + (f" ({unit})" if unit else "")) for key, label, unit, _b in METRICS
                   if key != "roofline_fraction" and any(key in pt[1] for _k, pts in series for pt in pts)]
        return plots.history(series, figures, _("{model}: headline figures across runs (median, interquartile "
                                                 "range; the commit beside each point)", model=self.card.name))
