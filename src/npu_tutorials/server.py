"""The OpenAI-compatible vLLM server as a managed subprocess.

``VLLMServer`` starts ``python -m vllm.entrypoints.openai.api_server`` in a
process group of its own on 127.0.0.1, waits until ``/v1/models`` answers,
stops early with the tail of the server log if the process dies, and always
tears the whole group down: on ``stop()``, on leaving a ``with`` block, at
interpreter exit, on SIGTERM, and (through ``PR_SET_PDEATHSIG``) when the
parent is killed outright.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .errors import TutorialError

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


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


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


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class VLLMServer:
    """A running server; use as a context manager or call :meth:`start` / :meth:`stop`."""

    def __init__(self, argv: list[str], *, host: str, port: int, env: dict[str, str] | None = None,
                 log_path: str | Path | None = None, startup_timeout: float = 900.0):
        self.argv = list(argv)
        self.host, self.port = host, port
        self.env = dict(env or {})
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-server-", suffix=".log")[1])
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "VLLMServer":
        check_port_free(self.host, self.port)
        _install_hooks()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True, preexec_fn=_die_with_parent)
        _LIVE.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
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
            time.sleep(1.0)

    def models(self) -> list[str]:
        with urllib.request.urlopen(self.base_url + "/v1/models", timeout=10) as r:
            return [m["id"] for m in json.load(r)["data"]]

    def post(self, path: str, payload: dict, timeout: float = 600) -> dict:
        req = urllib.request.Request(self.base_url + path, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:500]
            raise TutorialError(f"POST {path} failed with HTTP {exc.code}: {body}") from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """Terminate the server's whole process group; escalate to SIGKILL after ``timeout``."""
        proc, self.proc = self.proc, None
        _LIVE.discard(self)
        if proc is None:
            return
        pgid = proc.pid
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # the leader is gone; make sure no engine worker of the group lingers
            deadline = time.monotonic() + wait
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if not _group_alive(pgid):
                break
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
