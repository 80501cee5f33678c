#!/usr/bin/env python
"""Run one model's headline measurements twice and print the run-to-run difference of each.

  python scripts/repeatability.py tiny [--out FILE.json]
  python scripts/repeatability.py qwen2.5-0.5b [--profile quick] [--out FILE.json]

Each run starts its own server (as two builds would), then measures with the
functions the tutorials use: ``vllm bench serve`` with the card's profile
(``--repeats`` runs), a concurrency sweep, the roofline fraction at
concurrency 1 (bytes read per decode step / TPOT over the measured
bandwidth) and the plain-transformers baseline under the same conditions (in
a process of its own).  Goal on a 2-core CPU machine: every figure within
``--tolerance`` (10 %) of the other run.  ``tiny`` is the test stand-in.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from npu_tutorials.errors import run_cli  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="'tiny' or a card key")
    ap.add_argument("--profile", default="quick", choices=("quick", "full"))
    ap.add_argument("--repeats", type=int, default=2, help="benchmark runs per measurement")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--min-requests", type=int, default=4, help="requests per run at low concurrency")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()

    from npu_tutorials import accuracy, bench, efficiency, isolated, stats, sweeps
    from npu_tutorials.backend import describe_environment, detect_backend, engine_dtype
    from npu_tutorials.cards import Sweep, load_card
    from npu_tutorials.commands import build_env, server_argv
    from npu_tutorials.reference import trim_memory
    from npu_tutorials.results import git_commit, now_utc
    from npu_tutorials.server import VLLMServer, free_port
    from npu_tutorials.standin import ensure_standin, tiny_config
    from npu_tutorials.tutorial import machine_of

    tiny = a.model == "tiny"
    card = load_card("qwen2.5-0.5b" if tiny else a.model)
    info = ensure_standin(card, config=tiny_config(card.config) if tiny else None, label="tiny" if tiny else "")
    trim_memory()
    path = info.path
    backend = detect_backend()
    dtype, _ = engine_dtype(card.serve.dtype, backend)
    prof = card.benchmark.profiles[a.profile]
    conc = [int(x) for x in a.concurrency.split(",")]
    sweep = Sweep(input_lens=[prof.input_len], sweep_output_len=max(prof.output_len, 2), requests_per_point=2,
                  concurrency=conc, rounds=2, baseline_new_tokens=prof.output_len)
    env = describe_environment(backend)
    bw, bw_source = efficiency.device_bandwidth(backend, env.device_name)
    model = card.serve.served_model_name
    eager = backend == "cpu" and not card.serve.enforce_eager
    extra = list(accuracy.RAW_LOGITS_FLAGS) + (["--enforce-eager"] if eager else [])

    def one_run(i: int, work: Path) -> dict:
        port = free_port()
        argv = server_argv(card, path, backend, host="127.0.0.1", port=port, extra=extra, dtype=dtype,
                           max_model_len=card.serve.cpu_max_model_len if backend == "cpu" else None)
        t0 = time.monotonic()
        with VLLMServer(argv, host="127.0.0.1", port=port, env=build_env(card, backend),
                        log_path=work / f"server-{i}.log") as srv:
            with srv.step("the benchmark"):
                runs = bench.run_repeated(srv, prof, model=model, tokenizer=str(path), out_dir=work / f"run{i}",
                                          name="bench", repeats=a.repeats)
            h = bench.headline(runs)
            with srv.step("the concurrency sweep"):
                rows = sweeps.concurrency_sweep(srv, sweep, prof, model=model, tokenizer=str(path),
                                                out_dir=work / f"run{i}", repeats=a.repeats,
                                                min_requests=a.min_requests)
        one = rows[0]
        dec = efficiency.checkpoint_decode_bytes(path, dtype, efficiency.mean_decode_context(prof.input_len,
                                                                                             prof.output_len))
        roof = efficiency.roofline(dec["total"], one["summary"]["tpot_ms"]["median"], bw)
        base = isolated.call("npu_tutorials.efficiency:hf_generate_throughput", str(path), 1, prof.input_len,
                             prof.output_len, backend, dtype, repeats=3,  # the first prompt of the conc-1 run
                             bench_seed=bench.run_seed("conc1" if a.repeats == 1 else "conc1-r0"),
                             bench_num_prompts=max(sweep.rounds, a.min_requests), timeout=3600,
                             what="the transformers baseline")
        figures = {
            "bench output throughput (tok/s)": h["output_throughput"]["median"],
            "bench median TTFT (ms)": h["ttft_ms"]["median"],
            "bench median TPOT (ms)": h["tpot_ms"]["median"],
            **{f"throughput at concurrency {r['concurrency']} (tok/s)": r["output_throughput"] for r in rows},
            f"speedup at {rows[-1]['concurrency']} vs 1": rows[-1]["output_throughput"] / one["output_throughput"],
            "TPOT at concurrency 1 (ms)": one["summary"]["tpot_ms"]["median"],
            "roofline fraction at concurrency 1": roof["fraction"],
            "transformers generate, batch 1 (tok/s)": base["output_tokens_per_s"],
            "vLLM speedup over transformers at 1": one["output_throughput"] / base["output_tokens_per_s"],
        }
        spreads = {"bench output throughput": h["output_throughput"], "bench TTFT": h["ttft_ms"],
                   "bench TPOT": h["tpot_ms"], "TPOT at concurrency 1": one["summary"]["tpot_ms"],
                   "transformers batch 1": base["summary"]}
        return {"figures": figures, "spreads": spreads, "wall_s": round(time.monotonic() - t0, 1),
                "bandwidth": bw, "decode_bytes": dec}

    with tempfile.TemporaryDirectory(prefix="repeatability-") as work:
        runs = [one_run(i, Path(work)) for i in range(2)]
    diffs = {}
    print(f"{'figure':45s} {'run 1':>12s} {'run 2':>12s} {'difference':>11s}")
    for k, v1 in runs[0]["figures"].items():
        v2 = runs[1]["figures"][k]
        d = stats.relative_difference(v1, v2) if v1 is not None and v2 is not None else None
        diffs[k] = d
        flag = "" if d is None or d <= a.tolerance else "  > tolerance"
        print(f"{k:45s} {v1:12.4g} {v2:12.4g} {100 * d:10.1f} %{flag}" if d is not None else f"{k:45s} –")
    for i, r in enumerate(runs):
        print(f"run {i + 1} spreads: " + "; ".join(f"{k} {stats.format_summary(s)}" for k, s in r["spreads"].items()))
    within = all(d is not None and d <= a.tolerance for d in diffs.values())
    print(f"every figure within {100 * a.tolerance:.0f} %: {'yes' if within else 'no'}")
    if a.out:
        a.out.write_text(json.dumps({
            "provenance": {"date": now_utc(), "git_commit": git_commit(), "backend": backend, "dtype": dtype,
                           "device": f"{env.device_name} x {env.device_count}", "versions": env.versions,
                           "machine_slug": machine_of(env).slug,  # what make check GATE=1 matches it by
                           "model": ("tiny stand-in of " if tiny else "") + card.key, "profile": a.profile,
                           "bandwidth_source": bw_source},
            "conditions": {"profile": prof.model_dump(), "repeats": a.repeats, "concurrency": conc,
                           "min_requests": a.min_requests},
            "runs": runs, "relative_differences": diffs, "tolerance": a.tolerance, "within_tolerance": within,
        }, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    run_cli(main)
