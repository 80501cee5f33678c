"""The OpenAI-compatible vLLM server as a managed subprocess.

``VLLMServer`` starts ``python -m vllm.entrypoints.openai.api_server`` in a
process group of its own on 127.0.0.1, waits until ``/v1/models`` answers,
stops early with the tail of the server log if the process dies, and always
tears the whole group down: on ``stop()``, on leaving a ``with`` block, at
interpreter exit, on SIGTERM, and (through ``PR_SET_PDEATHSIG``) when the
parent is killed outright.  The engine's ZeroMQ socket files go into a private
directory (``VLLM_RPC_BASE_PATH``, see :func:`~npu_tutorials.engine.processes.private_rpc_dir`) that ``stop()``
removes: vLLM would otherwise leave one ``/tmp/<uuid>`` socket file per channel
behind after every run.

A server that dies while a step uses it (the functional check, a benchmark, an
accuracy request) is named as one :class:`TutorialError`: which step, the
exit code or signal, and the last lines of its log (:meth:`VLLMServer.check_alive`,
:meth:`VLLMServer.step`; :meth:`VLLMServer.post` and the benchmark runner use them).
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, TextIO

from ..core.errors import TutorialError
from .memory import MemoryPeak, MemorySampler
from .processes import kill_group, private_rpc_dir, stop_with_parent, tail

# How long a server may take to answer: a first graph-mode start on an NPU captures ACL graphs and compiles
# triton-ascend kernels; vllm-ascend's nightly CI allows VLLM_ENGINE_READY_TIMEOUT_S=1800 for it
# (.github/workflows/_e2e_nightly_single_node.yaml, tests/e2e/nightly/multi_node/scripts/run.sh).
ENGINE_READY_TIMEOUT_S = 1800
HOST = "127.0.0.1"  # where the build's own servers listen

_LIVE: set["VLLMServer"] = set()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_port_free(host: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            raise TutorialError(f"port {port} on {host} is busy; stop what listens there or pick another "
                                "(TUTORIAL_PORT, or leave it unset for a free one)") from None


def stop_all() -> None:
    """Stop every server this process started (used by atexit and the Sphinx hooks)."""
    for server in list(_LIVE):
        server.stop()


def _on_sigterm(signum, frame):
    stop_all()
    sys.exit(128 + signum)


_hooks_installed = False


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    atexit.register(stop_all)
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
    _hooks_installed = True


# What the build sets for its own processes and a server must not inherit: make exports
# TORCH_DEVICE_BACKEND_AUTOLOAD=0 so that `import torch` in the build never loads torch_npu (and CANN) there; a
# server runs as upstream runs it (vllm-ascend's e2e and nightly jobs leave torch's autoload on)
BUILD_ONLY_ENV = ("TORCH_DEVICE_BACKEND_AUTOLOAD",)


def without_build_only(environ) -> dict[str, str]:
    """``environ`` as a deployer's process has it: without what only the build's own processes set."""
    return {k: v for k, v in environ.items() if k not in BUILD_ONLY_ENV}


class VLLMServer:
    """A running server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, argv: list[str], *, host: str, port: int, env: dict[str, str] | None = None,
                 log_path: str | Path | None = None, startup_timeout: float = ENGINE_READY_TIMEOUT_S,
                 on_wait: Callable[[float, str], None] | None = None, every: float = 30.0,
                 stream: TextIO | None = None, backend: str = "cpu", on_stop: Callable[[], None] | None = None):
        """``on_wait(seconds, last_log_line)`` is called every ``every`` seconds while the server starts;
        ``stream``: copy the server's log there as it grows (``TUTORIAL_VERBOSE=1``); ``backend``: whose device
        memory its sampler reads (:class:`~npu_tutorials.engine.memory.MemorySampler`); ``on_stop``: called
        after every stop, once its process group is gone (a server in a container: remove the container)."""
        self.backend = backend
        self.on_stop = on_stop
        self.sampler: MemorySampler | None = None
        self.on_wait, self.every, self.stream = on_wait, every, stream
        self._tee: threading.Thread | None = None
        self.argv = list(argv)
        self.host, self.port = host, port
        self.env = dict(env or {})
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self.died: str | None = None  # the dead-server message, once the server was found dead
        self._step_name_now: str | None = None
        self._rpc_dir: str | None = None
        self._t0 = 0.0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "VLLMServer":
        """Start the server and wait until it answers (:meth:`spawn`, then :meth:`wait_ready`)."""
        return self.spawn().wait_ready()

    def spawn(self) -> "VLLMServer":
        """Start the server's processes and return at once; :meth:`wait_ready` waits for it.  Call it from the
        thread that will outlive the server (the process is bound to its parent thread's life)."""
        check_port_free(self.host, self.port)
        _install_hooks()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**without_build_only(os.environ), **self.env}
        self._rpc_dir = private_rpc_dir(env)
        self._t0 = time.monotonic()
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                             preexec_fn=stop_with_parent)
        except BaseException:
            self.stop()
            raise
        _LIVE.add(self)
        self.sampler = MemorySampler(self.proc.pid, self.backend).start()  # its process group: pgid = pid
        if self.stream is not None:
            self._tee = threading.Thread(target=self._follow, daemon=True)
            self._tee.start()
        return self

    def wait_ready(self) -> "VLLMServer":
        """Wait until the spawned server answers /v1/models; on failure (it died, or the timeout) it is stopped
        and the error names its log.  ``startup_s`` counts from :meth:`spawn`."""
        if self.proc is None:
            raise TutorialError("the vLLM server was not started: call spawn() or start() first")
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - self._t0
        return self

    def _follow(self) -> None:
        """Copy the log to ``stream`` as it grows, until the server stops."""
        with open(self.log_path, "r", errors="replace") as f:
            while True:
                line = f.readline()
                if line:
                    self.stream.write(f"[server :{self.port}] {line}")
                    self.stream.flush()
                    continue
                if self.proc is None or self.proc.poll() is not None:
                    return
                time.sleep(0.2)

    def last_log_line(self) -> str:
        lines = [line for line in tail(self.log_path, 5).splitlines() if line.strip()]
        return lines[-1].strip()[:200] if lines else "(nothing logged yet)"

    def _wait_ready(self) -> None:
        t0 = self._t0  # the timeout counts from the spawn
        deadline = t0 + self.startup_timeout
        next_note = time.monotonic() + self.every
        while True:
            if self.on_wait is not None and time.monotonic() >= next_note:
                self.on_wait(time.monotonic() - t0, self.last_log_line())
                next_note += self.every
            rc = self.proc.poll()
            if rc is not None:
                raise TutorialError(f"the vLLM server exited with code {rc} before it was ready; "
                                    f"last lines of {self.log_path}:\n{tail(self.log_path)}")
            try:
                with urllib.request.urlopen(self.base_url + "/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TutorialError(f"the vLLM server did not answer /v1/models within {self.startup_timeout:.0f} s; "
                                    f"last lines of {self.log_path}:\n{tail(self.log_path)}")
            time.sleep(0.25)

    # -- a server that dies while in use ------------------------------------------------
    @property
    def current_step(self) -> str | None:
        return self._step_name_now

    def _how_it_ended(self, rc: int) -> str:
        if rc < 0:
            try:
                return f"killed by signal {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        if rc == 0:  # vLLM's API server shuts down cleanly on SIGTERM/SIGINT and exits 0
            return "exit code 0: it shut down cleanly, so something outside the build stopped it"
        return f"exit code {rc}"

    def check_alive(self, step: str, grace: float = 0.0) -> None:
        """Raise one :class:`TutorialError` naming ``step`` if the server has exited (waiting up to
        ``grace`` seconds for an exit in progress): its exit code or signal and its log's tail.
        What is left of its process group is stopped first."""
        if self.died:
            raise TutorialError(self.died)
        proc = self.proc
        if proc is None:
            raise TutorialError(f"{step}: the vLLM server is not running (it was stopped or never started)")
        try:
            rc = proc.wait(timeout=grace) if grace > 0 else proc.poll()
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            return
        head = f"the vLLM server died during {step} ({self._how_it_ended(rc)})"
        self.died = f"{head}; see {self.log_path}"  # what other threads see while the rest is stopped
        self.stop()  # its engine workers may outlive the API process; their last words go to the log too
        self.died = f"{head}; last lines of {self.log_path}:\n{tail(self.log_path)}"
        raise TutorialError(self.died)

    def exited(self) -> bool:
        return self.died is not None or self.proc is None or self.proc.poll() is not None

    @contextlib.contextmanager
    def step(self, name: str):
        """Run a step that uses the server; if anything in it fails and the server has exited
        meanwhile (an ``openai.APIConnectionError``, a refused connection, failed benchmark
        requests), raise the named dead-server error instead.  Requests made inside the step
        (from any thread) name it too."""
        prev, self._step_name_now = self._step_name_now, name
        try:
            yield self
        except Exception as exc:
            if not self.died and self.proc is not None:
                try:
                    self.check_alive(name, grace=5.0)
                except TutorialError as dead:
                    raise dead from exc
            if self.died and not (isinstance(exc, TutorialError) and str(exc) == self.died):
                raise TutorialError(self.died) from exc
            raise
        finally:
            self._step_name_now = prev

    def _step_name(self, what: str) -> str:
        return self.current_step or what

    def models(self) -> list[str]:
        try:
            with urllib.request.urlopen(self.base_url + "/v1/models", timeout=10) as r:
                return [m["id"] for m in json.load(r)["data"]]
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError) as exc:
            self.check_alive(self._step_name("GET /v1/models"), grace=5.0)
            raise TutorialError(f"GET /v1/models failed: {exc}") from None

    def post(self, path: str, payload: dict, timeout: float = 600) -> dict:
        if self.died:
            raise TutorialError(self.died)
        req = urllib.request.Request(self.base_url + path, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:500]
            raise TutorialError(f"POST {path} failed with HTTP {exc.code}: {body}") from None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError,
                json.JSONDecodeError) as exc:
            self.check_alive(self._step_name(f"POST {path}"), grace=5.0)
            raise TutorialError(f"POST {path} failed while the server is still running: "
                                f"{type(exc).__name__}: {exc}") from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def memory_peak(self) -> MemoryPeak:
        """The peaks its sampler has seen so far (all zero before it started)."""
        return self.sampler.peak if self.sampler is not None else MemoryPeak()

    def stop(self, timeout: float = 30.0) -> None:
        """Terminate the server's whole process group; escalate to SIGKILL after ``timeout``: the leader gets
        ``timeout`` to exit, then its engine workers as long again (:func:`~npu_tutorials.engine.processes.kill_group`)."""
        if self.sampler is not None:
            self.sampler.stop()
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        try:
            if proc is not None:
                kill_group(proc, timeout, leader_first=True)
        finally:
            rpc, self._rpc_dir = self._rpc_dir, None
            if rpc:
                shutil.rmtree(rpc, ignore_errors=True)
            if proc is not None and self.on_stop is not None:  # once per start: a second stop has nothing to stop
                self.on_stop()

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
