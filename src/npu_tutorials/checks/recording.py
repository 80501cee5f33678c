"""``make record``: store this build's documents as the new baseline, refused when the gate fails."""

from __future__ import annotations

from pathlib import Path

from ..inputs.cards import load_card
from ..core.errors import TutorialError
from ..engine.platform import platform_for
from .gate import gate, measured_noise
from ..record.results import UNKNOWN_COMMIT, read_doc, recorded, recorded_dir, write_doc
from ..inputs.cards import known_models


def record(build_results: Path, directory: Path | None = None, models: list[str] | None = None,
           reason: str = "") -> list[Path]:
    """``make record``: store this build's complete documents as ``results/<model>/<record stem>.json`` (the
    machine kind and, where recorded, the CPU generation: :attr:`Machine.record_stem`).

    A build that fails the regression gate against the record it would replace is refused, one line per
    regression, unless ``reason`` says why it should become the baseline (kept in the document)."""
    out = []
    paths = sorted(Path(build_results).glob("*.json"))
    if models is not None:
        paths = [p for p in paths if p.stem in models]
    if not paths:
        raise TutorialError(f"no results documents in {build_results}: run make html first")
    for path in paths:
        doc = read_doc(path)
        if doc.provenance.status != "complete":
            raise TutorialError(f"{path.name}: refusing to record a {doc.provenance.status} run "
                                f"({doc.provenance.failure or 'it did not finish'})")
        if doc.provenance.git_commit.endswith("+dirty") or doc.provenance.git_commit == "unknown":
            raise TutorialError(f"{path.name}: refusing to record a run of uncommitted code "
                                f"({doc.provenance.git_commit}); commit, rebuild, then record")
        errors: list[str] = []
        g = gate(doc, recorded(doc.model, directory, errors), load_card(doc.model),
                 measured_noise(doc, directory, errors), errors)
        if g.regressions and not reason.strip():
            raise TutorialError(f"{path.name}: refusing to record a build that fails the regression gate "
                                f"({'; '.join(g.regressions)}); fix it, or record it with REASON=\"why\"")
        if g.regressions:
            doc.provenance.recorded_despite = f"{reason.strip()} (gate: {'; '.join(g.regressions)})"
        dest = Path(directory or recorded_dir()) / doc.model / f"{doc.provenance.machine.record_stem}.json"
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
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name == "methods" or (models is not None and path.parent.name not in models):
            continue
        name = path.relative_to(root.parent) if root.parent != root else path
        try:
            doc = read_doc(path)
        except TutorialError as exc:
            out.append(f"recorded document {name}: {str(exc).removeprefix(f'{path}: ')}")
            continue
        prov, why = doc.provenance, []
        if doc.model != path.parent.name:
            why.append(f"it is a run of {doc.model!r}, filed under {path.parent.name!r}")
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
