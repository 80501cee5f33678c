"""Views of the sweeps, the efficiency figures and the tuning comparison."""

from __future__ import annotations

from . import plots
from ..core.errors import TutorialError
from ..core.messages import N_, _, sentences
from ..core.tables import Pre, Table
from .base import BaseViews, memory_note, shown
from .paired import change
from ..engine.platform import platform_for
from ..inputs.knobs import pinned_label, schema_for, version_key
from ..measure.tuning_plan import config_label, graph_row, in_baseline, verdict

GB = 1e9
# the extract the build's vllm-ascend was checked against (tuning_plan.select_knobs, knobs.unsupported), where it is a
# development build (an image built from main): PEP 440 orders X.devN before X, so it never gets X's own extract
DEV_BUILD_CHECKED = N_("This build's vllm-ascend {version} is a development build, which comes before {release} "
                       "(PEP 440): its knobs were checked against the extract of {tag}, the newest supported release "
                       "older than {release} (the pinned one where none is).")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


class PerformanceViews(BaseViews):
    """Latency against input length, throughput against concurrency, efficiency (``show.performance``)."""

    def length_table(self) -> Table:
        """Prefill, decode and concurrent TTFT against the input length."""
        rows = self.need("input_length_sweep")
        sw = self.card.sweeps[self.prov.profile] if self.card.sweeps else None
        out = sw.sweep_output_len if sw else "?"
        return Table([_("input tokens"), _("prefill latency (ms)"), _("TPOT (ms)"),
                      _("TTFT, {n} at once (ms)", n=rows[0].concurrent_requests)],
                     [[r.input_len, r.prefill_ms.text(), r.tpot_ms.text(1), r.ttft_concurrent_ms.text()] for r in rows],
                     caption=_("Latency against input length ({out} output tokens, {profile} profile)", out=out,
                               profile=self.prov.profile),
                     note=_("Each cell: median (interquartile range, number of requests). Prefill latency is the "
                            "time to first token of a request sent alone."))

    def concurrency_table(self) -> Table:
        """Output throughput per concurrency, with speedup and scaling efficiency over concurrency 1."""
        rows = self.need("concurrency_sweep")
        rep = self.reported("scaling")
        last = rows[-1]
        note = _("Output throughput: median over repeated runs (interquartile range, number of runs); TPOT and "
                 "TTFT: median over every request of those runs. Speedup and efficiency use the medians.")
        if rep:
            note += (" " + _("Reported ({hardware}): {speedup}x at 16, {efficiency} % efficiency.",
                             hardware=self.card.reported.hardware, speedup=rep["speedup_16"],
                             efficiency=rep["efficiency_16_pct"]) + " " + self.cite + self.method_note("scaling"))
        if memory_note(self.r.memory, self.backend):
            note += " " + memory_note(self.r.memory, self.backend)
        return Table([_("concurrency"), _("output tok/s"), _("speedup vs 1"), _("efficiency"), _("TPOT (ms)"),
                      _("TTFT (ms)")],
                     [[r.concurrency, r.output_throughput.text(2), f"{r.speedup:.2f}x", f"{100 * r.efficiency:.1f} %",
                       r.tpot_ms.text(), r.ttft_ms.text()] for r in rows],
                     caption=_("Throughput against concurrency: {speedup:.2f}x at {concurrency} ({pct:.1f} % "
                               "efficiency)", speedup=last.speedup, concurrency=last.concurrency,
                               pct=100 * last.efficiency), note=note)

    def sweep_plot(self):
        """The input-length and concurrency sweeps as curves."""
        return plots.sweeps(self.need("input_length_sweep"), self.need("concurrency_sweep"),
                            _("{model} on {backend} ({dtype}, chunked prefill, {profile} profile)",
                              model=self.card.name, backend=self.backend, dtype=self.dtype, profile=self.prov.profile))

    def efficiency_table(self) -> Table:
        """The roofline fraction at concurrency 1 and the transformers baseline on the same conditions."""
        e = self.need("efficiency")
        d = e.decode_bytes
        rows = [[_("bytes one decode step reads"), f"{d.total / GB:.3f} GB ({d.dtype})"],
                ["  " + _("weight matrices"), f"{d.matrices / GB:.3f} GB"],
                ["  " + _("biases and norms"), f"{d.vectors / 1e6:.2f} MB"],
                ["  " + _("input embedding"), _("read in full by lm_head (tied)") if d.tied else
                 _("{kb:.1f} kB (one row)", kb=d.embedding_row / 1e3)],
                ["  " + (_("lm_head (the tied embedding table)") if d.tied else "lm_head"), f"{d.lm_head / GB:.3f} GB"],
                ["  " + _("KV cache at {n:g} tokens of context (mean over the decode steps)", n=d.context_len),
                 f"{d.kv_cache / 1e6:.2f} MB"],
                [_("TPOT at concurrency 1 (vLLM)"), e.tpot_ms.text(1, "ms")],
                [_("achieved read bandwidth (bytes / median TPOT)"), f"{e.achieved_bytes_per_s / GB:.1f} GB/s"],
                [_("measured device bandwidth"), f"{e.measured_bandwidth / GB:.1f} GB/s ({e.bandwidth_method})"
                 if e.measured_bandwidth else e.bandwidth_method]]
        if e.nominal_bandwidth:
            rows.append([_("nominal bandwidth"), f"{e.nominal_bandwidth / GB:.0f} GB/s ({e.nominal_source})"])
        rows.append([_("fraction of the measured roofline reached"), _pct(e.fraction)])
        for b in e.baselines:
            rows.append([_("transformers generate, batch {batch}", batch=b.batch),
                         b.output_tokens_per_s.text(2, "tok/s")])
            rows.append([_("vLLM, concurrency {batch}, same conditions", batch=b.batch),
                         b.vllm_output_tokens_per_s.text(2, "tok/s")])
            rows.append([_("vLLM speedup at {batch}", batch=b.batch), f"{b.speedup:.2f}x"])
        cond = e.baselines[0] if e.baselines else None
        note = _("At concurrency 1 a decode step reads every weight matrix once, one row of the input embedding, "
                 "lm_head, and the KV cache of its context: those bytes over the median TPOT are the bandwidth "
                 "achieved.") + " "
        recorded = self.recorded_note("transformers_baseline")
        if cond:
            where = (_("in the recording build (its own vLLM figure beside it).") + " " + recorded if recorded
                     else _("in this build."))
            note += _("Baseline and vLLM ran the same conditions: {input_len} input and {output_len} output tokens, "
                      "{dtype}, on {device}, {where}", input_len=cond.input_len, output_len=cond.output_len,
                      dtype=cond.dtype, device=cond.device, where=where)
        elif absent := self.absent("transformers_baseline"):
            note += absent.text
        return Table(["", ""], rows, caption=_("Efficiency: memory-bandwidth roofline and the plain-transformers "
                                               "baseline"), note=note)



