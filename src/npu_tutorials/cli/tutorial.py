"""Command-line access to the tutorials' machinery, without Sphinx.

  python scripts/tutorial.py card MODEL          validate a model card and print it
  python scripts/tutorial.py weights MODEL       resolve (and build, if needed) the weights
  python scripts/tutorial.py serve MODEL         serve the model until Ctrl-C
  python scripts/tutorial.py commands MODEL      print the copy-paste deployment commands
"""

import argparse
import time

from ..engine.backend import BACKENDS, detect_backend
from ..engine.commands import deploy_argv, format_command
from ..engine.platform import platform_for
from ..engine.server import HOST, VLLMServer
from ..inputs.cards import load_card
from ..inputs.weights import resolve_weights
from ..tutorial import choose_port
from . import command


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["card", "weights", "serve", "commands"])
    ap.add_argument("model", help="model key, e.g. qwen2.5-0.5b")
    a = ap.parse_args()

    card = load_card(a.model)
    if a.action == "card":
        print(card.model_dump_json(indent=2))
    elif a.action == "commands":
        for backend in BACKENDS:
            env = platform_for(backend).serve_env(card)
            print(f"# {backend}\n{format_command(deploy_argv(card, backend), env, exports=True)}\n")
    else:
        backend = detect_backend()
        w = resolve_weights(card)
        print(w.label())
        if a.action == "serve":
            port = choose_port()
            plat = platform_for(backend)
            spec = plat.server_spec(card, plat.plan(card, None), "performance", model=w.path, host=HOST, port=port)
            print(format_command(list(spec.argv), spec.environ), flush=True)
            with VLLMServer(list(spec.argv), host=HOST, port=port, env=spec.environ, backend=backend) as srv:
                print(f"ready on {srv.base_url} (log: {srv.log_path}); Ctrl-C stops it", flush=True)
                while srv.running:
                    time.sleep(1)
    return 0


main = command(run)  # scripts/tutorial.py and npu-tutorials-tutorial
