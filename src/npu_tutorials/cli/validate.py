"""Quick validation: load the model in the vLLM server and answer one request.

  python scripts/validate.py MODEL          (e.g. palmyra-mini)

Uses the same TUTORIAL_* settings as the site (TUTORIAL_BACKEND, TUTORIAL_WEIGHTS,
TUTORIAL_MODEL_PATH_<MODEL>); exits 0 when the server answered.
"""

import argparse

from ..tutorial import Tutorial
from . import command


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    a = ap.parse_args()

    tut = Tutorial(a.model)
    try:
        tut.prepare_weights()
        tut.prepare_serving_checkpoint()
        srv = tut.start_server()
        f = tut.card.functional
        with tut.step("one request"):
            r = srv.post("/v1/completions", {"model": tut.card.serve.served_model_name, "prompt": f.prompt,
                                             "max_tokens": 16, "temperature": 0})
        print(f"backend {tut.state.backend}, {tut.state.weights.label()}")
        print(f"server ready in {srv.startup_s:.0f} s; {f.prompt!r} -> {r['choices'][0]['text']!r}")
    finally:
        tut.stop()  # the server and everything else it started; no results document
    return 0


main = command(run)  # scripts/validate.py and npu-tutorials-validate
