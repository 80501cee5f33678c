"""What tests/test_backend.py's process-group test runs in its isolated child: stdlib only, so the child is ready in
well under a second even on a loaded 2-core host (importing test_backend there pulled in the package, and its 5 s
limit ran out before the pid file was written: the newcomer run of ecffbc7)."""

import os
import subprocess
import time
from pathlib import Path


def spawn_and_hang(pidfile):
    child = subprocess.Popen(["sleep", "300"])  # same process group as this function's process
    Path(pidfile).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(300)
