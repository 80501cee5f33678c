"""A paired comparison's side in another container image (issue 42: ``make compare B="image:REF"``): the page's
server command in ``docker run`` on the host's network with the leased devices, and the container removed
when the server stops, since killing the ``docker run`` client leaves it running.  Against the fake
``docker`` of ``tests/fakes/bin-docker`` (its docstring: the Docker CLI reference it follows); the real
engine in an "image" is the slow ``make compare`` test of ``tests/test_paired.py``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npu_tutorials.cli.compare import parse_side
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.engine import container
from npu_tutorials.engine.platform import platform_for
from npu_tutorials.engine.server import VLLMServer, free_port
from npu_tutorials.inputs.versions_probe import package_versions
from npu_tutorials.views.paired import side_text

FAKE_BIN = Path(__file__).resolve().parent / "fakes" / "bin-docker"
IMAGE = "quay.io/ascend/vllm-ascend:v0.25.1rc1"


@pytest.fixture
def docker(tmp_path, monkeypatch):
    """The fake docker first on PATH, its state in ``tmp_path``; the image's ``python`` is this interpreter."""
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "docker"))
    monkeypatch.setenv("FAKE_DOCKER_PYTHON", sys.executable)
    return tmp_path / "docker"


def test_the_page_command_runs_in_the_image_with_the_leased_npus_and_the_paths_it_names(tmp_path):
    weights = tmp_path / "weights"
    weights.mkdir()
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(weights), "--port", "8123",
            "--served-model-name", "/not/a/path"]
    env = {"ASCEND_RT_VISIBLE_DEVICES": "2,3", "VLLM_LOGGING_LEVEL": "INFO"}
    out = container.container_argv(IMAGE, argv, env, platform=platform_for("npu"), name="side-a")
    assert out[:6] == ["docker", "run", "--rm", "--name", "side-a", "--net=host"]
    # the image's entrypoint, its shell (which reads its ~/.bashrc) and its python, the page's command
    assert out[-len(argv) - 5:] == [IMAGE, "bash", "-ic", 'exec "$@"', "bash", *argv]
    opts = out[6:-len(argv) - 5]
    assert [opts[i + 1] for i, o in enumerate(opts) if o == "--device"][:2] == ["/dev/davinci2", "/dev/davinci3"]
    assert "/dev/davinci_manager" in opts and "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi" in opts
    assert f"{weights}:{weights}:ro" in opts and not any("/not/a/path" in o for o in opts)
    assert "VLLM_LOGGING_LEVEL=INFO" in opts and not any(o.startswith("ASCEND_RT_VISIBLE_DEVICES") for o in opts)
    gpu = container.container_argv(IMAGE, argv, {"CUDA_VISIBLE_DEVICES": "1"}, platform=platform_for("cuda"), name="g")
    assert gpu[gpu.index("--gpus") + 1] == '"device=1"' and "-e" not in gpu
    assert "--device" not in container.container_argv(IMAGE, argv, {}, platform=platform_for("cpu"), name="c")


SERVE = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _alive(pid_file: Path) -> bool:
    if not pid_file.exists():
        return False
    try:
        os.killpg(int(pid_file.read_text()), 0)
        return True
    except ProcessLookupError:
        return False


def test_a_server_in_a_container_is_removed_when_it_stops(tmp_path, docker):
    """The client killed outright (``kill_group``'s SIGKILL, or a parent's death through PDEATHSIG) leaves the
    container serving, as the real daemon does (SIGTERM it would forward); the server's ``on_stop`` removes it
    by name, so nothing is left."""
    script = tmp_path / "serve.py"
    script.write_text(SERVE)
    for remove in (False, True):
        port, name = free_port(), container.container_name()
        argv = container.container_argv(IMAGE, ["python", str(script), str(port)], {}, platform=platform_for("cpu"), name=name)
        srv = VLLMServer(argv, host="127.0.0.1", port=port, log_path=tmp_path / f"{name}.log", startup_timeout=60,
                         on_stop=(lambda n=name: container.remove(n)) if remove else None)
        srv.start()
        assert _alive(docker / f"{name}.pid")
        os.killpg(srv.proc.pid, signal.SIGKILL)  # the client only: the container is a tree of its own
        srv.stop()
        time.sleep(0.5)
        if remove:
            assert not _alive(docker / f"{name}.pid") and f"rm -f {name}" in (docker / "calls.log").read_text()
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0  # nobody serves the port any more
        else:
            assert _alive(docker / f"{name}.pid")  # what the module's on_stop is for
            container.remove(name)
            assert not _alive(docker / f"{name}.pid")
    container.remove("never-started")  # a container that is not there: nothing to do, no error


