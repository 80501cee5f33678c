#!/usr/bin/env python
"""Negative controls: the smallest perturbation each check detects.

  python scripts/negative_controls.py tiny --out negative-controls.json
  python scripts/negative_controls.py qwen2.5-0.5b --out FILE.json [--weights PATH]

Serves the right checkpoint, then copies of it with one layer's MLP
down-projection perturbed by rel x its RMS (seeded Gaussian noise) for each
rel of a fixed ladder (one server per rung), runs every engine-vs-reference
check (last-position logits, every-position consistency, greedy agreement,
text consistency) against the fp32 reference of the RIGHT checkpoint, and
writes, per check and per metric, the smallest rel whose verdict is FAIL,
with every rung's figures and the provenance (date, git commit, backend,
dtype, model, vLLM version).  ``tiny`` is the 2-layer test stand-in of the
Qwen2.5-0.5B card.  Run it alone: it starts up to ten engines in a row.
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
    ap.add_argument("model", help="'tiny' or a card key (e.g. qwen2.5-0.5b)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--weights", type=Path, help="checkpoint folder (default: the card's stand-in)")
    ap.add_argument("--layer", type=int, default=0, help="layer whose MLP down-projection is perturbed")
    ap.add_argument("--seed", type=int, default=0, help="seed of the perturbation noise")
    ap.add_argument("--ladder", default=None, help="comma-separated relative RMS values (default: controls.LADDER)")
    ap.add_argument("--spec", choices=("tiny", "default"), default=None,
                    help="which check set (default: tiny for the tiny stand-in, else the tutorials' own)")
    a = ap.parse_args()

    from npu_tutorials import accuracy, controls
    from npu_tutorials.backend import describe_environment, detect_backend, engine_dtype
    from npu_tutorials.cards import load_card
    from npu_tutorials.commands import CONVERTED_ARCHS, build_env, server_argv
    from npu_tutorials.results import git_commit, now_utc
    from npu_tutorials.server import VLLMServer, free_port
    from npu_tutorials.standin import ensure_standin, tiny_config

    t0 = time.monotonic()
    tiny = a.model == "tiny"
    card = load_card("qwen2.5-0.5b" if tiny else a.model)
    if a.weights:
        right, weights = a.weights, f"{a.weights}"
    else:
        info = ensure_standin(card, config=tiny_config(card.config) if tiny else None, label="tiny" if tiny else "")
        right, weights = info.path, f"stand-in seed {info.seed}, sha256 {info.sha256[:12]}"
    if card.architecture in CONVERTED_ARCHS:
        from npu_tutorials.convert import ensure_converted

        right = ensure_converted(right)
    backend = detect_backend()
    dtype, dtype_note = engine_dtype(card.serve.dtype, backend)
    gen = json.loads((right / "generation_config.json").read_text()) if (right / "generation_config.json").is_file() else {}
    eos = gen.get("eos_token_id")
    stop_ids = eos if isinstance(eos, list) else ([eos] if eos is not None else None)
    spec = (controls.tiny_spec if (a.spec or ("tiny" if tiny else "default")) == "tiny" else controls.default_spec)(stop_ids)
    ladder = tuple(float(x) for x in a.ladder.split(",")) if a.ladder else controls.LADDER
    eager = backend == "cpu" and not card.serve.enforce_eager  # the tutorials' CPU builds run eager
    extra = list(accuracy.RAW_LOGITS_FLAGS) + (["--enforce-eager"] if eager else [])
    max_len = card.serve.cpu_max_model_len if backend == "cpu" else None
    env = describe_environment(backend)

    def serve(path: Path) -> VLLMServer:
        port = free_port()
        argv = server_argv(card, path, backend, host="127.0.0.1", port=port, extra=extra, native=False, dtype=dtype,
                           max_model_len=max_len)
        return VLLMServer(argv, host="127.0.0.1", port=port, env=build_env(card, backend),
                          log_path=Path(tempfile.gettempdir()) / f"negative-controls-{path.name}.log")

    with tempfile.TemporaryDirectory(prefix="negative-controls-") as work:
        res = controls.run_ladder(serve, right, right, spec, card.serve.served_model_name, card.vocab_size,
                                  Path(work), ladder=ladder, layer=a.layer, seed=a.seed,
                                  log=lambda m: print(m, flush=True))
    doc = {
        "schema": 1,
        "provenance": {"date": now_utc(), "git_commit": git_commit(), "backend": backend,
                       "device": f"{env.device_name} x {env.device_count}", "dtype": dtype, "dtype_note": dtype_note,
                       "model": "tiny stand-in of " + card.key if tiny else card.key, "weights": weights,
                       "versions": env.versions, "wall_time_s": round(time.monotonic() - t0, 1)},
        "perturbation": {"definition": "w + rel * rms(w) * N(0, 1), noise from torch.Generator().manual_seed(seed), "
                                       "cast back to the tensor's dtype",
                         "tensor": controls.down_proj_name(json.loads((right / "config.json").read_text()), a.layer),
                         "layer": a.layer, "seed": a.seed, "ladder": list(ladder)},
        "reference": "transformers fp32 on the CPU, the right (unperturbed) checkpoint",
        "spec": spec.to_dict(),
        **res,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    print("smallest perturbation that fails each check:", json.dumps(res["first_fail"]))
    for c, m in res["first_fail_by_metric"].items():
        print(f"  {c}: " + ", ".join(f"{k} {v}" for k, v in m.items()))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
