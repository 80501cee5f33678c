"""``vllm collect-env``, as a deployer runs it to report a problem, captured by the build for its own backend.

On an Ascend host the report users attach to vllm-ascend's issues is vllm-ascend's own ``collect_env.py``
(its NPU, CANN and vllm-ascend fields): it sits at the root of the vllm-ascend checkout, which the official
image installs editable (``Dockerfile``: ``COPY . /vllm-workspace/vllm-ascend/``, ``pip install -e``), so it
is found beside the installed ``vllm_ascend`` package.  Elsewhere, and where vllm-ascend is installed from a
wheel without it, it is vLLM's (``python -m vllm.collect_env``, what ``vllm collect-env`` runs).

The capture runs in the background while the tutorial starts (a few seconds of subprocesses: ``pip list``,
``lscpu``, ``npu-smi info``), in a session of its own, and :meth:`Capture.stop` leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .processes import kill_group, kill_with_parent
from .server import without_build_only

TIMEOUT_S = 120.0
IMAGE_SCRIPT = "/vllm-workspace/vllm-ascend/collect_env.py"  # where the official image has it (Dockerfile:63)
HEADER = "Collecting environment information..."  # the first line both scripts print, not part of the report


def ascend_script(package_dir: str | Path | None = None) -> Path | None:
    """vllm-ascend's ``collect_env.py`` beside the installed package (``<checkout>/vllm_ascend`` ->
    ``<checkout>/collect_env.py``), or None (not installed, or installed without its checkout)."""
    if package_dir is None:
        spec = importlib.util.find_spec("vllm_ascend")
        if spec is None or not spec.submodule_search_locations:
            return None
        package_dir = list(spec.submodule_search_locations)[0]
    script = Path(package_dir).resolve().parent / "collect_env.py"
    return script if script.is_file() else None


def collect_env_argv(ascend: bool, package_dir: str | Path | None = None) -> list[str]:
    """The command whose output is the report: vllm-ascend's script on an Ascend platform where it is
    found, else vLLM's module."""
    script = ascend_script(package_dir) if ascend else None
    return [sys.executable, str(script)] if script else [sys.executable, "-m", "vllm.collect_env"]


def deployer_command(ascend: bool) -> str:
    """What a deployer runs for the report: vllm-ascend's script in its image, else ``vllm collect-env``."""
    return f"python {IMAGE_SCRIPT}" if ascend else "vllm collect-env"


def shown_command(argv: list[str]) -> str:
    """How a deployer types ``argv``: ``vllm collect-env`` or ``python <checkout>/collect_env.py``."""
    if argv[1:] == ["-m", "vllm.collect_env"]:
        return "vllm collect-env"
    return "python " + " ".join(argv[1:])


class Capture:
    """One background run of the report: :meth:`text` waits for it, :meth:`stop` kills it."""

    def __init__(self, argv: list[str], environ: dict[str, str] | None = None):
        self.argv = argv
        self.command = shown_command(argv)
        self._out = tempfile.TemporaryFile()
        env = without_build_only(os.environ if environ is None else environ)
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True, preexec_fn=kill_with_parent)
            self.problem = ""
        except OSError as exc:
            self.proc, self.problem = None, f"could not start {self.command}: {exc}"

    def text(self, timeout: float = TIMEOUT_S) -> str:
        """The report (without the script's first line), or one line saying why there is none."""
        if self.proc is None:
            return self.problem
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            return f"{self.command} did not finish within {timeout:.0f} s"
        self._out.seek(0)
        out = self._out.read().decode(errors="replace").strip("\n")
        lines = out.splitlines()
        if lines and lines[0].strip() == HEADER:
            out = "\n".join(lines[1:]).strip("\n")
        if rc != 0:
            tail = "\n".join(out.splitlines()[-5:])
            return f"{self.command} failed (exit status {rc}):\n{tail}"
        return out

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc, grace=0)

    def stop(self) -> None:
        """Kill the run if it is still going (nothing of it is left afterwards)."""
        self._kill()
        self._out.close()
