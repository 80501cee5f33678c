"""Negative controls: the smallest fault of each tensor family that each check detects.

  python scripts/negative_controls.py                       # every card, into results/methods/
  python scripts/negative_controls.py qwen2.5-0.5b --out-dir DIR [--families mlp,norms] [--ladder 0.1,1]
  python scripts/negative_controls.py smollm2-135m-instruct --real --engine-override '{"rms_norm_eps": 0.001}'
  python scripts/negative_controls.py smollm2-135m-instruct --real --engine-args '--kv-cache-dtype fp8_e4m3'

For each card: its tiny planted stand-in (the card's architecture shrunk to 2
layers: Qwen2 with a tied head, first-generation QWen served through the
converter, palmyra-mini's untied head), served as the right checkpoint, then
copies of it with every tensor of one family (embedding/head, attention, MLP,
norms) perturbed by rel x its RMS (seeded Gaussian noise), one server per
rung, climbing the ladder until every metric of the card's checks has failed.
The checks are the card's own (its prompts and thresholds, the objects its
page uses), run against the fp32 reference of the RIGHT checkpoint.  Writes
``negative-controls-<card>.json`` per card: each family's first failing rel
per check and per metric, every rung's figures, a digest of the check code and
thresholds, and the provenance (date, commit, backend, dtype, vLLM version).

With ``--real``, the record also holds the engine-only faults (``controls.config_faults``): the right
checkpoint served with ``--hf-overrides`` that make vLLM misread one config value (the RoPE base, the RoPE
scaling, the norm epsilon) while the fp32 reference keeps the true config; the precision faults
(``controls.PRECISION_FAULTS``: the KV cache in fp8, where the engine offers it); and the false alarms: the right
engine's greedy check on fifty prompts that no card judges (``checks.held_out``).  ``--engine-override JSON`` and
``--engine-args FLAGS`` run only that fault of your own (no ladder, no record) and print every check's verdict.
"""

import argparse
import json
import shlex
import tempfile
import time
from pathlib import Path

