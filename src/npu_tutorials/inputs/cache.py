"""The build's cache directory (stand-ins, converted checkpoints, weight checksums)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where stand-ins, converted checkpoints and checksums are kept (``TUTORIAL_CACHE``)."""
    return Path(os.environ.get("TUTORIAL_CACHE") or Path.home() / ".cache" / "npu-tutorials")
