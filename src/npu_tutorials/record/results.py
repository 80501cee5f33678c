"""Results documents on disk: this build's, and those recorded on other hardware.

* ``_build/results/<model>.json``: what this build measured (written by
  :meth:`Tutorial.finish`, or with ``status: failed`` when a run stops part-way).
* ``results/<model>/<machine-slug>.json`` in the repository: documents recorded
  by earlier builds on other hardware (``make record``), shown beside this
  build's and used as regression baselines.

Documents are validated on write and on read (:mod:`npu_tutorials.record.schema`) and
must not hold paths of the machine that made them.  A document of an older schema version reads as this version
stores it (:mod:`npu_tutorials.record.versions`); one is written in this version.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import TutorialError
from .schema import SCHEMA_VERSION, ResultsDoc
from .versions import OLDEST_READ, readable
from ..inputs.digest import card_digest
from .schema import FromRecord

ROOT = Path(__file__).resolve().parents[3]
RECORDED_DIR = ROOT / "results"


def results_dir() -> Path:
    return Path(os.environ.get("TUTORIAL_RESULTS_DIR") or Path.cwd() / "_build" / "results")


def artifacts_dir() -> Path:
    """Where tutorials put working files (raw benchmark JSON, server logs)."""
    return Path(os.environ.get("TUTORIAL_ARTIFACTS_DIR") or results_dir() / "artifacts")


def recorded_dir() -> Path:
    return Path(os.environ.get("TUTORIAL_RECORDED_DIR") or RECORDED_DIR)


UNKNOWN_COMMIT = "unknown"


def _git_head(cwd: str | Path | None = None) -> tuple[str, str]:
    """(commit with ``+dirty`` when tracked files changed, or "unknown"; git's first error line, or '')."""
    cwd = cwd or Path(__file__).resolve().parent
    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], cwd=cwd, capture_output=True,
                              text=True, timeout=10)
        sha = proc.stdout.strip() if proc.returncode == 0 else ""
        if not sha:
            return UNKNOWN_COMMIT, (proc.stderr.strip().splitlines() or ["git rev-parse HEAD failed"])[0]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return UNKNOWN_COMMIT, f"git did not run: {exc}"
    return sha + ("+dirty" if dirty else ""), ""


def git_commit(cwd: str | Path | None = None) -> str:
    return _git_head(cwd)[0]


def known_commit(what: str, cwd: str | Path | None = None) -> str:
    """This checkout's commit; one-line :class:`TutorialError` where git cannot tell it.  In a GitHub
    container job git refuses the mounted workspace ("detected dubious ownership") until it is marked safe."""
    sha, why = _git_head(cwd)
    if sha == UNKNOWN_COMMIT:
        raise TutorialError(f"{what} needs this checkout's commit, and git cannot tell it ({why}); in a container "
                            "job, run `git config --global --add safe.directory \"$GITHUB_WORKSPACE\"` after the "
                            "checkout")
    return sha


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


# -- machine paths -----------------------------------------------------------------------
def machine_paths() -> dict[str, str]:
    """Paths of this machine that must not leave it, each with the placeholder that replaces it."""
    out = {}
    cache = os.environ.get("TUTORIAL_CACHE")
    for path, label in ((cache, "<cache>"), (sys.prefix, "<venv>"), (str(ROOT), "<repo>"),
                        (os.path.expanduser("~"), "<home>"), (os.getcwd(), "<cwd>")):
        if path and len(path) > 1:
            out[str(Path(path).resolve())] = label
            out[path] = label
    return out


def scrub(text: str, extra: dict[str, str] | None = None) -> str:
    """Replace machine paths in ``text`` by placeholders (longest first)."""
    table = {**machine_paths(), **(extra or {})}
    for path in sorted(table, key=len, reverse=True):
        text = text.replace(path, table[path])
    return text


def _strings(obj: Any):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def find_machine_paths(data: dict) -> list[str]:
    paths = [p for p in machine_paths() if p not in ("/",)]
    return sorted({p for s in _strings(data) for p in paths if p in s})


