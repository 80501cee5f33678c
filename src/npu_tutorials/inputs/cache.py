"""The build's cache directory (stand-ins, converted checkpoints, weight checksums), and the checksum of a file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path:
    """Where stand-ins, converted checkpoints and checksums are kept (``TUTORIAL_CACHE``)."""
    return Path(os.environ.get("TUTORIAL_CACHE") or Path.home() / ".cache" / "npu-tutorials")


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 4 MiB blocks (a GGUF or a checkpoint of gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
