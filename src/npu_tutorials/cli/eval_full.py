"""Full evaluation without Sphinx: every check the model's card defines, JSON out.

  python scripts/eval_full.py MODEL [--out FILE]

Runs the same steps as the model's tutorial page (serve, functional check,
benchmark, accuracy checks, sweeps where the card has them) and writes the
results JSON (same schema as _build/results/<model>.json).
"""

import argparse
import os
from pathlib import Path

from ..tutorial import Tutorial
from . import command


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.out:
        os.environ["TUTORIAL_RESULTS_DIR"] = str(a.out.resolve().parent)

    tut = Tutorial(a.model)
    card, acc = tut.card, tut.card.accuracy
    try:
        tut.prepare_weights()
        tut.prepare_serving_checkpoint()
        tut.start_server()
        if card.sweeps is None:
            tut.benchmark()
            print(tut.show.serving.bench_table(), flush=True)
        if acc.logits:
            tut.logits_agreement()
            print(tut.show.accuracy.logits_verdict(), flush=True)
        if acc.consistency:
            tut.forward_consistency()
            print(tut.show.accuracy.consistency_verdict(), flush=True)
        if acc.chat_consistency:
            tut.forward_consistency(chat=True)
            print(tut.show.accuracy.consistency_verdict("chat_consistency"), flush=True)
        if acc.qa:
            tut.text_consistency()
            tut.qa_scores()
            print(tut.show.text.text_verdict(), flush=True)
        if acc.gsm:
            tut.gsm()
        if acc.greedy:
            tut.greedy_agreement()
            print(tut.show.text.greedy_verdict(), flush=True)
        if card.sweeps:
            tut.input_length_sweep()
            tut.concurrency_sweep()
            tut.efficiency()
            print(tut.show.performance.efficiency_table(), flush=True)
            if card.tuning:
                tut.tuning()
                print(tut.show.tuning.tuning_table(), flush=True)
        path = tut.finish()
    except BaseException:
        tut.abandon("eval_full.py stopped before the end")
        raise
    if a.out and path != a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        path.replace(a.out)
        path = a.out
    print(f"results: {path}")
    print(tut.show.provenance())
    return 0


main = command(run)  # scripts/eval_full.py and npu-tutorials-eval-full
