"""The command-line entry points: each module's ``main()`` is a ``[project.scripts]`` command of
pyproject.toml (``npu-tutorials-<module name with dashes>``) and what ``scripts/<module>.py`` runs.

The top layer: it may import every other one.  ``ROOT`` is the checkout this package lives in (its
commands' default build folder, results and pages are there, as ``npu_tutorials.record.results.ROOT``).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
