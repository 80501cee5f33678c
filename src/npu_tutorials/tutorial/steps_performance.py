"""Steps that measure speed: latency against input length, throughput against concurrency, efficiency."""

from __future__ import annotations

import json
import os
import re

from ..record import steps
from ..record.schema_base import Message
from ..measure import efficiency, reference
from ..engine import bandwidth, isolated
from ..engine.bench import run_seed, run_serving_benchmark
from ..inputs.cards import BenchProfile
from ..core.errors import TutorialError
from ..record.headline import roofline_fraction
from ..record.results import scrub
from ..record.schema import Baseline, ConcurrencyPoint, DecodeBytes, Efficiency, LengthPoint, Stat
from .records import RecordSteps
from .state import TutorialState
from .steps_serving import ServingSteps


def _ms(values) -> list[float]:
    return [1000.0 * v for v in values]


# A warning line of vLLM's logger ("WARNING 12-05 09:01:56 [file.py:66] text", after 0.32.0's "(APIServer pid=N) "
# prefix): the logger format of every declared vLLM (vllm/logger.py _FORMAT; tests/test_vllm_releases.py)
WARNING_LINE = re.compile(r"WARNING [\d-]+ [\d:]+ \[([^\]]+)\] (.*)")

class PerformanceSteps:
    """Latency against input length, throughput against concurrency, and efficiency (roofline fraction and
    plain transformers), each on the server in the build's engine dtype."""

    def __init__(self, state: TutorialState, serving: ServingSteps, records: RecordSteps):
        self.s, self.serving, self.records = state, serving, records

    @property
    def sweep(self):
        if not self.s.card.sweeps:
            raise TutorialError(f"cards/{self.s.card.key}.yaml has no sweeps section")
        return self.s.card.sweeps[self.s.profile_name]

    def _bench(self, prof: BenchProfile, name: str):
        return run_serving_benchmark(self.s.servers.ensure("performance"), prof, model=self.s.model,
                                     tokenizer=str(self.s.serve_path), out_dir=self.s.artifacts / "sweeps",
                                     name=self.s.run_name(name), worker=self.s.bench_worker())

    def input_length_sweep(self) -> list[LengthPoint]:
        """Per input length: requests one at a time (TTFT = prefill latency, TPOT = decode), then all at once."""
        reference.release()  # the engine needs the memory under load more than the reference does now
        sw, rows = self.sweep, []
        with self.s.step(Message.of(steps.INPUT_LENGTH_SWEEP)):
            for n_in in self.s.progress.iterate(sw.input_lens, "input length point"):
                alone = self._bench(BenchProfile(num_prompts=sw.requests_per_point, input_len=n_in,
                                                 output_len=sw.sweep_output_len, max_concurrency=1), f"len{n_in}-c1")
                together = self._bench(BenchProfile(num_prompts=sw.requests_per_point, input_len=n_in,
                                                    output_len=sw.sweep_output_len), f"len{n_in}-all")
                rows.append(LengthPoint(input_len=n_in, prefill_ms=Stat.of(_ms(alone.data["ttfts"])),
                                        tpot_ms=Stat.of(alone.per_request_tpot_ms()),
                                        ttft_concurrent_ms=Stat.of(_ms(together.data["ttfts"])),
                                        concurrent_requests=sw.requests_per_point))
        return rows

    def point(self, n: int, name: str) -> tuple[Stat, Stat, Stat]:
        """(output throughput over repeated runs, TPOT and TTFT over their requests) at concurrency ``n``,
        on the card's base conditions for this profile."""
        sw, base = self.sweep, self.s.profile
        runs = [self._bench(BenchProfile(num_prompts=max(2, sw.rounds * n), input_len=base.input_len,
                                         output_len=base.output_len, max_concurrency=n), f"{name}{n}-r{r}")
                for r in range(max(1, sw.repeats))]
        return (Stat.of([r.data["output_throughput"] for r in runs]),
                Stat.of([t for r in runs for t in r.per_request_tpot_ms()]),
                Stat.of([t for r in runs for t in _ms(r.data["ttfts"])]))

    def concurrency_sweep(self) -> list[ConcurrencyPoint]:
        """Output throughput at each concurrency (``repeats`` runs of ``rounds`` x concurrency requests, at least 2)."""
        reference.release()
        rows = []
        with self.s.step(Message.of(steps.CONCURRENCY_SWEEP)):
            for n in self.s.progress.iterate(self.sweep.concurrency, "concurrency point"):
                thr, tpot, ttft = self.point(n, "conc")
                rows.append(ConcurrencyPoint(concurrency=n, output_throughput=thr, tpot_ms=tpot, ttft_ms=ttft,
                                             speedup=1.0, efficiency=1.0))
        one = rows[0].output_throughput.median
        for r in rows:
            r.speedup = r.output_throughput.median / one
            r.efficiency = r.speedup / r.concurrency
        return rows

    def efficiency(self, conc: list[ConcurrencyPoint] | None) -> Efficiency:
        """Roofline fraction at concurrency 1 of the concurrency sweep ``conc``, and plain transformers on the same
        conditions (in a profile whose sweep sets ``transformers_baseline: false``, the recorded baseline:
        :meth:`from_record`).

        Stops the server first: the bandwidth probe and the baseline each run on the device in a
        process of their own that has exited before anything else uses it."""
        if not conc:
            raise TutorialError("call concurrency_sweep() first: efficiency reads its concurrency-1 point")
        one = next(r for r in conc if r.concurrency == 1)
        self.s.servers.stop()
        with self.s.step(Message.of(steps.BANDWIDTH)):
            bw = bandwidth.measure(self.s.backend, self.s.env.device_name, env={**os.environ, **self.s.device_env})
        base = self.s.profile
        config = json.loads((self.s.serve_path / "config.json").read_text())
        context = efficiency.mean_decode_context(base.input_len, base.output_len)
        d = efficiency.decode_bytes(config, self.s.dtype, context)
        decode = DecodeBytes(**{k: d[k] for k in DecodeBytes.model_fields})
        achieved = decode.total / (one.tpot_ms.median / 1000.0)
        out = Efficiency(decode_bytes=decode, tpot_ms=one.tpot_ms, achieved_bytes_per_s=achieved,
                         measured_bandwidth=bw.measured_bytes_per_s, bandwidth_method=bw.how,
                         nominal_bandwidth=bw.nominal_bytes_per_s, nominal_source=bw.nominal_source,
                         fraction=roofline_fraction(decode.total, one.tpot_ms.median, bw.measured_bytes_per_s))
        if self.sweep.transformers_baseline:
            out.baselines = self._transformers_baseline(conc)
        else:
            why = (f"the {self.s.profile_name} profile leaves the transformers baseline to the full one "
                   "(TUTORIAL_PROFILE=full)")
            out.baselines = self.records.from_record("transformers_baseline", why) or []
        return out

    def _transformers_baseline(self, conc) -> list[Baseline]:
        """Plain transformers ``generate`` at concurrency 1 and the sweep's highest, on the prompts vLLM got."""
        base = self.s.profile
        reference.release()  # the baseline loads the model again; do not hold two copies
        device = self.s.platform.torch_device
        one = next(r for r in conc if r.concurrency == 1)
        top = max(r.concurrency for r in conc)
        points = [one, next(r for r in conc if r.concurrency == top)]
        # the prompts the first vLLM run at each concurrency sent, the first b of them; one model load for all
        spec = [dict(batch=p.concurrency, input_len=base.input_len, output_len=base.output_len,
                     bench_seed=run_seed(f"conc{p.concurrency}-r0"),
                     bench_num_prompts=max(2, self.sweep.rounds * p.concurrency)) for p in points]
        sizes = " and ".join(str(p.concurrency) for p in points)
        with self.s.step(Message.of(steps.TRANSFORMERS_BASELINE,
                                     sizes=str(sizes))):
            res = isolated.call("npu_tutorials.measure.efficiency:hf_generate_throughput_points",
                                str(self.s.serve_path), spec, device, self.s.dtype,
                                repeats=max(1, self.sweep.repeats), threads=self.s.threads,
                                preload=list(self.s.platform.preload), timeout=3600,
                                env={**os.environ, **self.s.device_env},
                                what=f"the transformers baseline (batch {sizes})")
        baselines = []
        for point, r in zip(points, res):
            thr = Stat.of(r["output_tokens_per_s_runs"])
            baselines.append(Baseline(batch=point.concurrency, input_len=base.input_len, output_len=base.output_len,
                                      dtype=self.s.dtype, device=device, output_tokens_per_s=thr,
                                      vllm_output_tokens_per_s=point.output_throughput,
                                      speedup=point.output_throughput.median / thr.median))
        return baselines

    def known_limitations(self) -> list[str]:
        """Warnings the server printed in this build (deduplicated): what this backend ignored or lacked."""
        seen: dict[str, str] = {}
        lines = [line for log in sorted(self.s.artifacts.glob("server-*.log")) for line in
                 log.read_text(errors="replace").splitlines()]
        for line in lines:
            m = WARNING_LINE.search(line)
            if m:
                key = re.sub(r"\d+(\.\d+)?", "N", m.group(2))[:220]
                seen.setdefault(key, m.group(2)[:220])
        return [scrub(v, self.s.path_placeholders()) for v in seen.values()]