# -- read and write ----------------------------------------------------------------------
def write_doc(doc: ResultsDoc, path: Path | None = None) -> Path:
    """Validate ``doc`` and write it (atomically) to ``path``, default ``<results_dir>/<model>.json``, in this
    schema version (a document read from an older one holds what this version stores)."""
    data = ResultsDoc.model_validate({**doc.dump(), "schema": SCHEMA_VERSION}).dump()  # as it will be read back
    leaked = find_machine_paths(data)
    if leaked:
        raise TutorialError(f"results for {doc.model} hold paths of this machine ({', '.join(leaked)}); "
                            "scrub them before writing")
    out = Path(path or results_dir() / f"{doc.model}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def write_record(data: dict, path: Path) -> Path:
    """Write a methods record (``results/methods/*.json``: negative controls, floors, repeatability) as JSON,
    refusing one that carries a path of this machine (a committed record is published as it is)."""
    data = json.loads(json.dumps(data, ensure_ascii=False, default=str))
    leaked = find_machine_paths(data)
    if leaked:
        raise TutorialError(f"{Path(path).name} would hold paths of this machine ({', '.join(leaked)}); write them "
                            "relative to the cache or the checkout (record.results.scrub) before recording")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def document_id(path: str | Path) -> str:
    """A results document's identifier, to quote and to fetch it by (``api/documents/<id>.json``): ``doc-`` and the
    first 12 hex digits of the SHA-256 of its content as JSON with sorted keys, so a document keeps it however
    it is indented, and a recorded document (never rewritten) keeps it for ever."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TutorialError(f"{Path(path).name}: no identifier: it does not read as JSON ({exc})") from None
    return _identifier(data)


def _identifier(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "doc-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def read_doc(path: str | Path) -> ResultsDoc:
    """Read and validate one results document, of this schema version or an older one this code reads
    (:mod:`.versions`: read as this version stores it); one clear line when it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TutorialError(f"{path}: no such results document") from None
    except json.JSONDecodeError as exc:
        raise TutorialError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    version = data.get("schema") if isinstance(data, dict) else None
    if not readable(version):
        raise TutorialError(f"{path}: results schema {version!r}, this code reads schema {OLDEST_READ} to "
                            f"{SCHEMA_VERSION}")
    identifier = _identifier(data)  # of the file as stored, before an older version is read as this one
    try:
        doc = ResultsDoc.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise TutorialError(f"{path}: {loc}: {first['msg']}") from None
    doc._identifier = identifier
    return doc


def this_build(model: str) -> ResultsDoc | None:
    path = results_dir() / f"{model}.json"
    return read_doc(path) if path.is_file() else None


SUPERSEDED = "superseded"  # results/<model>/superseded/: records a later make record replaced, kept as they were


def recorded_paths(model: str, directory: Path | None = None, superseded: bool = False) -> list[Path]:
    """The files of ``model``'s recorded documents (``results/<model>/*.json``: the newest of each machine kind and
    CPU generation) and, with ``superseded``, the earlier ones a later record replaced (``superseded/``)."""
    d = Path(directory or recorded_dir()) / model
    return sorted(d.glob("*.json")) + (sorted((d / SUPERSEDED).glob("*.json")) if superseded else [])


def recorded(model: str, directory: Path | None = None, errors: list[str] | None = None,
             superseded: bool = False) -> list[ResultsDoc]:
    """Documents recorded for ``model`` on other hardware, oldest first (with ``superseded``, also the records later
    ones replaced: :func:`recorded_paths`).

    A file this code cannot read (another schema version, a broken edit) is left out, with one
    line in ``errors`` (if given): an old recording never breaks a build."""
    docs = []
    for p in recorded_paths(model, directory, superseded):
        try:
            docs.append(read_doc(p))
        except TutorialError as exc:
            if errors is not None:
                errors.append(str(exc))
    return sorted(docs, key=lambda doc: doc.provenance.built_at)


def page_record(model: str, directory: Path | None = None) -> tuple[str, ResultsDoc] | None:
    """The recorded document that a page this build did not execute is drawn from, as (its path under
    ``results/``, the document): the newest complete run of ``model`` recorded with the card as it is now
    (``provenance.card_digest``); None where none fits (an unreadable file is ``make check``'s to name)."""
    d = Path(directory or recorded_dir())
    want = card_digest(model)
    fitting = []
    for p in sorted((d / model).glob("*.json")):
        try:
            doc = read_doc(p)
        except TutorialError:
            continue
        if doc.model == model and doc.provenance.status == "complete" and doc.provenance.card_digest == want:
            fitting.append((doc.provenance.built_at, f"{model}/{p.name}", doc))
    if not fitting:
        return None
    _when, rel, doc = max(fitting, key=lambda t: (t[0], t[1]))
    return rel, doc


def shown_doc(model: str) -> tuple[str, ResultsDoc] | None:
    """The document a model's page shows, as (its path under ``results/``, or '' for this build's; the document):
    this build's, else the recorded one the page is drawn from (:func:`page_record`); None for neither (or a
    document of this build that does not read: ``make check`` names it)."""
    try:
        mine = this_build(model)
    except TutorialError:
        return None
    return ("", mine) if mine is not None else page_record(model)


# -- sections a quick build shows from a record --------------------------------------------------
def _section(doc: ResultsDoc, section: str):
    """The measured value of ``section`` in ``doc`` (None where it has none)."""
    r = doc.results
    if section == "tuning":
        return r.tuning
    if section == "transformers_baseline":
        return r.efficiency.baselines if r.efficiency and r.efficiency.baselines else None
    raise ValueError(f"no recorded section {section!r}")


def _same_weights(a, b) -> bool:
    if a is None or b is None or a.kind != b.kind:
        return False
    return (a.hub_id, a.revision) == (b.hub_id, b.revision) if a.kind == "real" else a.seed == b.seed


def section_from_records(doc: ResultsDoc, section: str, records: list[ResultsDoc], why: str):
    """``section``'s value and provenance (:class:`FromRecord`) from the record that fits ``doc`` best, or
    ``(None, None)``.  Fits: the same backend, engine dtype and weights (real: id and revision; stand-in: seed);
    best: the same machine kind, then the newest.  A record that itself copied the section passes on the
    provenance of the build that measured it."""
    p = doc.provenance
    fits = [d for d in records if _section(d, section) is not None and d.provenance.backend == p.backend
            and d.provenance.engine_dtype == p.engine_dtype and _same_weights(d.provenance.weights, p.weights)]
    if not fits:
        return None, None
    best = max(fits, key=lambda d: (d.provenance.machine.slug == p.machine.slug, d.provenance.built_at))
    q = best.provenance
    file = f"results/{best.model}/{q.machine.record_stem}.json"
    origin = best.results.from_records.get(section)
    if origin is None:
        origin = FromRecord(file=file, built_at=q.built_at, git_commit=q.git_commit, machine=q.machine.device_label,
                            slug=q.machine.slug, profile=q.profile, engine_dtype=q.engine_dtype, why=why)
    else:
        origin = origin.model_copy(update={"file": file, "why": why})
    return _section(best, section), origin