def _vs_graph(row, base) -> str:
    """A row against graph mode: its verdict, and where paired each figure's median change and interval."""
    said = _(verdict(row, base))
    if not row.vs_graph:
        return said
    parts = [_("{figure} {median} [{low}, {high}]", figure=_("TPOT") if p.key == "tpot_ms" else _("tok/s"),
               median=change(p.median), low=change(p.low).removesuffix(" %"),
               high=change(p.high).removesuffix(" %")) for p in row.vs_graph]
    return f"{said}: {'; '.join(parts)}"


class TuningViews(BaseViews):
    """The tuning comparison: configurations, knobs and the tuned command (``show.tuning``)."""

    def tuning_table(self) -> Table:
        """Each tuning configuration measured on the same conditions: TPOT, throughput, roofline fraction."""
        if absent := self.absent("tuning"):
            return absent
        t = self.need("tuning")
        base = graph_row(t.rows)
        rows = [[config_label(r.name),
                 " ".join([*(f"{k}={v}" for k, v in r.env.items()), *r.flags]) or _("(card defaults)"),
                 r.tpot_ms.text(1), r.throughput_c1.text(2), r.throughput_high.text(1) if r.throughput_high else "–",
                 r.tpot_high_ms.text(1) if r.tpot_high_ms else "–", r.ttft_high_ms.text(0) if r.ttft_high_ms else "–",
                 _pct(r.fraction), f"{r.startup_s:.0f} s", "–" if r is base or base is None else _vs_graph(r, base)]
                for r in t.rows]
        high = next((r.high_concurrency for r in t.rows if r.high_concurrency), None)
        recorded = self.recorded_note("tuning")
        notes = [recorded] if recorded else []
        if t.rounds > 1:
            notes += [_("Measured in {k} paired rounds: each round started graph mode and every knob once, the order "
                        "reversed every other round, so the host's drift cancels in each round's ratio. Each TPOT and "
                        "tok/s cell: the median over the rounds (interquartile range, rounds); the roofline fraction "
                        "counts the bytes a decode step reads (see the efficiency table). Against graph mode: the "
                        "median change of TPOT at 1 and of throughput at {high} within the rounds, with the sign "
                        "test's exact interval; better or worse only when an interval excludes no change, mixed when "
                        "both ways, else no measurable change. The knobs that were better combine into one more "
                        "server, paired with graph mode likewise (of two that set the same thing differently, the "
                        "better one).", k=t.rounds, high=high or _("the highest concurrency"))]
        else:
            notes += [_("Each TPOT and tok/s cell: median (interquartile range, sample size); the roofline fraction "
                        "counts the bytes a decode step reads (see the efficiency table). Against graph mode: better "
                        "or worse when TPOT at 1 or throughput at {high} moved beyond the spread of both "
                        "(interquartile ranges apart), mixed when both ways. The knobs that were better combine into "
                        "one more server (of two that set the same thing differently, the better one).",
                        high=high or _("the highest concurrency"))]
        if t.build_env:
            notes.append(_("This build's environment before any knob: {variables}.",
                           variables=", ".join(f"{k}=" + (v or _("(unset)")) for k, v in t.build_env.items())))
        skipped = t.skipped or self._skipped_knobs(t)
        baseline = {k: why for k, why in skipped.items() if in_baseline(why)}
        if baseline:
            notes.append(_("Already in the baseline (graph mode, and so every row), not measured: {knobs}.",
                           knobs="; ".join(_("{knob}: {why}", knob=k, why=shown(why)) for k, why in baseline.items())))
        if t.cpu_binding:
            notes.append(_("vllm-ascend's own CPU binding (enable_cpu_binding, on by default), as the server's log "
                           "reported it: \"{line}\".", line=t.cpu_binding))
        skipped = {k: why for k, why in skipped.items() if k not in baseline}
        if skipped:
            knobs = "; ".join(_("{knob}: {why}", knob=k, why=shown(why)) for k, why in skipped.items())
            notes.append(_("Not measured in that build: {knobs}.", knobs=knobs) if recorded
                         else _("Not measured in this build: {knobs}.", knobs=knobs))
        if t.best:
            notes.append(_("Best: {configuration}.", configuration=config_label(t.best)))
        if t.limit:
            notes.append(t.limit)
        return Table([_("configuration"), _("flags and environment"), _("TPOT at 1 (ms)"), _("tok/s at 1"),
                      _("tok/s at {high}", high=high or "–"), _("TPOT at {high} (ms)", high=high or "–"),
                      _("TTFT at {high} (ms)", high=high or "–"), _("roofline fraction"), _("start-up"),
                      _("vs graph mode")], rows,
                     caption=_("The report's conditions beside a tuned deployment, {how}",
                               how=_("recorded by an earlier build") if recorded else _("measured in this build")),
                     note=sentences(notes))

    def _skipped_knobs(self, t) -> dict[str, str]:
        """For documents that predate ``skipped``: the knobs of this backend with no row."""
        measured = {k for r in t.rows for k in r.knobs} | {r.name for r in t.rows}
        return {k.name: _("not measured in the {profile} profile (TUTORIAL_PROFILE=full measures it)",
                          profile=self.prov.profile)
                for k in (self.card.tuning.knobs if self.card.tuning else [])
                if self.backend in k.backends and k.name not in measured and f"graph mode + {k.name}" not in measured}

    def tuning_knobs_table(self) -> Table:
        """The card's knobs for this document's backend: what each sets, where it comes from, why it should
        help, and whether this build measured it."""
        absent = self.absent("tuning")
        t = None if absent else self.need("tuning")
        knobs = [k for k in (self.card.tuning.knobs if self.card.tuning else []) if self.backend in k.backends]
        if not knobs:
            raise TutorialError(f"cards/{self.card.key}.yaml has no tuning knobs for {self.backend}")
        note = _("Each NPU knob was checked against {pinned}'s own source (engine flags, configuration keys, the "
                 "settings its performance documents export) when the model card was loaded.", pinned=pinned_label())
        version = self.prov.machine.versions.get("vllm_ascend") if platform_for(self.backend).ascend else None
        dev = version_key(version or "")
        if dev is not None and dev.is_devrelease:
            note = sentences([note, _(DEV_BUILD_CHECKED, version=version, release=str(dev).split(".dev")[0],
                                      tag=schema_for(version)["vllm_ascend"]["tag"])])
        if t is None:
            # the knobs are the card's facts: shown even where no build measured them
            measured, skipped = set(), {k.name: _("no (no build measured the tuning section)") for k in knobs}
            note = absent.text + " " + note
        else:
            measured = {k for r in t.rows for k in r.knobs} | {r.name.removeprefix("graph mode + ") for r in t.rows}
            skipped = t.skipped or self._skipped_knobs(t)

        def measured_here(k) -> str:
            if k.name in measured:
                return _("yes")
            why = skipped.get(k.name, _("no"))
            return _("no, in the baseline: {why}", why=shown(why)) if in_baseline(why) else shown(why)

        rows = [[k.name, " ".join([*(f"{v}={x}" for v, x in k.env.items()), *k.flags]),
                 k.source or "–", _(k.why) if k.why else "–", measured_here(k)] for k in knobs]
        return Table([_("knob"), _("sets"), _("source"), _("why it should help"), _("measured here")], rows,
                     caption=_("The {backend} knobs this page measures, where they come from", backend=self.backend),
                     note=note)

    def tuning_plot(self):
        """Each tuning configuration's TPOT and throughput."""
        if absent := self.absent("tuning"):
            return absent
        o = self.r.from_records.get("tuning")
        title = (_("{model} on {backend}: tuning, recorded {date} on {machine}", model=self.card.name,
                   backend=self.backend, date=o.built_at[:10], machine=o.machine) if o
                 else _("{model} on {backend}: tuning, measured", model=self.card.name, backend=self.backend))
        return plots.tuning(self.need("tuning"), title)

    def tuned_command(self) -> Pre:
        """The serve command of the best tuned configuration (this build's, or the record's, said in a comment)."""
        if absent := self.absent("tuning"):
            return Pre(f"# {absent.text}")
        o = self.r.from_records.get("tuning")
        head = f"# the best configuration as {o.file} recorded it (built {o.built_at[:10]})\n" if o else ""
        return Pre(head + self.need("tuning").command)

