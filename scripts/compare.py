#!/usr/bin/env python
"""Is B faster than A on this host? Two configurations of a model's page, measured alternately.

Runs :func:`npu_tutorials.cli.compare.main`, a command of its own where the package is installed
(``npu-tutorials-compare``); ``--help`` says how to use it.
"""

import sys
from pathlib import Path

# this checkout's package, installed or not: the copy-paste commands run it from a plain checkout, and make may
# run a checkout with another one's venv (VENV=...), whose editable install is that other checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from npu_tutorials.cli.compare import main  # noqa: E402

if __name__ == "__main__":
    main()
