"""Bad input to the command-line entry points: one clear line, exit 2, no traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(args, **env):
    e = {**os.environ, **env}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=e, timeout=300)


def _one_line_error(p, pattern):
    assert p.returncode == 2, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip() and "Triton" not in l]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert lines[0].startswith("error: ") and pattern in lines[0], lines[0]


def test_unknown_model():
    _one_line_error(run(["scripts/tutorial.py", "serve", "nosuchmodel"]), "unknown model 'nosuchmodel'")


def test_missing_weights_path():
    _one_line_error(run(["scripts/tutorial.py", "weights", "qwen2.5-0.5b"],
                        TUTORIAL_MODEL_PATH_QWEN2_5_0_5B="/nonexistent/weights"),
                    "/nonexistent/weights is not a directory")


@pytest.mark.parametrize("env, pattern", [
    ({"TUTORIAL_WEIGHTS": "sometimes"}, "TUTORIAL_WEIGHTS='sometimes'"),
    ({"TUTORIAL_BACKEND": "tpu"}, "TUTORIAL_BACKEND='tpu'"),
    ({"TUTORIAL_PROFILE": "huge"}, "TUTORIAL_PROFILE='huge'"),
    ({"TUTORIAL_ONLY": "nosuchmodel"}, "matches no tutorial"),
    ({"TUTORIAL_PORT": "eighty"}, "is not a port number"),
])
def test_preflight_bad_controls(env, pattern):
    _one_line_error(run(["scripts/preflight.py"], **env), pattern)


def test_preflight_busy_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        _one_line_error(run(["scripts/preflight.py"], TUTORIAL_PORT=str(port)), f"port {port} on 127.0.0.1 is busy")


def test_preflight_ok():
    p = run(["scripts/preflight.py"], TUTORIAL_WEIGHTS="stand-in")
    assert p.returncode == 0, p.stderr
    assert "preflight: qwen2_5_0_5b: backend cpu" in p.stdout
