"""The bf16 rounding floor of a card's checkpoint: the derivation of its logits limits.

  python scripts/bf16_floor.py smollm2-135m-instruct            # into results/methods/
  python scripts/bf16_floor.py KEY --out FILE [--texts 2]

Runs the checkpoint this build would use for KEY (real weights where found, else its stand-in) in
transformers bf16 and fp32 on calibration texts that no check judges (npu_tutorials.measure.floor),
and writes ``bf16-floor-<key>.json``: every text's mean cosine, mean KL and largest per-position
normalized MSE, largest contending-pair error and flips, the limits derived from them (``floor.derive``), the
weights and the provenance.  The card's forward-consistency limits and its split rule are those derived limits;
tests/test_floor.py holds them equal.
"""

import argparse
import json
from pathlib import Path

from . import ROOT, command
from ..engine.backend import describe_environment
from ..inputs.cards import load_card
from ..inputs.convert import as_read
from ..inputs.weights import resolve_weights
from ..measure import floor
from ..record.results import git_commit, now_utc, scrub, write_record


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="card key")
    ap.add_argument("--out", type=Path, default=None, help="default: results/methods/bf16-floor-<key>.json")
    ap.add_argument("--texts", type=int, default=None, help="only the first N calibration texts (tests)")
    a = ap.parse_args()

    card = load_card(a.model)
    w = resolve_weights(card)
    texts = floor.TEXTS[:a.texts] if a.texts else floor.TEXTS
    chats = floor.CHAT_TEXTS[:a.texts] if a.texts else floor.CHAT_TEXTS
    rows = floor.measure_floor(as_read(card.architecture, w.path), texts, chats)  # QWen: its Qwen2-layout conversion
    env = describe_environment("cpu")
    doc = {"schema": 1, "model": card.key,
           "provenance": {"date": now_utc(), "git_commit": git_commit(), "weights": scrub(str(w.label())),
                          "weights_kind": w.kind, "versions": {k: env.versions.get(k) for k in ("torch", "transformers")},
                          "device": "CPU"},
           "method": "transformers bf16 against transformers fp32, the same checkpoint, every position of each "
                     "calibration text and of the fp32 reference's answer to each calibration chat request "
                     "(npu_tutorials.measure.floor)",
           "factor": floor.FACTOR, "floor": rows, "derived": floor.derive(rows)}
    out = a.out or ROOT / "results" / "methods" / f"bf16-floor-{card.key}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_record(doc, out)
    for r in rows:
        print(f"{'chat' if r['chat'] else 'text'} {r['positions']:3d} positions: mean cosine {r['mean_cosine']:.6f}, "
              f"mean KL {r['mean_kl_nats']:.5f}, max nMSE {r['max_nmse_pct']:.3f} %, "
              f"max pair error {r['max_pair_err']:.3f} nats, flips {r['flips']}")
    print(f"derived (x{floor.FACTOR:g}): {json.dumps(doc['derived'])}")
    print(f"wrote {out}")
    return 0


main = command(run)  # scripts/bf16_floor.py and npu-tutorials-bf16-floor
