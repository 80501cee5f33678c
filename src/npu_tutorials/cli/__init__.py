"""The command-line entry points: each module's ``main()`` is a ``[project.scripts]`` command of
pyproject.toml (``npu-tutorials-<module name with dashes>``) and what ``scripts/<module>.py`` runs.

The top layer: it may import every other one.  ``ROOT`` is the checkout this package lives in (its
commands' default build folder, results and pages are there, as ``npu_tutorials.record.results.ROOT``).
"""

from functools import partial
from pathlib import Path
from typing import Callable

from ..core.errors import run_cli

ROOT = Path(__file__).resolve().parents[3]


def command(run: Callable[[], int | None]) -> Callable[[], None]:
    """The entry point of a command whose work is ``run``: a :class:`~npu_tutorials.core.errors.TutorialError`
    becomes one line (exit 2), Ctrl-C exit 130, else ``run``'s return code."""
    return partial(run_cli, run)
