"""The vllm-ascend releases this project supports, and the extract of each (``data/pinned/*.json``: engine flags,
``--compilation-config`` and ``--additional-config`` keys, read from that release's sources by
``scripts/extract_pinned_schema.py``); :func:`schema_for` picks the one of a version, :func:`installed_vllm_ascend`
reads the installed one's version without importing it."""

from __future__ import annotations

import importlib.metadata as md
import json
import re
from functools import lru_cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..core.errors import TutorialError
from .versions_probe import package_version

SCHEMA_PATH = Path(__file__).parents[1] / "data" / "pinned" / "schema.json"  # the pinned release (v0.23.0)
PINNED_DIR = SCHEMA_PATH.parent  # one extract per supported vllm-ascend release (*.json)


@lru_cache(maxsize=1)
def pinned_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def pinned_label() -> str:
    s = pinned_schema()
    return f"vLLM {s['vllm']['version']} / vllm-ascend {s['vllm_ascend']['tag']}"


@lru_cache(maxsize=1)
def _extracts() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in sorted(PINNED_DIR.glob("*.json")):
        s = json.loads(path.read_text(encoding="utf-8"))
        tag = s["vllm_ascend"]["tag"]
        if tag in out:
            raise TutorialError(f"{path.name}: a second extract of vllm-ascend {tag}")
        out[tag] = s
    return out


def version_key(version: str) -> Version | None:
    """PEP 440's order of vllm-ascend versions ("v0.23.0" too): a development build (``.devN``, as an image built
    from main has it: "0.25.1rc2.dev14+g1234abc") before the version it leads to, a candidate before its release,
    a post-release after it; None where ``version`` is none ("", "main")."""
    try:
        return Version((version or "").strip())
    except InvalidVersion:
        return None


def supported_releases() -> list[str]:
    """The vllm-ascend tags with an extract in ``data/pinned/``, oldest first."""
    return sorted(_extracts(), key=version_key)


def dist_version(*dists: str) -> str | None:
    """The installed version of the first of ``dists`` this host has (package metadata: nothing is imported)."""
    return package_version(*dists)


def installed_vllm_ascend() -> str | None:
    """The version of the vllm-ascend this host has installed, else None."""
    return dist_version("vllm-ascend", "vllm_ascend")


def schema_for(version: str | None) -> dict:
    """The extract a vllm-ascend ``version`` ("0.25.1rc1", "v0.23.0", "0.23.0.post1") is checked against: the
    newest supported release not newer than it (a post-release is its release's; a development build of X, which
    comes before X, the newest one strictly older than X: "0.25.1rc1.dev5" gets v0.23.0's, "0.25.1rc2.dev14"
    v0.25.1rc1's; a version older than every extract, or none (None, "", "main"), gets the pinned one,
    :func:`pinned_schema`)."""
    pinned = pinned_schema()
    have = version_key(version or "")
    if have is None:
        return pinned
    tags = [t for t in supported_releases() if version_key(t) <= have]
    if not tags or tags[-1] == pinned["vllm_ascend"]["tag"]:
        return pinned
    return _extracts()[tags[-1]]


def release_tuple(version: str) -> tuple[int, int, int] | None:
    """``"v0.23.0"``, ``"0.23.0.post1"``, ``"0.24.0rc1"`` -> ``(0, 23, 0)``, ``(0, 23, 0)``, ``(0, 24, 0)``: the
    release a version belongs to (a post-release of 0.23.0 is 0.23.0's; a candidate of 0.24.0 is 0.24.0's);
    None where it names none."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (version or "").strip())
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None
