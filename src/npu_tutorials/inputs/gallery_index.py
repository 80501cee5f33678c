"""Which gallery script is which model's tutorial."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.errors import TutorialError

GALLERY = Path(__file__).resolve().parents[3] / "gallery"
GALLERY_OUT = GALLERY.parent / "docs" / "source" / "tutorials" / "models"  # the pages sphinx-gallery generates


def gallery_dir() -> Path:
    """The tutorials' folder (``TUTORIAL_GALLERY_DIR`` points tests at a gallery of their own)."""
    return Path(os.environ.get("TUTORIAL_GALLERY_DIR") or GALLERY)


_KEY = re.compile(r"""Tutorial\(\s*["']([^"']+)["']""")


def tutorials(gallery: Path | None = None, only: str = "") -> dict[str, str]:
    """gallery file stem -> model key, for scripts whose name matches ``only`` (a regex)."""
    gallery = gallery or gallery_dir()
    out = {}
    for path in sorted(gallery.glob("*.py")):
        if path.name.startswith("_") or (only and not re.match(only, path.stem)):
            continue
        m = _KEY.search(path.read_text(encoding="utf-8"))
        if m:
            out[path.stem] = m.group(1)
    if only and not out:
        raise TutorialError(f"TUTORIAL_ONLY={only!r} matches no tutorial in gallery/; have: "
                            f"{', '.join(p.stem for p in sorted(gallery.glob('*.py')))}")
    return out
