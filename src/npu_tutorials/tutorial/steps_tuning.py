"""Performance tuning, measured: the report's conditions beside a tuned deployment.

Every configuration runs the same measurement (:meth:`PerformanceSteps.point`) at
concurrency 1 and at the sweep's highest concurrency: TPOT with its spread, output
throughput, and the fraction of the measured bandwidth roofline, counting the bytes
a decode step actually reads.  Each of the card's knobs for this backend is measured
alone on top of graph mode, then the knobs that helped beyond the spread, combined
(:mod:`.tuning_plan` decides which servers and which knobs).  The fixed per-token
overhead comes from a tiny model of the same architecture served the same way (its
weights are negligible), so the time per token splits into a bandwidth-bound part and
that overhead.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

from ..core.errors import TutorialError
from ..engine.commands import CONVERTED_ARCHS, deploy_argv, format_command
from ..inputs.convert import ensure_converted
from ..inputs.knobs import resolve_env
from ..inputs.standin import ensure_standin, tiny_config
from ..measure import tuning_plan as plan
from ..measure.efficiency import decode_bytes, mean_decode_context
from ..measure.tuning_plan import GRAPH, SKIP_FAILED
from ..record.headline import roofline_fraction
from ..record.schema import ConcurrencyPoint, Efficiency, Server, Tuning, TuningRow
from ..record import steps
from ..record.schema_base import Message
from .records import RecordSteps
from .state import TutorialState
from .steps_performance import PerformanceSteps
from .steps_serving import ServingSteps


class Swept(NamedTuple):
    """The concurrency sweep's points and the server that measured them (graph mode stands on them where that
    server ran graph mode)."""

    points: list[ConcurrencyPoint]
    server: Server | None


class TuningSteps:
    """The report's conditions beside graph mode, each of the card's knobs, and the best combination."""

    def __init__(self, state: TutorialState, serving: ServingSteps, performance: PerformanceSteps,
                 records: RecordSteps):
        self.s, self.serving, self.performance, self.records = state, serving, performance, records

    def _decode_bytes(self, config: dict) -> float:
        p = self.s.profile
        return float(decode_bytes(config, self.s.dtype, mean_decode_context(p.input_len, p.output_len))["total"])

    def _start(self, what: str, *, flags, env: dict[str, str], label: str, model=None):
        """A graph-mode server of one configuration (the running one stopped first)."""
        pool = self.s.servers
        spec = pool.spec_for("performance", port=self.s.port(), graphs=True, flags=tuple(flags),
                             env=self._knob_env(env), model=model, label=label)
        return pool.start(spec, what)

    def _knob_env(self, env: dict[str, str]) -> dict[str, str]:
        """A configuration's environment as its server gets it: a preload goes in front of the build's own."""
        return resolve_env(env, "", {**os.environ, **self.s.run_env})

    def _measure_config(self, srv, bytes_: float, bw: float | None, out: Tuning, swept: Swept,
                        tag: str = "0") -> TuningRow:
        """Start the server of one configuration (graph mode plus ``srv``'s flags and environment) and measure
        it at concurrency 1 and at the sweep's highest, or take the concurrency sweep's points (``swept``) where
        its own server was this configuration; ``out``: the section so far; ``tag``: this measurement's own
        (its server's log and its prompts)."""
        top = max(self.performance.sweep.concurrency)
        if srv.reused:
            conc = {p.concurrency: p for p in swept.points}
            thr1, tpot1 = conc[1].output_throughput, conc[1].tpot_ms
            thr_top, tpot_top, ttft_top = conc[top].output_throughput, conc[top].tpot_ms, conc[top].ttft_ms
            startup = swept.server.startup_s
        else:
            mode = f" ({self.s.platform.graph_mode})" if srv.name == GRAPH else ""
            with self.s.step(Message.of(steps.TUNING, name=srv.name, mode=mode)):
                self._start(Message.of(steps.SERVER_START_KNOB, name=srv.name), flags=srv.flags, env=srv.env, label=f"-tune{tag}")
                thr1, tpot1, _ = self.performance.point(1, f"tune{tag}-")
                thr_top, tpot_top, ttft_top = self.performance.point(top, f"tune{tag}-")
                startup = self.s.server.startup_s
                log = self.s.server.log_path
                if out.cpu_binding is None and log.is_file():  # vllm-ascend's own CPU binding, as it logged it
                    out.cpu_binding = plan.cpu_binding(log.read_text(errors="replace"))
                self.s.servers.stop()
        return TuningRow(name=srv.name, flags=list(srv.flags), env=dict(srv.env), knobs=list(srv.knobs),
                         startup_s=round(startup, 1), tpot_ms=tpot1, throughput_c1=thr1, throughput_high=thr_top,
                         tpot_high_ms=tpot_top, ttft_high_ms=ttft_top, high_concurrency=top, fraction=roofline_fraction(bytes_, tpot1.median, bw))

    def _measure_knobs(self, srv, bytes_: float, bw: float | None, out: Tuning, swept: Swept,
                       tag: str = "0") -> TuningRow | None:
        """:meth:`_measure_config` for a configuration with knobs: one whose server does not start or dies
        is recorded as not measured (in ``out.skipped``), with the server's own first line, and the section goes
        on."""
        try:
            return self._measure_config(srv, bytes_, bw, out, swept, tag)
        except TutorialError as exc:
            self.s.servers.stop()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            out.skipped[srv.name.removeprefix(f"{GRAPH} + ")] = Message.of(SKIP_FAILED, error=first)
            return None

    def _rounds(self, servers, k: int, bytes_: float, bw: float | None, out: Tuning,
                swept: Swept) -> dict[str, list[TuningRow]]:
        """Each configuration's row per round: ``k`` rounds, each starting every configuration once (the report's
        eager conditions in the first round only: nothing is compared with them), the order reversed every other
        round, so that a host's drift within a round favours none.  A configuration whose server fails in
        any round has no rows (:meth:`_measure_knobs` records why)."""
        per: dict[str, list[TuningRow]] = {srv.name: [] for srv in servers}
        failed: set[str] = set()
        for i in range(k):
            for srv in servers if i % 2 == 0 else servers[::-1]:
                if srv.name in failed or (i and srv.name == plan.EAGER):
                    continue
                index = servers.index(srv)
                tag = f"{index}" if k == 1 else f"{index}r{i}"
                row = (self._measure_knobs if srv.knobs else self._measure_config)(srv, bytes_, bw, out, swept, tag)
                if row is None:
                    failed.add(srv.name)
                    per[srv.name] = []
                else:
                    per[srv.name].append(row)
        return per

    def _combination(self, combo, servers, bytes_: float, bw: float | None, out: Tuning, swept: Swept) -> list:
        """The knobs that helped, combined: measured once (one round), or paired with graph mode over rounds
        of their own."""
        if out.rounds == 1:
            row = self._measure_knobs(combo, bytes_, bw, out, swept, f"{len(servers)}")
            return [row] if row is not None else []
        graph = next(s for s in servers if s.name == GRAPH)
        per = self._rounds([graph, combo], out.rounds, bytes_, bw, out, swept)
        if not per[combo.name]:
            return []
        row = plan.merge_rounds(per[combo.name])
        row.vs_graph = plan.paired_vs(per[combo.name], per[GRAPH])
        return [row]

    def tuning(self, sweep: list[ConcurrencyPoint] | None, efficiency: Efficiency | None,
               server: Server | None) -> Tuning | None:
        """Measure the report's conditions (eager), graph mode, graph mode plus each of the card's knobs for
        this backend alone (in the profiles the card names), then the knobs that helped, combined, and the
        fixed overhead on a tiny model of the same architecture served in the best configuration.  Which
        servers and which knobs: :mod:`npu_tutorials.measure.tuning_plan`.  Reads the concurrency ``sweep``
        (its points stand for graph mode where its ``server`` ran graph mode) and the ``efficiency`` section's
        measured bandwidth (the roofline fraction).  In a profile the card's ``tuning.profiles`` leaves out, the
        recorded tuning instead (:meth:`RecordSteps.from_record`), or None."""
        t = self.s.card.tuning
        if t is None:
            raise TutorialError(f"cards/{self.s.card.key}.yaml has no tuning section")
        if self.s.profile_name not in t.profiles:
            return self.records.from_record(
                "tuning", f"the {self.s.profile_name} profile leaves tuning to the full one (TUTORIAL_PROFILE=full)")
        bw = efficiency.measured_bandwidth if efficiency else None
        config = json.loads((self.s.serve_path / "config.json").read_text())
        bytes_ = self._decode_bytes(config)
        out = Tuning(rows=[])
        self.s.servers.stop()
        rows = out.rows
        conc = {p.concurrency for p in sweep or []}
        swept = Swept(sweep or [], server)
        sweep_ran = 1 in conc and max(self.performance.sweep.concurrency) in conc and server is not None
        environ = {**os.environ, **self.s.run_env}
        mode = ("eager" if self.s.eager else "graph") if sweep_ran else None
        servers, sel = plan.tuning_servers(self.s.card, self.s.backend, self.s.profile_name, environ=environ,
                                           sweep_mode=mode)
        out.rounds = plan.PAIRED_ROUNDS if sel.run else 1
        if out.rounds > 1 and mode == "graph":  # paired rounds measure graph mode in every round
            servers, sel = plan.tuning_servers(self.s.card, self.s.backend, self.s.profile_name, environ=environ)
        out.skipped = dict(sel.skipped)
        out.build_env = {v: environ.get(v, "") for k in sel.run for v in k.env}
        by_name = {k.name: k for k in sel.run}
        per = self._rounds(servers, out.rounds, bytes_, bw, out, swept)
        for srv in servers:
            if per[srv.name]:
                rows.append(plan.merge_rounds(per[srv.name]))
                if srv.knobs and out.rounds > 1:
                    rows[-1].vs_graph = plan.paired_vs(per[srv.name], per[GRAPH])
        measured = [(by_name[r.knobs[0]], r) for r in rows if r.knobs]
        base = plan.graph_row(rows)
        combo = plan.best_combination(measured, base)
        if len(combo) >= 2:
            rows += self._combination(plan.combination_server(combo), servers, bytes_, bw, out, swept)
        best = plan.pick_best(rows[1:], base)
        if t.overhead_model:
            with self.s.step(Message.of(steps.TUNING_OVERHEAD)):
                tiny = ensure_standin(self.s.card, config=tiny_config(self.s.card.config), label="tiny")
                tiny_path = tiny.path
                if self.s.card.architecture in CONVERTED_ARCHS:  # served converted, as the model itself is
                    tiny_path = ensure_converted(tiny.path)
                self._start(Message.of(steps.SERVER_START_TINY), flags=best.flags, env=best.env, model=tiny_path,
                            label="-tiny")
                _, tiny_tpot, _ = self.performance.point(1, "tune-tiny-")
                self.s.servers.stop()
            out.fixed_overhead_ms = tiny_tpot.median
            if bw:
                out.bandwidth_bound_ms = 1000.0 * bytes_ / bw
        argv = deploy_argv(self.s.card, self.s.backend, extra=best.flags)
        out.command = format_command(argv, {**self.s.platform.serve_env(self.s.card), **best.env}, exports=True)
        out.best = best.name
        out.limit = self._limit_text(best, out)
        return out

    def _limit_text(self, best: TuningRow, t: Tuning) -> str:
        if t.fixed_overhead_ms is None or t.bandwidth_bound_ms is None:
            return ""
        tpot = best.tpot_ms.median
        other = tpot - t.bandwidth_bound_ms - t.fixed_overhead_ms
        dominant = max([(t.bandwidth_bound_ms, "the memory bandwidth"), (t.fixed_overhead_ms, "the fixed overhead"),
                        (other, "the time not explained by either")])[1]  # the largest of the three parts
        return (f"Per token in '{best.name}': {tpot:.1f} ms = {t.bandwidth_bound_ms:.1f} ms bandwidth-bound "
                f"(bytes read / measured bandwidth) + {t.fixed_overhead_ms:.1f} ms fixed overhead (the tiny "
                f"model's TPOT: scheduling, sampling, kernel launches) + {other:.1f} ms not explained by either "
                f"(compute and bandwidth below the probe's). {dominant[0].upper() + dominant[1:]} dominates "
                "on this build's device.")


