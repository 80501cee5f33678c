"""Run work in a short-lived process of its own, and kill its whole process group on timeout.

Two helpers:

* :func:`call` runs a module-level function (``"package.module:function"``) in a
  fresh ``python`` process and returns its JSON result.  Whatever the function
  touches (an NPU or GPU context, device memory, a loaded model) is released
  when that process exits, before :func:`call` returns.  The build process
  itself never initialises an accelerator: device facts, the bandwidth probe
  and the plain-transformers baseline run through here.
* :func:`run_group` runs a plain command.

Both start the child in a new session (its own process group), ask the kernel
to stop it if the build process dies (``PR_SET_PDEATHSIG``), and on timeout
kill the whole group -- engine workers, compiler helpers and all -- not only
the process they started.  A failure is one line: a :class:`IsolatedError`
(a :class:`~npu_tutorials.core.errors.TutorialError`) naming what failed and the
last line the child wrote to stderr; the full stderr tail is on the exception.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import TutorialError

SRC_DIR = str(Path(__file__).resolve().parents[2])  # the directory that holds this package
RESULT_ENV = "NPU_TUTORIALS_ISOLATED_RESULT"


from .processes import group_alive, kill_group, kill_with_parent, last_lines, private_rpc_dir  # noqa: E402


class IsolatedError(TutorialError):
    """One line for the reader; ``stderr_tail`` keeps the child's last stderr lines."""

    def __init__(self, message: str, stderr_tail: str = "", returncode: int | None = None):
        super().__init__(message)
        self.stderr_tail = stderr_tail
        self.returncode = returncode


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            return line.strip()[:300]
    return "(no output on stderr)"


def run_group(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
              cwd: str | Path | None = None, what: str | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` in its own process group; return its CompletedProcess (text stdout/stderr).

    Raises :class:`IsolatedError` when it runs past ``timeout`` seconds (after killing the whole
    group) or cannot start.  A non-zero exit is returned, not raised: the caller decides.
    """
    what = what or Path(str(argv[0])).name
    env = dict(os.environ if env is None else env)
    rpc = private_rpc_dir(env)  # a vLLM engine in the group leaves its socket files there, not in /tmp
    try:
        return _run_group(argv, timeout=timeout, env=env, cwd=cwd, what=what)
    finally:
        if rpc:
            shutil.rmtree(rpc, ignore_errors=True)


def _run_group(argv, *, timeout, env, cwd, what) -> subprocess.CompletedProcess:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                                    env=env, start_new_session=True, preexec_fn=kill_with_parent, text=True)
        except OSError as exc:
            raise IsolatedError(f"{what} could not start: {exc}") from None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            err.seek(0)
            tail = last_lines(err.read())
            raise IsolatedError(f"{what} did not finish in {timeout:g} s; its process group was killed",
                                tail) from None
        except BaseException:  # KeyboardInterrupt, SIGTERM handler: leave nothing behind
            kill_group(proc)
            raise
        finally:
            if group_alive(proc.pid):  # the leader exited but left children in its group
                kill_group(proc)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(list(argv), proc.returncode, out.read(), err.read())


def child_env(env: dict[str, str] | None) -> dict[str, str]:
    e = dict(os.environ if env is None else env)
    parts = [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]
    if SRC_DIR not in parts:
        parts.append(SRC_DIR)  # after the caller's entries: fakes put first in tests stay first
    e["PYTHONPATH"] = os.pathsep.join(parts)
    return e


def call(target: str, *args: Any, timeout: float = 600.0, env: dict[str, str] | None = None,
         python: str | None = None, what: str | None = None, preload: Sequence[str] = (), **kwargs: Any) -> Any:
    """``target(*args, **kwargs)`` in a fresh Python process; its return value, through JSON.

    ``target`` is ``"package.module:function"`` (a module-level function).  Arguments and the
    result must be JSON-serialisable.  ``preload`` names modules the child imports first (e.g.
    ``["torch_npu"]``, which registers the ``npu`` device with torch).  ``env`` replaces the
    child's environment (default: this process's).  The child has exited, with its whole
    process group, when this returns.
    """
    module, _, func = target.partition(":")
    if not module or not func:
        raise ValueError(f"target must be 'module:function', not {target!r}")
    what = what or target
    spec = json.dumps({"module": module, "func": func, "args": list(args), "kwargs": kwargs,
                       "preload": list(preload)})
    with tempfile.TemporaryDirectory(prefix="isolated-") as tmp:
        result = Path(tmp) / "result.json"
        env_ = child_env(env)
        env_[RESULT_ENV] = str(result)
        proc = run_group([python or sys.executable, "-m", "npu_tutorials.engine.isolated", spec], timeout=timeout,
                         env=env_, what=what)
        if proc.returncode != 0:
            raise IsolatedError(f"{what} failed in its own process (exit {proc.returncode}): "
                                f"{_last_line(proc.stderr)}", last_lines(proc.stderr), proc.returncode)
        if not result.is_file():
            raise IsolatedError(f"{what} exited without a result", last_lines(proc.stderr), proc.returncode)
        return json.loads(result.read_text())["result"]


def _main(argv: list[str]) -> int:
    """Child side of :func:`call` (``python -m npu_tutorials.engine.isolated SPEC``)."""
    spec = json.loads(argv[0])
    for name in spec.get("preload", []):
        importlib.import_module(name)
    fn = getattr(importlib.import_module(spec["module"]), spec["func"])
    value = fn(*spec["args"], **spec["kwargs"])
    # stdout may carry library chatter (CANN and vLLM print there): the result goes to its own file
    Path(os.environ[RESULT_ENV]).write_text(json.dumps({"result": value}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
