#!/usr/bin/env python
"""Full evaluation without Sphinx: every check the model's card defines, JSON out.

  python scripts/eval_full.py MODEL [--out FILE]

Runs the same steps as the model's tutorial page (serve, functional check,
benchmark, accuracy checks, sweeps where the card has them) and writes the
results JSON (same schema as _build/results/<model>.json).
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from npu_tutorials.errors import run_cli  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.out:
        os.environ["TUTORIAL_RESULTS_DIR"] = str(a.out.resolve().parent)
    from npu_tutorials.tutorial import Tutorial

    tut = Tutorial(a.model)
    acc = tut.card.accuracy
    try:
        tut.prepare_weights()
        tut.prepare_serving_checkpoint()
        tut.start_server()
        print(tut.benchmark().summary() if tut.card.sweeps is None else "sweeps follow", flush=True)
        if acc.logits:
            print(tut.logits_agreement().summary, flush=True)
        if acc.consistency:
            print(tut.forward_consistency().to_dict(), flush=True)
        if acc.qa:
            tut.qa_scores(tut.text_consistency())
        if acc.gsm:
            tut.gsm()
        if acc.greedy:
            print(tut.greedy_table(tut.greedy_agreement()), flush=True)
        if tut.card.sweeps:
            tut.input_length_sweep()
            print(tut.efficiency(tut.concurrency_sweep()), flush=True)
    finally:
        tut.finish()
    path = Path(os.environ.get("TUTORIAL_RESULTS_DIR", "_build/results")) / f"{tut.card.key}.json"
    if a.out and path != a.out:
        path.replace(a.out)
        path = a.out
    print(f"results: {path}")
    print(json.dumps(json.loads(path.read_text())["provenance"], indent=1))
    return 0


if __name__ == "__main__":
    run_cli(main)
