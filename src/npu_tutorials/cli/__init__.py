"""The command-line entry points: each module's ``main()`` is a ``[project.scripts]`` command of
pyproject.toml (``npu-tutorials-<module name with dashes>``) and what ``scripts/<module>.py`` runs.

The top layer: it may import every other one.  ``ROOT`` is the checkout this package lives in (its
commands' default build folder, results and pages are there, as ``npu_tutorials.record.results.ROOT``).
"""

import os
from functools import partial
from pathlib import Path
from typing import Callable

from ..core.errors import run_cli
from ..inputs.standin import ensure_standin, tiny_config
from ..inputs.weights import local_path_var

ROOT = Path(__file__).resolve().parents[3]


def serve_tiny(card) -> None:
    """``--tiny``: the card's 2-layer test stand-in is what every later step of this process serves."""
    os.environ[local_path_var(card)] = str(ensure_standin(card, config=tiny_config(card.config), label="tiny").path)


def command(run: Callable[[], int | None]) -> Callable[[], None]:
    """The entry point of a command whose work is ``run``: a :class:`~npu_tutorials.core.errors.TutorialError`
    becomes one line (exit 2), Ctrl-C exit 130, else ``run``'s return code."""
    return partial(run_cli, run)
