"""The state of one tutorial run, declared in one place: every field a step reads or writes.

:class:`TutorialState` is made once by :class:`~npu_tutorials.tutorial.Tutorial` and handed to each
step object (:mod:`.steps_weights`, :mod:`.steps_serving`, ...).  Steps read what they need from it
and write their section into ``state.doc.results``; nothing else is shared between them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import TutorialError
from ..core.progress import Progress
from ..engine.backend import Environment
from ..engine.bench import BenchWorker
from ..engine.collect_env import Capture
from ..engine.commands import format_command
from ..engine.platform import EnginePlan, Platform, ServerSpec
from ..engine.scheduler import Lease, lease_port
from ..engine.server import HOST, VLLMServer, check_port_free, free_port
from ..inputs.cards import BenchProfile, Card
from ..inputs.weights import Weights
from ..record.results import scrub, write_doc
from ..record.schema import CollectEnv, Results, ResultsDoc, Server, StepCost
from ..record.schema_base import Message
from .servers import ServerPool


def choose_port() -> int:
    """``TUTORIAL_PORT`` (checked free), else any free port."""
    if os.environ.get("TUTORIAL_PORT"):
        try:
            port = int(os.environ["TUTORIAL_PORT"])
        except ValueError:
            raise TutorialError(f"TUTORIAL_PORT={os.environ['TUTORIAL_PORT']!r} is not a port number") from None
        check_port_free(HOST, port)
        return port
    return free_port(HOST)


@dataclass(eq=False)
class TutorialState:
    """What one tutorial run knows.  Fixed at the start: the card, platform and its plan (dtypes, eager),
    profile, threads and devices; filled by the steps: the weights, the served checkpoint and the document.
    Its servers: :attr:`servers`."""

    card: Card
    """The model card (``cards/<key>.yaml``)."""
    platform: Platform
    """Where the engine runs (:mod:`npu_tutorials.engine.platform`)."""
    env: Environment
    """The backend's description of this machine (devices, versions, CPU)."""
    progress: Progress
    """The build terminal's start and end lines, and the cost table."""
    profile_name: str
    """``quick`` or ``full``: which of the card's benchmark profiles this build runs."""
    plan: EnginePlan
    """What this run serves with: the dtype per role, eager or graph, the maximum length."""
    threads: int
    """This tutorial's share of the host's cores (for torch, the reference and CPU baselines)."""
    mode: str
    """``TUTORIAL_WEIGHTS``: real weights, a stand-in, or whichever is at hand."""
    doc: ResultsDoc
    """The results document every step fills; written by ``finish()``."""
    artifacts: Path
    """This run's scratch folder: server logs, benchmark JSON, the offline example."""
    t0: float
    """``time.monotonic()`` at the start (the run's wall time)."""
    device_env: dict[str, str] = field(default_factory=dict)
    """What this tutorial's servers add to the build's environment: the visible-devices variable of its leased
    devices, and a paired comparison side's variables (:mod:`.remeasure`)."""
    round: int = 0
    """Which round of a paired comparison the steps measure (0: a page's run); each round's benchmark runs draw
    prompts of their own (:meth:`run_name`), so the server's prefix cache never serves a round from an earlier one."""
    leases: list[Lease] = field(default_factory=list)
    """Device and port leases, released by ``stop()``."""
    collect_env: Capture | None = None
    """``vllm collect-env`` running in the background since the start (kept by :meth:`keep_collect_env`)."""
    weights: Weights | None = None
    """The checkpoint found or built by ``prepare_weights()``."""
    serve_path: Path | None = None
    """What the engine loads: the weights, or their conversion (``prepare_serving_checkpoint()``)."""
    servers: ServerPool | None = None
    """The tutorial's servers (made with the state: :meth:`__post_init__`)."""
    worker: BenchWorker | None = None
    """The one process that runs every ``vllm bench serve`` of this tutorial."""
    recorded_errors: list[str] = field(default_factory=list)
    """Recorded documents (``results/``) that could not be read; the gate fails on them."""

    def __post_init__(self):
        if self.servers is None:
            self.servers = ServerPool(self.card, self.platform, self.plan, self.progress, self.artifacts,
                                      lease_port=lambda: self.port(), environ=lambda: {**os.environ, **self.device_env},
                                      on_start=self._started, step=self.step)

    def _started(self, spec: ServerSpec, srv: VLLMServer) -> None:
        """Each server's build changes, once (a restart in another dtype can add --dtype's); the page's first
        server is the one its "server" section shows."""
        for c in spec.changes:
            change = Message.of(c.msgid, **dict(c.fields))
            if change not in self.results.conditions.build_changes:
                self.results.conditions.build_changes.append(change)
        if self.results.server is None:
            shown = scrub(format_command(["python", *srv.argv[1:]], srv.env), self.path_placeholders())
            self.results.server = Server(command=shown, base_url=srv.base_url, startup_s=round(srv.startup_s, 1),
                                         models=srv.models())

    @property
    def server(self) -> VLLMServer | None:
        """The running (or last) server."""
        return self.servers.server

    @property
    def backend(self) -> str:
        return self.platform.name

    @property
    def dtype(self) -> str:
        """The engine's dtype for the performance steps."""
        return self.plan.dtype.dtype

    @property
    def dtype_note(self) -> str:
        """Why the engine dtype differs from the card's, or ''."""
        return self.plan.dtype.why

    @property
    def accuracy_dtype(self) -> str:
        """The engine's dtype for the engine-vs-reference checks (the card's where the CPU can run it)."""
        return self.plan.accuracy_dtype

    @property
    def results(self) -> Results:
        return self.doc.results

    @property
    def profile(self) -> BenchProfile:
        return self.card.benchmark.profiles[self.profile_name]

    @property
    def model(self) -> str:
        """The served model name requests ask for (the card's ``serve.served_model_name``)."""
        return self.card.serve.served_model_name

    @property
    def eager(self) -> bool:
        """Whether the page's servers run with ``--enforce-eager`` (the card says so, the CPU, or the device)."""
        return self.plan.eager

    @property
    def real(self) -> bool:
        return self.need_weights().is_real

    @property
    def run_env(self) -> dict[str, str]:
        """The environment of every engine and device step: the card's, plus this tutorial's devices."""
        return {**self.platform.build_env(self.card, eager_only=self.plan.eager_only), **self.device_env}

    def bench_worker(self) -> BenchWorker:
        """One process for every ``vllm bench serve`` run of this tutorial (vLLM is imported once)."""
        if self.worker is None or self.worker.proc.poll() is not None:
            self.worker = BenchWorker()
        return self.worker

    def port(self) -> int:
        """``TUTORIAL_PORT``, else a free port no concurrent tutorial of this build holds."""
        if os.environ.get("TUTORIAL_PORT"):
            return choose_port()
        port, lease = lease_port(HOST)
        self.leases.append(lease)
        return port

    @contextlib.contextmanager
    def step(self, name: str):
        """A named step: start and end lines on the build's terminal, its time in the cost table; if the
        server dies during it, one error naming the step, the exit code or signal, and the log's tail."""
        with self.progress.step(name):
            srv = self.server
            if srv is not None and srv.proc is not None:
                with srv.step(name):
                    yield
            else:
                yield

    def need_weights(self) -> Weights:
        """The prepared weights, or one clear error that ``prepare_weights()`` has not run."""
        if self.weights is None:
            raise TutorialError("call prepare_weights() first")
        return self.weights

    def path_placeholders(self) -> dict[str, str]:
        """This build's checkpoint paths, each shown as ``<weights>`` on the page."""
        out = {}
        for p in (self.serve_path, self.weights.path if self.weights else None):
            if p:
                out[str(p)] = "<weights>"
                out[str(Path(p).resolve())] = "<weights>"
        return out

    def publish(self, path: Path, name: str) -> None:
        """Copy a file next to the generated page so the page can offer it for download."""
        dest = os.environ.get("TUTORIAL_DOWNLOADS_DIR")
        if dest:
            Path(dest).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(dest) / name)

    def run_name(self, name: str) -> str:
        """The name of benchmark run ``name`` in this round (its prompts' seed: :func:`~npu_tutorials.engine.bench.run_seed`)."""
        return f"{name}@{self.round}" if self.round else name

    def keep_collect_env(self) -> None:
        """Wait for the background ``vllm collect-env`` and store its report in the document's machine."""
        if self.collect_env is not None:
            self.doc.provenance.machine.collect_env = CollectEnv(
                command=self.collect_env.command, text=scrub(self.collect_env.text()))

    def stop(self) -> None:
        """Stop the server, the benchmark worker and the collect-env run, and release the leases."""
        if self.collect_env is not None:
            self.collect_env.stop()
        self.servers.stop()
        if self.worker is not None:
            self.worker.close()
        for lease in self.leases:
            lease.release()

    def close(self, status: str, failure: str | None = None) -> Path:
        """Write the document with its status (``complete`` or ``failed`` and why), wall time and cost per
        step (after :meth:`stop`); print the cost table."""
        p = self.doc.provenance
        p.status, p.failure = status, failure
        p.wall_time_s = round(time.monotonic() - self.t0, 1)
        self.results.costs = [StepCost(step=n, seconds=round(secs, 2)) for n, secs in self.progress.top_level()]
        path = write_doc(self.doc)
        print(self.progress.cost_table(), file=self.progress.out, flush=True)
        return path
