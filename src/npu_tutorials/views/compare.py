"""Views across documents: this build beside results recorded on other hardware, and the gate."""

from __future__ import annotations

from ..checks.gate import Noise, gate
from ..record.headline import METRICS, accuracy_verdict, headline_figures, staleness
from ..record.schema import ResultsDoc
from ..core.messages import _
from ..inputs.weights import kind_label
from ..core.tables import Table
from .base import BaseViews


def _verdict(v: str) -> str:
    """An accuracy verdict ("PASS", "FAIL", "–") as a reader reads it."""
    return _(v) if v in ("PASS", "FAIL") else v


class CompareViews(BaseViews):
    def on_other_hardware(self, recorded: list[ResultsDoc] | None = None) -> Table:
        """This build's headline figures beside every recorded document of the same model (``recorded``; the
        ones the site handed to the views where not given)."""
        recorded = self.recorded if recorded is None else recorded
        docs = [self.doc] + [d for d in recorded if d.provenance.built_at != self.prov.built_at]
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

    def gate_table(self, recorded: list[ResultsDoc], noise: Noise | None = None,
                   errors: list[str] | None = None) -> Table:
        """This build against the recorded baseline of the same conditions, as make check GATE=1 sees it
        (``noise``: this machine kind's measured between-run noise, :func:`gate.measured_noise`)."""
        g = gate(self.doc, recorded, self.card, noise, errors)
        if g.baseline is None:
            rows = [[_("baseline"), _("none recorded for this machine, weights kind, profile and dtype")]]
            rows += [[_("unreadable"), e] for e in g.errors]
            return Table(["", ""], rows, caption=_("Regression gate"),
                         note=_("With no baseline there is nothing to compare; make record stores one.")
                              + (_(" An unreadable recorded file fails the gate.") if g.errors else ""))
        now, then = headline_figures(self.doc), headline_figures(g.baseline)
        confirm = g.noise.confirm if g.noise else 0

        def verdict(c) -> str:
            if not c.regressed:
                return _("PASS")
            if confirm and not c.reruns:  # make check GATE=1 measures it again before it fails
                return _("beyond: measured {confirm} more times by make check GATE=1, which fails on the majority",
                         confirm=confirm)
            return _("FAIL")

        rows = [[_(c.label), now[c.key].text(), then[c.key].text(), f"{c.ratio:.3f}",
                 f"{'>=' if c.better == 'higher' else '<='} {c.limit}", verdict(c)]
                for c in g.comparisons]
        if g.other_generation:
            rows.append([_("speed (throughput, TTFT, TPOT)"), self.prov.machine.cpu_generation or "–",
                         g.baseline.provenance.machine.cpu_generation
                         or ", ".join(sorted(g.noise.generations if g.noise else ())) or "–", "–",
                         _("the same CPU generation"), _("not compared: another CPU generation")])
        rows += [[_(then[k].label), _("missing"), then[k].text(), "–", _("present"), _("FAIL")] for k in g.missing]
        base, cur = g.verdicts or ("–", "–")
        rows.append([_("accuracy (every check and metric)"), _verdict(cur), _verdict(base), "–",
                     _("no metric lost, failed, or halfway to its threshold"), _("FAIL") if g.accuracy else _("PASS")])
        b = g.baseline.provenance
        # the gate's own lines (what make check GATE=1 prints) stay as they are written
        return Table([_("metric"), _("this build"), _("baseline"), _("ratio"), _("limit"), _("gate")], rows,
                     caption=_("Regression gate against the recorded baseline ({date}, {commit})",
                               date=b.built_at[:10], commit=b.git_commit[:12]),
                     note=(_("Limits widened to the between-run noise measured on this kind of machine ({source}). ",
                             source=g.noise.source) if g.noise else
                           _("No between-run noise is recorded for this machine kind, model, profile and dtype "
                             "(scripts/repeatability.py); the limits are the card's. ")) +
                          _("A figure beyond its limit fails; make check GATE=1 fails with one line per FAIL row.")
                          + ("".join(f" {line}." for line in g.accuracy)))