from . import ROOT, command
from ..checks import controls, held_out
from ..core.errors import TutorialError
from ..engine.backend import describe_environment, detect_backend
from ..engine.platform import platform_for
from ..engine.server import VLLMServer, free_port
from ..inputs.cards import known_models, load_card
from ..inputs.convert import as_read
from ..inputs.standin import ensure_standin, tiny_config
from ..inputs.weights import resolve_weights
from ..measure import accuracy
from ..record.results import git_commit, now_utc, write_record


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="card keys (default: every card)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "methods")
    ap.add_argument("--families", default=None, help="comma-separated tensor families (default: all)")
    ap.add_argument("--ladder", default=None, help="comma-separated relative RMS values (default: controls.LADDER)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the perturbation noise")
    ap.add_argument("--real", action="store_true", help="the card's real weights as the right checkpoint (a card "
                    "with packaged weights: every build has them), not its tiny planted stand-in")
    ap.add_argument("--engine-override", action="append", default=[], metavar="JSON",
                    help="serve the right checkpoint with vLLM's --hf-overrides JSON and print each check's verdict "
                         "(repeatable; no ladder, no record)")
    ap.add_argument("--engine-args", action="append", default=[], metavar="FLAGS",
                    help="serve the right checkpoint with these vLLM server flags, e.g. '--kv-cache-dtype fp8_e4m3', "
                         "and print each check's verdict (repeatable; no ladder, no record)")
    a = ap.parse_args()
    overrides = []
    for text in a.engine_override:
        try:
            overrides.append(json.loads(text))
        except json.JSONDecodeError as exc:
            raise TutorialError(f"--engine-override {text!r} is not JSON: {exc.msg}") from None
        if not isinstance(overrides[-1], dict):
            raise TutorialError(f"--engine-override {text!r}: give a JSON object of config values")
    faults_given = {f"override {i + 1}": {"override": o} for i, o in enumerate(overrides)}
    faults_given.update({f"flags {i + 1}": {"args": shlex.split(t)} for i, t in enumerate(a.engine_args)})

    models = a.models or known_models()
    families = tuple(a.families.split(",")) if a.families else tuple(controls.FAMILIES)
    for f in families:
        controls.family_tensors([], f)  # an unknown family: one line
    ladder = tuple(float(x) for x in a.ladder.split(",")) if a.ladder else controls.LADDER
    backend = detect_backend()
    env = describe_environment(backend)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    for key in models:
        t0 = time.monotonic()
        card = load_card(key)
        if not card.accuracy.model_dump(exclude_none=True):
            raise TutorialError(f"cards/{key}.yaml declares no engine-vs-reference check")
        if a.real:
            w = resolve_weights(card, "real")
            right, what = w.path, f"real checkpoint: {w.label()}"
        else:
            info = ensure_standin(card, config=tiny_config(card.config), label="tiny")
            right = info.path
            what = (f"tiny planted stand-in of {card.key} (2 layers, hidden 256), seed {info.seed}, "
                    f"sha256 {info.sha256[:12]}")
        right = as_read(card.architecture, right)
        plat = platform_for(backend)
        plan = plat.plan(card, None, env.device_name, env.soc_version)
        dtype = plan.accuracy_dtype  # as the pages' checks run
        dtype_note = plan.dtype.why if dtype == plan.dtype.dtype else ""
        gen = json.loads((right / "generation_config.json").read_text()) \
            if (right / "generation_config.json").is_file() else {}
        eos = gen.get("eos_token_id")
        stop_ids = eos if isinstance(eos, list) else ([eos] if eos is not None else None)
        spec = controls.spec_for_card(card, stop_ids)
        def serve(path: Path, flags: tuple[str, ...] = (), card=card, plat=plat, plan=plan) -> VLLMServer:
            port = free_port()
            extra = (*accuracy.RAW_LOGITS_FLAGS, *flags)
            spec = plat.server_spec(card, plan, "accuracy", model=path, host="127.0.0.1", port=port,
                                    extra=extra, native=False, in_process=True)
            return VLLMServer(list(spec.argv), host="127.0.0.1", port=port, env=spec.environ, backend=backend,
                              log_path=Path(tempfile.gettempdir()) / f"negative-controls-{path.name}.log")

        print(f"{key}: the card's checks {', '.join(spec.checks)} on its {what}", flush=True)
        log = lambda m: print("  " + m, flush=True)  # noqa: E731
        if faults_given:
            faults = faults_given
            for name, r in controls.run_engine_faults(serve, right, right, spec, card.serve.served_model_name,
                                                      card.vocab_size, faults, log).items():
                for check, v in r.get("results", {}).items():
                    print(f"  {name} {check}: {'PASS' if v['passed'] else 'FAIL'}", flush=True)
                    for m in v["checks"]:
                        print(f"    {'PASS' if m['passed'] else 'FAIL'}  {m['metric']}: {m['measured']} "
                              f"(limit {m['threshold']})", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="negative-controls-") as work:
            res = controls.run_ladder(serve, right, right, spec, card.serve.served_model_name, card.vocab_size,
                                      Path(work), ladder=ladder, families=families, seed=a.seed, log=log)
        if a.real:
            config = json.loads((right / "config.json").read_text())
            res["engine_faults"] = controls.run_engine_faults(
                serve, right, right, spec, card.serve.served_model_name, card.vocab_size,
                {**controls.config_faults(config), **controls.PRECISION_FAULTS}, log)
            if spec.greedy is not None:  # false alarms: the right engine on fifty prompts no card judges
                with serve(right) as srv:
                    res["held_out"] = held_out.false_alarms(srv, card.serve.served_model_name, right, spec.greedy,
                                                            spec.splits, card.vocab_size)
                h = res["held_out"]
                log(f"held-out prompts: {h['false_alarms']} false alarm(s) in {h['prompts']} "
                    f"(95 % interval {h['interval_pct'][0]:.1f}-{h['interval_pct'][1]:.1f} %), greedy verdict "
                    f"{'PASS' if h['verdict']['passed'] else 'FAIL'}")
        doc = {
            "schema": 2,
            "provenance": {"date": now_utc(), "git_commit": git_commit(), "backend": backend,
                           "device": f"{env.device_name} x {env.device_count}", "dtype": dtype,
                           "dtype_note": dtype_note, "model": card.key, "architecture": card.architecture,
                           "weights": what, "weights_kind": "real" if a.real else "stand-in",
                           "versions": env.versions, "wall_time_s": round(time.monotonic() - t0, 1)},
            "perturbation": {"definition": "w + rel * rms(w) * N(0, 1) for every tensor of the family, noise from "
                                           "torch.Generator().manual_seed(seed), cast back to the tensor's dtype",
                             "families": {f: controls.FAMILIES[f] for f in families}, "seed": a.seed,
                             "ladder": list(ladder)},
            "reference": "transformers fp32 on the CPU, the right (unperturbed) checkpoint",
            "spec": spec.to_dict(),
            "check_digest": controls.check_digest(spec),
            **res,
        }
        out = a.out_dir / f"negative-controls-{key}{'-real' if a.real else ''}.json"
        write_record(doc, out)
        for fam, r in res["families"].items():
            print(f"  {fam}: first FAIL per check {json.dumps(r['first_fail'])}")
        print(f"wrote {out}", flush=True)
    return 0


main = command(run)  # scripts/negative_controls.py and npu-tutorials-negative-controls
