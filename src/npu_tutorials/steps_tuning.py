"""Performance tuning, measured: the report's conditions beside a tuned deployment.

Every configuration runs the same measurement (:meth:`PerformanceSteps._point`) at
concurrency 1 and at the sweep's highest concurrency: TPOT with its spread, output
throughput, and the fraction of the measured bandwidth roofline, counting the bytes
a decode step actually reads.  The fixed per-token overhead comes from a tiny model
of the same architecture served the same way (its weights are negligible), so the
time per token splits into a bandwidth-bound part and that overhead.
"""

from __future__ import annotations

from .errors import TutorialError
from .schema import Tuning, TuningRow

GRAPH_MODE = {"npu": "ACL graph (vllm-ascend's default without --enforce-eager)",
              "cuda": "CUDA graphs (vLLM's default without --enforce-eager)",
              "cpu": "torch.compile (vLLM's default without --enforce-eager)"}


class TuningSteps:
    def _decode_bytes(self, config: dict) -> float:
        from .efficiency import decode_bytes, mean_decode_context

        p = self.profile
        return float(decode_bytes(config, self.dtype, mean_decode_context(p.input_len, p.output_len))["total"])

    def _measure_config(self, name: str, flags: list[str], startup_s: float, bytes_: float, bw: float | None,
                        env: dict[str, str] | None = None) -> TuningRow:
        top = max(self.sweep.concurrency)
        tag = f"tune{len(self.results.tuning.rows)}-"
        thr1, tpot1, _ = self._point(1, tag)
        thr_top, _, _ = self._point(top, tag)
        fraction = (bytes_ / (tpot1.median / 1000.0)) / bw if bw else None
        return TuningRow(name=name, flags=flags, env=env or {}, startup_s=round(startup_s, 1), tpot_ms=tpot1,
                         throughput_c1=thr1, throughput_high=thr_top, high_concurrency=top, fraction=fraction)

    def tuning(self) -> Tuning:
        """Measure the report's conditions (eager) and graph mode (plus the card's knobs for this backend,
        in the profiles the card names), and the fixed overhead on a tiny model served in graph mode."""
        import json

        from .commands import deploy_argv, format_command
        from .standin import ensure_standin, tiny_config

        t = self.card.tuning
        if t is None:
            raise TutorialError(f"cards/{self.card.key}.yaml has no tuning section")
        eff = self.results.efficiency
        bw = eff.measured_bandwidth if eff else None
        config = json.loads((self.serve_path / "config.json").read_text())
        bytes_ = self._decode_bytes(config)
        self.results.tuning = Tuning(rows=[])
        if self.server is not None:
            self.server.stop()
        rows = self.results.tuning.rows
        conc = {p.concurrency: p for p in self.results.concurrency_sweep or []}
        top = max(self.sweep.concurrency)
        if 1 in conc and top in conc:  # the sweep measured exactly this on the eager server: reuse it
            one = conc[1]
            rows.append(TuningRow(name="report's conditions (eager)", flags=["--enforce-eager"],
                                  startup_s=self.results.server.startup_s, tpot_ms=one.tpot_ms,
                                  throughput_c1=one.output_throughput, throughput_high=conc[top].output_throughput,
                                  high_concurrency=top,
                                  fraction=(bytes_ / (one.tpot_ms.median / 1000.0)) / bw if bw else None))
        else:
            with self.step("tuning: the report's conditions (eager)"):
                self._launch(self.dtype, "server start, eager", label="-eager")
                rows.append(self._measure_config("report's conditions (eager)", ["--enforce-eager"],
                                                 self.server.startup_s, bytes_, bw))
                self.server.stop()
        with self.step(f"tuning: graph mode ({GRAPH_MODE[self.backend]})"):
            self._launch(self.dtype, "server start, graph mode", graphs=True, label="-graphs")
            rows.append(self._measure_config("graph mode", [], self.server.startup_s, bytes_, bw))
            self.server.stop()
        best = rows[-1]
        if self.profile_name in t.knob_profiles:
            for knob in [k for k in t.knobs if self.backend in k.backends]:
                with self.step(f"tuning: graph mode + {knob.name}"):
                    self._launch(self.dtype, f"server start, {knob.name}", graphs=True, flags=knob.flags,
                                 env=knob.env, label=f"-{len(rows)}")
                    row = self._measure_config(f"graph mode + {knob.name}", knob.flags, self.server.startup_s,
                                               bytes_, bw, knob.env)
                    self.server.stop()
                rows.append(row)
                if row.tpot_ms.median < best.tpot_ms.median and row.tpot_ms.q3 < best.tpot_ms.q1:
                    best = row  # better beyond the spread of both
        out = self.results.tuning
        if t.overhead_model:
            with self.step("tuning: fixed overhead on a tiny model of the same architecture"):
                tiny = ensure_standin(self.card, config=tiny_config(self.card.config), label="tiny")
                tiny_path = tiny.path
                if self.card.architecture != "Qwen2ForCausalLM":
                    from .convert import ensure_converted

                    tiny_path = ensure_converted(tiny.path)
                self._launch(self.dtype, "server start, tiny model, graph mode", graphs=True, flags=best.flags,
                             env=best.env, model=tiny_path, label="-tiny")
                _, tiny_tpot, _ = self._point(1, "tune-tiny-")
                self.server.stop()
            out.fixed_overhead_ms = tiny_tpot.median
            if bw:
                out.bandwidth_bound_ms = 1000.0 * bytes_ / bw
        argv = [a for a in deploy_argv(self.card, self.backend) if a != "--enforce-eager"] + list(best.flags)
        from .commands import serve_env

        out.command = format_command(argv, {**serve_env(self.card, self.backend), **best.env}, exports=True)
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


