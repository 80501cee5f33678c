"""Teardown between executed examples: no server or benchmark worker outlives the example that started
it, and an example that fails part-way leaves nothing a later build would take as current."""

from __future__ import annotations

from pathlib import Path
import os
import sys

from ..engine.server import stop_all
from ..inputs.gallery_index import tutorials
from .failures import install


def reset_example(gallery_conf, fname, when) -> None:
    """sphinx-gallery ``reset_modules`` hook, called before and after each executed example.

    After: no server outlives the example that started it.  Before: forget the
    example's cached success (its ``.md5``) and its results, so that a run that
    fails or is interrupted part-way leaves nothing a later build would take as
    current; sphinx-gallery writes the ``.md5`` again only when the run succeeds.
    """
    install()  # in this process (a parallel build's worker too): a failure ends on its own cause
    if "npu_tutorials.tutorial.facade" in sys.modules:  # a run that stopped part-way: record it as failed
        sys.modules["npu_tutorials.tutorial.facade"].abandon_active("the tutorial raised before finish()")
    stop_all()
    if "npu_tutorials.engine.bench" in sys.modules:
        sys.modules["npu_tutorials.engine.bench"].close_workers()
    if when == "before" and fname:
        gallery_dir = Path(gallery_conf.get("src_dir", ".")) / gallery_conf["gallery_dirs"][0]  # absolute stays
        forget_example(gallery_dir, Path(fname).name)


def forget_example(gallery_dir: str | Path, fname: str) -> list[Path]:
    """Remove what says ``fname`` ran: its MD5 beside the generated page, its results JSON and
    the files its page offers for download.  Returns what it removed."""
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
