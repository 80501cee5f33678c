"""Provenance and the results JSON every tutorial writes.

``_build/results/<model>.json`` (schema: docs/source/results-schema.md)::

    {"schema": 1, "model": ..., "provenance": {...}, "results": {section: {...}}}
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
REQUIRED_PROVENANCE = ("built_at", "git_commit", "backend", "device", "versions", "weights", "profile", "wall_time_s")


def results_dir() -> Path:
    return Path(os.environ.get("TUTORIAL_RESULTS_DIR") or Path.cwd() / "_build" / "results")


def artifacts_dir() -> Path:
    """Where tutorials put files a page links to (raw benchmark JSON, logs)."""
    return Path(os.environ.get("TUTORIAL_ARTIFACTS_DIR") or results_dir() / "artifacts")


def git_commit(cwd: str | Path | None = None) -> str:
    cwd = cwd or Path(__file__).resolve().parent
    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10)
        sha = proc.stdout.strip() if proc.returncode == 0 else ""
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha or "unknown") + ("+dirty" if dirty and sha else "")


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_results(model: str, provenance: dict, results: dict) -> Path:
    missing = [k for k in REQUIRED_PROVENANCE if k not in provenance]
    if missing:
        raise ValueError(f"provenance lacks {missing}")
    out = results_dir() / f"{model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema": SCHEMA_VERSION, "model": model, "provenance": provenance, "results": results}
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_jsonable(doc), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out
