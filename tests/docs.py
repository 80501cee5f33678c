"""Synthetic results documents for tests of views, checks, the landing page and gates."""

from __future__ import annotations

from npu_tutorials.record.schema import (Benchmark, BenchConditions, Check, ConcurrencyPoint, Conditions, Device,
                                         LogitsAgreement, Histogram, Machine, Memory, Provenance, ResultsDoc, Server,
                                         Stat, WeightsInfo)


def machine(backend="cpu", device="AMD EPYC", bf16=True, vllm="0.32.0", **kw) -> Machine:
    devices = [] if backend == "cpu" else [Device(index=i, name=device, memory_gib=64.0) for i in range(kw.pop("n", 1))]
    return Machine(backend=backend, cpu_model="AMD EPYC" if backend == "cpu" else "Kunpeng-920", cpu_count=2,
                   cpu_native_bf16=bf16, memory_gib=24.0, devices=devices,
                   versions={"vllm": vllm, "vllm_ascend": kw.pop("vllm_ascend", None), "torch": "2.13.0"}, **kw)


def make_doc(model="qwen2.5-0.5b", *, built_at="2026-11-29T10:00:00+00:00", commit="abc123", status="complete",
             throughput=100.0, ttft=50.0, tpot=20.0, passed=True, weights="stand-in", profile="quick",
             mach: Machine | None = None, dtype="bfloat16") -> ResultsDoc:
    m = mach or machine()
    w = WeightsInfo(kind=weights, source="stand-in" if weights == "stand-in" else "modelscope",
                    label=f"{weights} weights", seed=42 if weights == "stand-in" else None)
    doc = ResultsDoc(model=model, provenance=Provenance(
        built_at=built_at, git_commit=commit, backend=m.backend, device=m.device_label, machine=m, weights=w,
        profile=profile, engine_dtype=dtype, wall_time_s=12.5, status=status,
        failure=None if status == "complete" else "the server died"))
    r = doc.results
    r.conditions = Conditions(profile=profile, dtype=dtype, eager=True)
    r.server = Server(command="python -m vllm.entrypoints.openai.api_server --model <weights>",
                      base_url="http://127.0.0.1:8000", startup_s=30.0, models=["m"])
    r.benchmark = Benchmark(name="bench", conditions=BenchConditions(num_prompts=8, input_len=5, output_len=32,
                                                                     request_rate="inf"),
                            command="vllm bench serve ...", summary={"output_throughput": throughput,
                                                                     "median_ttft_ms": ttft,
                                                                     "completed": 8, "failed": 0},
                            ttft_ms=[ttft] * 8, tpot_ms=[tpot] * 8, itl_ms=[tpot] * 16)
    r.logits_agreement = LogitsAgreement(
        rows=[], summary={"nmse_pct": 0.02, "cosine": 0.9999, "top1_pct": 100.0, "top5_pct": 100.0, "kl_nats": 1e-5},
        thresholds={"nmse_pct_max": 1.0, "top1_pct_min": 100.0},
        checks=[Check(metric="normalized MSE", measured="0.02 %", threshold="< 1.0 %", passed=passed)],
        passed=passed, engine_dtype=dtype, error_histogram=Histogram(edges=[-1.0, 0.0, 1.0], counts=[3, 4]),
        scatter_reference=[0.0, 1.0], scatter_engine=[0.0, 1.0])
    r.memory = Memory(host_peak_rss_mib=3584.0, kv_cache_tokens=18674, kv_cache_gib=2.0, samples=40)
    return doc


def sweep_doc(model="palmyra-mini", throughputs=(10.0, 18.0), **kw) -> ResultsDoc:
    doc = make_doc(model, **kw)
    doc.results.benchmark = None
    doc.results.concurrency_sweep = [
        ConcurrencyPoint(concurrency=c, output_throughput=Stat.of([t]), tpot_ms=Stat.of([100.0, 110.0]),
                         ttft_ms=Stat.of([300.0]), speedup=t / throughputs[0], efficiency=t / throughputs[0] / c)
        for c, t in zip((1, 16), throughputs)]
    return doc
