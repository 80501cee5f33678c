"""Hand freed memory back to the operating system between heavy steps."""

from __future__ import annotations

import ctypes
import gc


def trim_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc keeps them otherwise)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
