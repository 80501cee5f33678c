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

from .cards import Card

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


# Architectures that current vLLM no longer serves natively, and the layout we convert them to.
CONVERTED_ARCHS = {"QWenLMHeadModel": "Qwen2ForCausalLM"}


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


def serve_env(card: Card, backend: str) -> dict[str, str]:
    if backend == "npu":
        return {"ASCEND_RT_VISIBLE_DEVICES": "0", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}
    if backend == "cuda":
        return {"CUDA_VISIBLE_DEVICES": "0"}
    return {"VLLM_CPU_KVCACHE_SPACE": str(card.serve.cpu_kvcache_gib)}


def build_env(card: Card, backend: str) -> dict[str, str]:
    """``serve_env`` plus tuning for the machine this build runs on (shown with the executed command)."""
    env = serve_env(card, backend)
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
    """Copy-paste commands: vllm-ascend (0.23 line) still serves QWen natively; current vllm does not."""
    return card.architecture in CONVERTED_ARCHS and backend != "npu"


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
