"""The build plan: which tutorials this build executes (and why each other one is not), and ``FORCE=1``."""

from __future__ import annotations

from pathlib import Path
import os

from ..inputs.cards import load_card
from .generated import write_if_changed
from .teardown import forget_example
from ..engine.backend import detect_backend
from ..engine.platform import platform_for
from ..engine.scheduler import jobs_for
from ..inputs.gallery_index import tutorials
from .selection import build_hardware, select


def plan_build(gallery_dir: str | Path, only: str = "", shard: str | None = None, assemble: bool = False):
    """Decide which tutorials this build executes; write why each other one is not (``<stem>.skipped``,
    read by the page banner).  Returns the :class:`~npu_tutorials.site.selection.Selection`."""
    backend = detect_backend()
    hw = build_hardware(backend) if not assemble else None
    sel = select(hw, only, shard, assemble=assemble)
    per = max([load_card(k).requires.devices for s, k in tutorials().items() if s in sel.execute] or [1])
    sel.jobs = jobs_for(backend, hw.devices if hw else 0, per, len(sel.execute))
    if sel.jobs > 1:
        os.environ["TUTORIAL_JOBS_RUNNING"] = str(sel.jobs)  # each tutorial takes its share of the host's cores
        var = platform_for(backend).visible_devices_var
        if var and not os.environ.get("TUTORIAL_DEVICE_POOL"):
            inherited = os.environ.get(var)
            os.environ["TUTORIAL_DEVICE_POOL"] = inherited or ",".join(str(i) for i in range(hw.devices))
    d = Path(gallery_dir)
    d.mkdir(parents=True, exist_ok=True)
    for stem in sel.execute:
        (d / f"{stem}.skipped").unlink(missing_ok=True)
    for stem, why in sel.skipped.items():
        write_if_changed(d / f"{stem}.skipped", why + "\n")
    return sel


def force_rerun(gallery_dir: str | Path, only: str = "") -> list[Path]:
    """``FORCE=1``: forget the cached success of every tutorial selected by ``only``."""
    removed = []
    for stem in tutorials(only=only):
        removed += forget_example(gallery_dir, f"{stem}.py")
    return removed
