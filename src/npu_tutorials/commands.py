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

from .cards import Card

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


# Architectures that current vLLM no longer serves natively, and the layout we convert them to.
CONVERTED_ARCHS = {"QWenLMHeadModel": "Qwen2ForCausalLM"}
# vLLM lists QWenLMHeadModel as supported up to 0.23.0; vllm-ascend 0.23 pairs with vLLM 0.23.
NATIVE_NPU_NOTE = "vllm-ascend <= 0.23 can also serve the original {arch} checkpoint with --trust-remote-code"


def serve_flags(card: Card, backend: str, *, native: bool = True, dtype: str | None = None,
                max_model_len: int | None = None) -> list[str]:
    """Flags from the card.  ``native=False``: serving a converted checkpoint (no remote code);
    ``dtype`` overrides the card's (the build on a CPU without native bf16)."""
    s = card.serve
    flags = ["--served-model-name", s.served_model_name, "--dtype", dtype or s.dtype,
             "--max-model-len", str(max_model_len or s.max_model_len)]
    if s.tensor_parallel_size != 1:
        flags += ["--tensor-parallel-size", str(s.tensor_parallel_size)]
    if s.max_num_seqs:
        flags += ["--max-num-seqs", str(s.max_num_seqs)]
    if s.enforce_eager:
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
        return {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
    if backend == "cpu":
        return {"VLLM_CPU_KVCACHE_SPACE": str(card.serve.cpu_kvcache_gib)}
    return {}


def serve_env(card: Card, backend: str) -> dict[str, str]:
    """The environment of the copy-paste commands: a reader's host, first device."""
    var = VISIBLE_DEVICES_VAR.get(backend)
    return {**({var: "0"} if var else {}), **_engine_env(card, backend)}


def build_env(card: Card, backend: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment this build adds to the command it executes (and shows with it).

    The devices are the runner's: ``ASCEND_RT_VISIBLE_DEVICES`` / ``CUDA_VISIBLE_DEVICES`` are
    inherited from ``environ`` (default ``os.environ``), never set here; when the runner set one,
    it is included so the shown command says which devices ran.
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
    return env


def server_argv(card: Card, model: str | Path, backend: str, *, host: str, port: int,
                extra: list[str] = (), python: str | None = None, native: bool = True,
                dtype: str | None = None, max_model_len: int | None = None) -> list[str]:
    """argv of the OpenAI-compatible server (module form: works with vllm, vllm-cpu, vllm-ascend)."""
    return [python or sys.executable, "-m", SERVER_MODULE, "--model", str(model),
            *serve_flags(card, backend, native=native, dtype=dtype, max_model_len=max_model_len),
            "--host", host, "--port", str(port), *extra]


def format_command(argv: list[str], env: dict[str, str] | None = None, *, exports: bool = False) -> str:
    """A shell command, one flag per line, that a reader can paste."""
    parts: list[str] = []
    cur: list[str] = []
    for tok in argv:
        if tok.startswith("--") and cur:
            parts.append(" ".join(cur))
            cur = []
        cur.append(shlex.quote(tok))
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


def download_commands(card: Card) -> dict[str, str]:
    out = {}
    if card.hub.modelscope:
        ref = card.hub.modelscope
        out["ModelScope"] = (f"pip install modelscope\nmodelscope download --model {ref.id} "
                             f"--revision {ref.revision} --local_dir {local_dir(card)}")
    if card.hub.huggingface:
        ref = card.hub.huggingface
        out["Hugging Face"] = (f"pip install huggingface_hub\nhf download {ref.id} "
                               f"--revision {ref.revision} --local-dir {local_dir(card)}")
    return out


def needs_conversion(card: Card, backend: str) -> bool:
    """Whether the commands serve a converted checkpoint: on every backend for an architecture
    current vLLM no longer has (vllm-ascend's images carry vLLM releases without it too)."""
    return card.architecture in CONVERTED_ARCHS


def converted_dir(card: Card) -> str:
    return f"{local_dir(card)}-qwen2"


def convert_argv(card: Card) -> list[str]:
    return ["python", "scripts/convert_qwen.py", local_dir(card), converted_dir(card)]


def deploy_argv(card: Card, backend: str, *, host: str = "0.0.0.0", port: int = 8000) -> list[str]:
    """The copy-paste serve command for a host of ``backend``."""
    native = not needs_conversion(card, backend)
    model = local_dir(card) if native else converted_dir(card)
    flags = serve_flags(card, backend, native=native)
    if backend == "cpu":  # vllm-cpu's `vllm` console script is broken: use the module
        return ["python", "-m", SERVER_MODULE, "--model", model, *flags, "--host", host, "--port", str(port)]
    return ["vllm", "serve", model, *flags, "--host", host, "--port", str(port)]


def all_shown_commands(card: Card) -> list[list[str]]:
    """Every vLLM serve command the site shows for ``card`` (tests parse them all)."""
    return [deploy_argv(card, b) for b in ("npu", "cuda", "cpu")]


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


def deploy_rst(card: Card) -> str:
    """reStructuredText with NPU / GPU / CPU tabs: download, serve, check."""
    tabs = []
    labels = {"npu": "Ascend NPU (vllm-ascend)", "cuda": "NVIDIA GPU (vllm)", "cpu": "CPU (vllm-cpu)"}
    for backend, label in labels.items():
        cmd = format_command(deploy_argv(card, backend), serve_env(card, backend), exports=True)
        if needs_conversion(card, backend):
            cmd = (f"# current vLLM has no {card.architecture}: convert once to {CONVERTED_ARCHS[card.architecture]}"
                   f" (from this repository)\n{shlex.join(convert_argv(card))}\n{cmd}")
            if backend == "npu":
                cmd = f"# {NATIVE_NPU_NOTE.format(arch=card.architecture)}\n{cmd}"
        tabs.append(f".. tab-item:: {label}\n   :sync: {backend}\n\n   .. code-block:: bash\n\n{_indent(cmd, 6)}\n")
    downloads = []
    for hub, cmd in download_commands(card).items():
        downloads.append(f".. tab-item:: {hub}\n\n   .. code-block:: bash\n\n{_indent(cmd, 6)}\n")
    return (
        "Download the weights (one of):\n\n.. tab-set::\n\n" + _indent("\n".join(downloads), 3) + "\n\n"
        "Serve them:\n\n.. tab-set::\n\n" + _indent("\n".join(tabs), 3) + "\n\n"
        "``--host 0.0.0.0`` listens on every interface of the host: the API has no authentication, so keep "
        "the port behind a firewall, or add ``--api-key`` and use ``--host 127.0.0.1`` on a shared machine.\n"
    )


# -- the container an Ascend runner builds in ---------------------------------------------------
# vllm-ascend's official images and how its installation guide starts them
# (vllm-project/vllm-ascend docs/source/installation.md, "Set up using Docker"): one
# --device per NPU chip, the three control devices, the driver's tools and libraries
# mounted at the same paths, a larger /dev/shm, the model cache.

VLLM_ASCEND_IMAGE = "quay.io/ascend/vllm-ascend"
VLLM_ASCEND_TAG = "v0.23.0"  # the release facts.md pairs with vLLM 0.23.0, CANN 9.1.0, Python 3.10-3.12
IMAGE_VARIANTS = {"a2": "", "a3": "-a3", "310p": "-310p"}  # Atlas A2 / A3 / 300I (installation.md's table)
ASCEND_CONTROL_DEVICES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")
ASCEND_DRIVER_MOUNTS = ("/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/lib64/",
                        "/usr/local/Ascend/driver/version.info", "/etc/ascend_install.info")
CONTAINER_WORKDIR = "/workspace/npu-tutorials"


def ascend_image(variant: str = "a2", tag: str = VLLM_ASCEND_TAG) -> str:
    if variant not in IMAGE_VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(IMAGE_VARIANTS)}, not {variant!r}")
    return f"{VLLM_ASCEND_IMAGE}:{tag}{IMAGE_VARIANTS[variant]}"


def ascend_container_options(devices: Sequence[int] = (0,), shm_size: str = "1g") -> list[str]:
    """The ``docker run`` options that give a container the NPUs ``devices`` (the host's
    ``/dev/davinciN``) and the driver; shared by :func:`docker_run_argv` and the CI workflow."""
    opts = [f"--shm-size={shm_size}"]
    for i in devices:
        opts += ["--device", f"/dev/davinci{int(i)}"]
    for d in ASCEND_CONTROL_DEVICES:
        opts += ["--device", d]
    for m in ASCEND_DRIVER_MOUNTS:
        opts += ["-v", f"{m}:{m}"]
    return opts


def docker_run_argv(image: str | None = None, devices: Sequence[int] = (0,), *, name: str = "npu-tutorials-site",
                    repo: str = "$PWD", cache: str = "/root/.cache", command: Sequence[str] = ("bash",)) -> list[str]:
    """``docker run`` of vllm-ascend's image with ``devices``, this repository at
    :data:`CONTAINER_WORKDIR` and the host's model cache at ``/root/.cache``."""
    return ["docker", "run", "--rm", "--name", name, *ascend_container_options(devices),
            "-v", f"{cache}:/root/.cache", "-v", f"{repo}:{CONTAINER_WORKDIR}", "-w", CONTAINER_WORKDIR,
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
        if tok in ("--device", "-v", "-w", "--name"):
            cur.append(_shell_word(next(it)))
            lines.append(" ".join(cur))
            cur = []
    if cur:
        lines.append(" ".join(cur))
    return " \\\n    ".join(lines)


def runner_docker_md(devices: Sequence[int] = (0,)) -> str:
    """The runner page's ``docker run`` block (``docs/source/_generated/runner_docker.md``)."""
    return "```bash\n" + format_docker(docker_run_argv(devices=devices)) + "\n```\n"
