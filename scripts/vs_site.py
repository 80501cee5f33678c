#!/usr/bin/env python
"""Hold your own benchmark run against the page's.

Runs :func:`npu_tutorials.cli.vs_site.main`, a command of its own where the package is installed
(``npu-tutorials-vs-site``); ``--help`` says how to use it.
"""

import sys
from pathlib import Path

# this checkout's package, installed or not (as the other scripts)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from npu_tutorials.cli.vs_site import main  # noqa: E402

if __name__ == "__main__":
    main()
