"""The tutorial's servers: at most one runs; each step asks for the one it needs.

A step names its role (:data:`~npu_tutorials.engine.platform.ROLES`); the pool asks the platform for that
role's :class:`~npu_tutorials.engine.platform.ServerSpec` and keeps the running server when it is that spec, or
stops it and starts the spec (on a CPU without native bf16 the accuracy checks need another dtype than the
performance steps).  ``start_server()`` starts the deployment as served (the performance role); no gallery
script says which role comes next.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager, Mapping

from ..record import steps
from ..record.schema_base import Message
from ..core.errors import TutorialError
from ..core.progress import Progress
from ..engine import container
from ..engine.platform import EnginePlan, Platform, ServerSpec
from ..engine.server import HOST, VLLMServer
from ..inputs.cards import Card


@dataclass(eq=False)
class ServerPool:
    """Starts the spec a step needs, once; ``on_start(spec, server)`` is told of every start (the document
    records its build changes and the page's first server)."""

    card: Card
    platform: Platform
    plan: EnginePlan
    progress: Progress
    artifacts: Path
    lease_port: Callable[[], int]
    """A port no concurrent tutorial of this build holds."""
    environ: Callable[[], Mapping[str, str]]
    """The build's environment with this tutorial's devices, read at each start."""
    on_start: Callable[[ServerSpec, VLLMServer], None]
    model: Path | None = None
    """What the page's servers load: the served checkpoint (:meth:`open`)."""
    extra: tuple[str, ...] = ()
    """Flags every page server adds after the card's (full-vocabulary logits, the script's own)."""
    server: VLLMServer | None = None
    """The running (or last) server."""
    spec: ServerSpec | None = None
    """What :attr:`server` runs."""
    step: Callable[[str], ContextManager] = field(default=lambda name: contextlib.nullcontext())
    """A named step of the build (its terminal lines and cost)."""
    meanwhile: Callable[[str], ContextManager] | None = None
    """A context each start runs in, by dtype (:meth:`open`)."""
    python: str | None = None
    """The interpreter the servers run under, when not this build's (a paired comparison's side in another
    virtualenv: ``make compare A=python:PATH``)."""
    image: str | None = None
    """The container image the servers run in, when not on this host (a paired comparison's side in another
    image: ``make compare A=image:REF``, :mod:`~npu_tutorials.engine.container`)."""

    def open(self, model: Path, extra: tuple[str, ...],
             meanwhile: Callable[[str], ContextManager] | None = None) -> "ServerPool":
        """Serve ``model`` with ``extra`` flags from now on; a running server is kept until a step needs another.
        ``meanwhile(dtype)``: a context each start in ``dtype`` runs in (work this process does while the server
        loads: the fp32 reference of the checks)."""
        self.model, self.extra, self.meanwhile = model, tuple(extra), meanwhile
        return self

    def spec_for(self, role: str, *, port: int, graphs: bool = False, flags: tuple[str, ...] = (),
                 env: Mapping[str, str] | None = None, model: Path | None = None, label: str = "") -> ServerSpec:
        """The server ``role`` needs on ``port`` (``graphs``, ``flags``, ``env``, ``model``: a tuning
        configuration's, :meth:`Platform.server_spec`)."""
        if self.model is None:
            raise TutorialError("the server is not running: call start_server() first")
        return self.platform.server_spec(self.card, self.plan, role, model=model or self.model, host=HOST,
                                         port=port, extra=self.extra, environ=self.environ(), graphs=graphs,
                                         flags=tuple(flags), env=env, label=label)

    def running(self, spec_of_port: Callable[[int], ServerSpec]) -> VLLMServer | None:
        """The server started last and not stopped, when it is the spec ``spec_of_port`` builds on its port (one
        that died is still that server: the step that uses it names the death)."""
        srv = self.server
        if srv is None or self.spec is None:
            return None
        return srv if spec_of_port(self.spec.port) == self.spec else None

    def ensure(self, role: str) -> VLLMServer:
        """The server ``role`` needs (one of :data:`~npu_tutorials.engine.platform.ROLES`): the running one when
        it is that spec, else that spec started (the running one stopped first: two engines never share the
        memory).  On a CPU without native bf16 "accuracy" (the engine-vs-reference checks) runs in another dtype
        than "performance" and "task" (task scores measure the deployment as it is served)."""
        srv = self.running(lambda port: self.spec_for(role, port=port))
        if srv is not None:
            return srv
        spec = self.spec_for(role, port=self.lease_port())
        what = Message.of(steps.SERVER_START) if self.server is None else \
            Message.of(steps.SERVER_RESTART, dtype=spec.dtype, role=role)
        return self.start(spec, what, self.meanwhile(spec.dtype) if self.meanwhile else contextlib.nullcontext())

    def start(self, spec: ServerSpec, what: str, meanwhile: ContextManager = contextlib.nullcontext()) -> VLLMServer:
        """Stop the running server and start ``spec`` (a named step of the build)."""
        self.stop()
        verbose = os.environ.get("TUTORIAL_VERBOSE", "") not in ("", "0")
        argv, env, on_stop = [self.python or spec.argv[0], *spec.argv[1:]], spec.environ, None
        if self.image:
            name = container.container_name()
            argv = container.container_argv(self.image, ["python", *spec.argv[1:]], env, platform=self.platform,
                                            name=name)
            env, on_stop = {}, lambda: container.remove(name)
        self.server = VLLMServer(
            argv, host=HOST, port=spec.port, env=env, on_stop=on_stop,
            log_path=self.artifacts / f"server-{spec.dtype}{spec.label}.log",
            on_wait=lambda secs, line: self.progress.say(f"  waiting for the server ({secs:.0f} s): {line}"),
            stream=self.progress.out if verbose else None, backend=self.platform.name)
        self.spec = spec
        with self.step(what), meanwhile:
            self.server.start()
        self.on_start(spec, self.server)
        return self.server

    def stop(self) -> None:
        """Stop the running server; the next step that needs one starts it."""
        if self.server is not None:
            self.server.stop()
        self.spec = None

    @property
    def dtype(self) -> str | None:
        """The running server's dtype."""
        return self.spec.dtype if self.spec else None