ENV_DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


def test_the_image_side_runs_in_the_images_own_environment(docker, monkeypatch):
    """Issue 53 item 2: the server in an image gets what a shell in that image has: the image's ENV (vllm-ascend's
    Dockerfile:59-62: TASK_QUEUE_ENABLE, OMP_NUM_THREADS; the CANN base's ASCEND_*), the build's -e variables,
    and what its ~/.bashrc adds (Dockerfile:75-76: jemalloc preloaded, /usr/local/lib on the library path), which
    ``docker run IMAGE python ...`` alone never reads; not the client's environment.  The fake image:
    tests/fakes/docker-images/vllm-ascend (its config's Env, its /root/.bashrc)."""
    def env_of(argv):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    monkeypatch.setenv("NPU_TUTORIALS_CLIENT_ONLY", "1")  # the client's environment stays out
    argv = container.container_argv(IMAGE, ["python", "-c", ENV_DUMP], {"VLLM_LOGGING_LEVEL": "INFO"},
                                    platform=platform_for("cpu"), name=container.container_name())
    env = env_of(argv)
    bare = env_of(["docker", "run", "--rm", IMAGE, "python", "-c", ENV_DUMP])  # no shell: the ENV only
    assert env["TASK_QUEUE_ENABLE"] == "1" and env["OMP_NUM_THREADS"] == "1"  # the image's ENV
    assert env["ASCEND_HOME_PATH"] == bare["ASCEND_HOME_PATH"] and env["VLLM_LOGGING_LEVEL"] == "INFO"
    assert "NPU_TUTORIALS_CLIENT_ONLY" not in env
    assert env["LD_PRELOAD"].split(":")[0] == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # its ~/.bashrc
    assert "/usr/local/lib" in env["LD_LIBRARY_PATH"].split(":")
    assert "LD_PRELOAD" not in bare and "/usr/local/lib" not in bare["LD_LIBRARY_PATH"].split(":")


def test_an_images_versions_are_read_by_its_own_python(docker):
    assert container.image_versions(IMAGE) == package_versions()
    assert f"run --rm -i {IMAGE} python -I -" in (docker / "calls.log").read_text()


def test_a_missing_device_is_dockers_one_line(tmp_path, docker):
    argv = container.container_argv(IMAGE, ["python", "-c", "pass"], {"ASCEND_RT_VISIBLE_DEVICES": "0"},
                                    platform=platform_for("npu"), name="n")
    srv = VLLMServer(argv, host="127.0.0.1", port=free_port(), log_path=tmp_path / "n.log", startup_timeout=30)
    with pytest.raises(TutorialError, match=r"exited with code 125(.|\n)*/dev/davinci0\": no such file"):
        srv.start()


def test_an_image_side_is_an_image_word():
    s, py = parse_side("B", f"image:{IMAGE} --max-num-seqs 4")
    assert s.image == IMAGE and py is None and s.flags == ["--max-num-seqs", "4"]
    assert side_text(s) == f"image:{IMAGE} --max-num-seqs 4"
    with pytest.raises(TutorialError, match="one python:PATH or image:REF word at most"):
        parse_side("B", f"image:{IMAGE} python:{sys.executable}")
    with pytest.raises(TutorialError, match="image: names no image"):
        parse_side("B", "image:")
