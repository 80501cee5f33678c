#!/usr/bin/env python
"""Command-line access to the tutorials' machinery, without Sphinx.

  python scripts/tutorial.py card MODEL          validate a model card and print it
  python scripts/tutorial.py weights MODEL       resolve (and build, if needed) the weights
  python scripts/tutorial.py serve MODEL         serve the model until Ctrl-C
  python scripts/tutorial.py commands MODEL      print the copy-paste deployment commands
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from npu_tutorials.core.errors import run_cli  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["card", "weights", "serve", "commands"])
    ap.add_argument("model", help="model key, e.g. qwen2.5-0.5b")
    a = ap.parse_args()

    from npu_tutorials.engine.backend import detect_backend
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.engine.commands import build_env, deploy_argv, format_command, serve_env, server_argv
    from npu_tutorials.inputs.weights import resolve_weights

    card = load_card(a.model)
    if a.action == "card":
        print(card.model_dump_json(indent=2))
    elif a.action == "commands":
        for backend in ("npu", "cuda", "cpu"):
            print(f"# {backend}\n{format_command(deploy_argv(card, backend), serve_env(card, backend), exports=True)}\n")
    else:
        backend = detect_backend()
        w = resolve_weights(card)
        print(w.label())
        if a.action == "serve":
            from npu_tutorials.engine.server import VLLMServer
            from npu_tutorials.engine.server import HOST
            from npu_tutorials.tutorial import choose_port

            port = choose_port()
            argv = server_argv(card, w.path, backend, host=HOST, port=port)
            print(format_command(argv, build_env(card, backend)), flush=True)
            with VLLMServer(argv, host=HOST, port=port, env=build_env(card, backend)) as srv:
                print(f"ready on {srv.base_url} (log: {srv.log_path}); Ctrl-C stops it", flush=True)
                while srv.running:
                    time.sleep(1)
    return 0


if __name__ == "__main__":
    run_cli(main)
