"""A server that exits while a step uses it is named (no engine: a stand-in HTTP server).

The real engine killed during a benchmark is in test_negative_controls.py.
"""

import os
import sys

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.engine.server import VLLMServer, free_port
from npu_tutorials.engine.processes import group_alive

FAKE = r'''
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        print("fake server: exiting in the middle of a request", flush=True)
        os._exit(3)

print("fake server: listening", flush=True)
HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


@pytest.fixture
def fake(tmp_path):
    port = free_port()
    (tmp_path / "fake.py").write_text(FAKE)
    srv = VLLMServer([sys.executable, str(tmp_path / "fake.py"), str(port)], host="127.0.0.1", port=port,
                     log_path=tmp_path / "fake.log", startup_timeout=60)
    srv.start()
    yield srv
    srv.stop()


def test_post_names_the_step_exit_code_and_log(fake):
    pgid = fake.proc.pid
    with pytest.raises(TutorialError) as exc:
        with fake.step("the functional check"):
            fake.post("/v1/completions", {"prompt": "hi"})
    msg = str(exc.value)
    assert msg.startswith("the vLLM server died during the functional check (exit code 3); last lines of ")
    assert "fake server: exiting in the middle of a request" in msg
    assert not group_alive(pgid) and fake.exited() and not fake.running
    # afterwards every use names the same death, whatever the client library raised
    with pytest.raises(TutorialError, match="died during the functional check"):
        fake.post("/v1/completions", {})
    with pytest.raises(TutorialError, match="died during the functional check"):
        fake.check_alive("the benchmark")


def test_without_a_step_the_request_is_named(fake):
    with pytest.raises(TutorialError, match=r"died during POST /v1/completions \(exit code 3\)"):
        fake.post("/v1/completions", {})


def test_a_live_server_is_not_called_dead(fake):
    fake.check_alive("anything")  # no error
    with pytest.raises(ValueError, match="unrelated"):
        with fake.step("a step"):
            raise ValueError("unrelated")
    assert fake.models() == ["fake"] and fake.current_step is None


def test_a_clean_exit_says_something_outside_stopped_it(tmp_path):
    """vLLM's API server exits 0 when someone else sends it SIGTERM (seen with ``pkill -f
    vllm.entrypoints.openai.api_server`` during a build); "died (exit code 0)" alone read like a bug."""
    import signal as sig

    port = free_port()
    (tmp_path / "fake.py").write_text(FAKE.replace("os._exit(3)", "os._exit(0)").replace(
        "print(\"fake server: listening\"", "import signal; signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n"
        "print(\"fake server: listening\""))
    srv = VLLMServer([sys.executable, str(tmp_path / "fake.py"), str(port)], host="127.0.0.1", port=port,
                     log_path=tmp_path / "fake.log", startup_timeout=60)
    srv.start()
    try:
        srv.proc.send_signal(sig.SIGTERM)
        srv.proc.wait(timeout=30)
        with pytest.raises(TutorialError, match=r"died during the benchmark \(exit code 0: it shut down cleanly, "
                                                r"so something outside the build stopped it\)"):
            srv.check_alive("the benchmark")
    finally:
        srv.stop()


ENV_PRINTER = '''import json, os, sys, time
open(sys.argv[1], "w").write(json.dumps(dict(os.environ)))
time.sleep(60)
'''


def test_the_builds_own_autoload_switch_does_not_reach_the_server(tmp_path, monkeypatch):
    """Issue 39, item 8: make exports TORCH_DEVICE_BACKEND_AUTOLOAD=0 for the build's own processes; a server (and
    the workers it starts, which inherit its environment) runs as vllm-ascend's CI runs it, without it, unless the
    caller sets it for that server."""
    import json
    import time

    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # as make exports it
    (tmp_path / "env.py").write_text(ENV_PRINTER)
    for own, expected in (({}, None), ({"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, "1")):
        out = tmp_path / f"env-{expected}.json"
        srv = VLLMServer([sys.executable, str(tmp_path / "env.py"), str(out)], host="127.0.0.1", port=free_port(),
                         env=own, log_path=tmp_path / "env.log")
        srv.spawn()
        try:
            deadline = time.monotonic() + 30
            while not out.is_file() and time.monotonic() < deadline:
                time.sleep(0.1)
            seen = json.loads(out.read_text())
        finally:
            srv.stop()
        assert seen.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == expected
        assert seen.get("PATH") == os.environ["PATH"]  # the rest of the build's environment still reaches it
