"""``make record``: store this build's documents as the new baseline, refused when the gate fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..core.errors import TutorialError
from ..engine.platform import platform_for
from .gate import gate
from ..record.results import SUPERSEDED, UNKNOWN_COMMIT, read_doc, recorded, recorded_dir, recorded_paths, write_doc
from ..inputs.cards import known_models


def record(build_results: Path, directory: Path | None = None, models: list[str] | None = None,
           reason: str = "", notes: list[str] | None = None) -> list[Path]:
    """``make record``: store this build's complete documents as ``results/<model>/<record stem>.json`` (the
    machine kind and, where recorded, the CPU generation: :attr:`Machine.record_stem`).

    A build that fails the regression gate against the record it would replace is refused, one line per
    regression, unless ``reason`` says why it should become the baseline (kept in the document).  The record it
    replaces moves to ``results/<model>/superseded/<record stem>.<its date and time>.json``, unchanged: its identifier
    stays served (``api/documents/``) and the history view keeps its point.  Returns the files written and moved.

    ``models``: only these models' documents.  Without it, a document that an earlier build left in the folder
    (another commit than the newest document's) is not recorded, and not refused either: ``notes`` gets one line
    naming it."""
    out = []
    paths = sorted(Path(build_results).glob("*.json"))
    if models is not None:
        paths = [p for p in paths if p.stem in models]
    if not paths:
        raise TutorialError(f"no results documents in {build_results}"
                            + (f" for {', '.join(models)}" if models else "") + ": run make html first")
    docs = {path: read_doc(path) for path in paths}
    latest = max(docs.values(), key=lambda d: d.provenance.built_at).provenance.git_commit
    for path, doc in docs.items():
        if models is None and doc.provenance.git_commit != latest:
            if notes is not None:
                notes.append(f"{path.name}: left by an earlier build (commit {doc.provenance.git_commit[:12]}, built "
                             f"{doc.provenance.built_at}; the newest is of {latest[:12]}): not recorded (rebuild "
                             f"it, or make record MODEL={doc.model})")
            continue
        if doc.provenance.status != "complete":
            raise TutorialError(f"{path.name}: refusing to record a {doc.provenance.status} run "
                                f"({doc.provenance.failure or 'it did not finish'})")
        if doc.provenance.git_commit.endswith("+dirty") or doc.provenance.git_commit == "unknown":
            raise TutorialError(f"{path.name}: refusing to record a run of uncommitted code "
                                f"({doc.provenance.git_commit}); commit, rebuild, then record")
        errors: list[str] = []
        g = gate(doc, recorded(doc.model, directory, errors), errors)
        if g.regressions and not reason.strip():
            raise TutorialError(f"{path.name}: refusing to record a build that fails the regression gate "
                                f"({'; '.join(g.regressions)}); fix it, or record it with REASON=\"why\"")
        if g.regressions:
            doc.provenance.recorded_despite = f"{reason.strip()} (gate: {'; '.join(g.regressions)})"
        dest = Path(directory or recorded_dir()) / doc.model / f"{doc.provenance.machine.record_stem}.json"
        if dest.is_file() and read_doc(dest) != doc:  # the record it replaces keeps its content under superseded/
            old = json.loads(dest.read_text(encoding="utf-8"))
            when = re.sub(r"[^0-9T]", "", str(old.get("provenance", {}).get("built_at", "")))[:13] or "undated"
            kept = dest.parent / SUPERSEDED / f"{dest.stem}.{when}.json"
            kept.parent.mkdir(parents=True, exist_ok=True)
            dest.replace(kept)
            out.append(kept)
        out.append(write_doc(doc, dest))
    return out


def recorded_problems(directory: Path | None = None, models: set[str] | None = None) -> list[str]:
    """One line per recorded document (``results/<model>/*.json``) that a page may not be drawn from, naming
    the file: one that does not read as a results document of this schema, one filed under another model or
    a model with no card, one of a run that did not complete or of uncommitted code, one that does not say
    which weights it used, and an NPU record on stand-in weights (a deployment figure needs real ones)."""
    root = Path(directory or recorded_dir())
    cards = set(known_models())
    out = []
    models_here = sorted(d.name for d in root.iterdir() if d.is_dir() and d.name != "methods") if root.is_dir() else []
    for path in [p for m in models_here for p in recorded_paths(m, root, superseded=True)]:
        model = path.parent.parent.name if path.parent.name == SUPERSEDED else path.parent.name
        if models is not None and model not in models:
            continue
        name = path.relative_to(root.parent) if root.parent != root else path
        try:
            doc = read_doc(path)
        except TutorialError as exc:
            out.append(f"recorded document {name}: {str(exc).removeprefix(f'{path}: ')}")
            continue
        prov, why = doc.provenance, []
        if doc.model != model:
            why.append(f"it is a run of {doc.model!r}, filed under {model!r}")
        if doc.model not in cards:
            why.append(f"no model card {doc.model!r}")
        if prov.status != "complete":
            why.append(f"the run {prov.status}")
        if prov.git_commit.endswith("+dirty") or prov.git_commit == UNKNOWN_COMMIT:
            why.append(f"measured by uncommitted code ({prov.git_commit})")
        if prov.weights is None:
            why.append("it does not say which weights it used")
        elif platform_for(prov.backend).ascend and prov.weights.kind != "real":
            why.append("an NPU record on stand-in weights (an NPU figure is shown as a deployment figure: "
                       "record it with real weights, TUTORIAL_WEIGHTS=real)")
        if why:
            out.append(f"recorded document {name}: " + "; ".join(why))
    return out
