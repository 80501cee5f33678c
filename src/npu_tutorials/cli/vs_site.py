"""Hold your own benchmark run against the page: is your server as fast as the one the page measured, within the
noise of the page's own repeated runs?

  python scripts/vs_site.py qwen2.5-0.5b qwen2.5-0.5b-bench.json [--backend npu] [--device 910B] [--dtype bfloat16]

RESULT is the file the page's benchmark command writes ("Deploy it yourself": vllm bench serve ... --save-result
--save-detailed), run on your host as it stands.  The page's document is the newest complete one of the model on
your backend (and device, where you name part of it), this build's or a recorded one.  A file of another
benchmark, or a run at other conditions (prompts, lengths, rate, concurrency, dtype), is refused in one line.
Each figure: yours, the page's median with its spread and sample size, the ratio, and whether it is beyond what
the page's repeated runs make ordinary: their range (throughput) or their requests' interquartile range (TTFT,
TPOT), widened by the between-run noise limit for that machine kind (npu_tutorials.checks.vs_site).
"""

import argparse

from . import command
from ..checks import vs_site
from ..engine.backend import BACKENDS, detect_backend
from ..inputs.cards import load_card
from ..record.results import document_id


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a card key (the page's model)")
    ap.add_argument("result", help="the result file of the page's benchmark command, run on your host")
    ap.add_argument("--backend", choices=BACKENDS, default=None, help="your backend (default: this host's)")
    ap.add_argument("--device", default="", help="part of your device's name, to pick the page's run on it")
    ap.add_argument("--dtype", default=None, help="the dtype your server ran (checked against the page's)")
    a = ap.parse_args()
    card = load_card(a.model)
    path, doc, rows = vs_site.hold(a.result, card.key, card, a.backend or detect_backend(), a.device, a.dtype)
    p = doc.provenance
    print(f"your run ({a.result}) against document {document_id(path)}: {p.device}, {p.backend}, "
          f"{p.engine_dtype}, {p.built_at[:10]}, commit {p.git_commit[:12]}")
    width = max(len(r["label"]) for r in rows)
    for r in rows:
        lo, hi = r["band"]
        print(f"  {r['label']:<{width}}  yours {r['yours']:.4g} {r['unit']}  page {r['page']}  ratio {r['ratio']:.3f}"
              f"  ordinary {lo:.4g}-{hi:.4g}: {r['verdict']}")
    return 0


main = command(run)  # scripts/vs_site.py and npu-tutorials-vs-site
