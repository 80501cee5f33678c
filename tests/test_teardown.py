"""Every process a tutorial starts is gone afterwards: after Ctrl-C, SIGTERM or a killed parent.

Each scenario runs a small program that starts a :class:`VLLMServer` whose
command is a stand-in for a slow start (``sleep``), then signals that program.
The program's SIGINT disposition is set explicitly by the test (never inherited
from however pytest itself was started): a shell without job control starts
background jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored.

What the build does in each case (the Unix convention):

* SIGINT at its default: KeyboardInterrupt, the server's group is stopped, exit.
* SIGINT ignored by the caller (``nohup``, ``cmd &`` in a script, cron): the
  interrupt is ignored, as the caller asked; the build and its server keep running.
* SIGTERM, either way: the server's group is stopped, exit 143.
* SIGKILL of the parent, either way: ``PR_SET_PDEATHSIG`` takes the server down; its socket
  directory is swept by the next server start.

In the first three cases the server's socket directory (``VLLM_RPC_BASE_PATH``) is gone too.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npu_tutorials.engine.processes import RPC_PREFIX, group_alive, sweep_stale_rpc_dirs

SRC = Path(__file__).resolve().parents[1] / "src"
MARK = "sleep-standing-in-for-a-slow-server-start"

PROGRAM = f"""
import signal, sys
sys.path.insert(0, {str(SRC)!r})
if sys.argv[1] == "default":
    signal.signal(signal.SIGINT, signal.default_int_handler)
else:
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.getsignal(signal.SIGINT)
from npu_tutorials.engine.server import VLLMServer, free_port
port = free_port()
srv = VLLMServer([sys.executable, "-c", "import time; time.sleep(600)", {MARK!r}], host="127.0.0.1", port=port,
                 log_path=sys.argv[2])
srv.start()
"""


def _ignore_sigint():  # what a shell without job control does for `cmd &`
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(disposition: str, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """Start the program; return it and the pid of its server (once the server has exec'd)."""
    (tmp_path / "t").mkdir()  # the program's temp dir: where its server's socket directory goes
    p = subprocess.Popen([sys.executable, "-c", PROGRAM, disposition, str(tmp_path / "server.log")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path / "t")},
                         preexec_fn=_ignore_sigint if disposition == "ignored" else None)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pid in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if MARK.encode() in cmdline:  # exec'd: PR_SET_PDEATHSIG is armed, the group exists
                return p, int(pid)
        if p.poll() is not None:
            pytest.fail(f"the program exited early ({p.returncode}): {p.stderr.read()}")
        time.sleep(0.1)
    p.kill()
    pytest.fail("the server process never started")


def _gone(pgid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not group_alive(pgid)


def _socket_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "t").glob(f"{RPC_PREFIX}*"))


def _cleanup(p: subprocess.Popen, child: int) -> None:
    for pid in (p.pid, child):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_sigint(disposition, tmp_path):
    p, child = _start(disposition, tmp_path)
    try:
        p.send_signal(signal.SIGINT)
        if disposition == "default":
            rc = p.wait(timeout=120)
            assert rc != 0 and "KeyboardInterrupt" in p.stderr.read()
            assert _gone(child), "the server's process group outlived Ctrl-C"
            assert _socket_dirs(tmp_path) == [], "the server's socket directory outlived Ctrl-C"
        else:
            # ignored by the caller, so ignored by the build: nothing stops, nothing is orphaned
            time.sleep(2)
            assert p.poll() is None, "a build whose caller ignores SIGINT must not stop on it"
            assert group_alive(child)
            p.send_signal(signal.SIGTERM)
            assert p.wait(timeout=120) == 128 + signal.SIGTERM
            assert _gone(child), "the server's process group outlived SIGTERM"
    finally:
        _cleanup(p, child)


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_sigterm(disposition, tmp_path):
    p, child = _start(disposition, tmp_path)
    try:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=120) == 128 + signal.SIGTERM
        assert _gone(child), "the server's process group outlived SIGTERM"
        assert _socket_dirs(tmp_path) == [], "the server's socket directory outlived SIGTERM"
    finally:
        _cleanup(p, child)


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_killed_parent(disposition, tmp_path):
    p, child = _start(disposition, tmp_path)
    try:
        p.kill()
        p.wait(timeout=60)
        assert _gone(child), "the server outlived its SIGKILLed parent (PR_SET_PDEATHSIG)"
        # nothing of a SIGKILLed build can clean up: the next server start sweeps its socket directory
        left = _socket_dirs(tmp_path)
        assert len(left) == 1
        assert sweep_stale_rpc_dirs(tmp_path / "t") == left and _socket_dirs(tmp_path) == []
    finally:
        _cleanup(p, child)
