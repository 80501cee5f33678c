"""Check the build's TUTORIAL_* settings, model cards and weights before Sphinx starts.

Each problem is reported as one line (exit 2), so a bad setting never
surfaces as a traceback in the middle of a build.

``--prepare`` (``make html``) then builds the stand-ins (and conversions) of the tutorials this build
executes, several at once (npu_tutorials.site.prepare), and records what that cost in
``<build dir>/preparation.json`` for the build-costs page.
"""

import os
import sys

from ..engine.backend import check_npu_image, detect_backend
from ..inputs.cards import known_models, load_card
from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..record.results import known_commit
from ..engine.platform import platform_for
from ..tutorial import choose_port, select_profile
from ..inputs.weights import resolve_weights, weights_mode
from ..checks.publish import publish_target
from ..inputs.gallery_index import GALLERY_OUT
from ..site.prepare import prepare, write_record
from ..site.rerun import will_execute
from ..site.selection import build_hardware, select
from . import command


def run() -> int:
    for key in known_models():
        load_card(key)  # every card must be valid, not only the selected ones

    target = publish_target()
    if target:  # every page and shard of a published site names the commit it was built from
        known_commit(f"PUBLISH={target}")
    backend = detect_backend()
    mode = weights_mode()
    if target and (backend != target or mode != "real"):
        raise TutorialError(f"PUBLISH={target} needs TUTORIAL_BACKEND={target} and TUTORIAL_WEIGHTS=real "
                            f"(this build: backend {backend}, weights {mode})")
    if platform_for(backend).ascend:
        check_npu_image()
    if os.environ.get("TUTORIAL_PORT"):
        choose_port()
    selected = tutorials(only=os.environ.get("TUTORIAL_ONLY", ""))
    for stem, key in selected.items():
        card = load_card(key)
        profile = select_profile(card, platform_for(backend))
        w = resolve_weights(card, mode, build_standin=False)
        what = w.label() if w else f"stand-in (seed {card.stand_in.seed}, built or reused at build time)"
        print(f"preflight: {stem}: backend {backend}, profile {profile}, weights: {what}")
    if "--prepare" in sys.argv[1:]:
        prepare_for_build(backend)
    return 0


def prepare_for_build(backend: str) -> None:
    """The stand-ins of the tutorials that this build executes (selected, in this shard, fitting the hardware,
    and changed since their last run), made before Sphinx starts."""
    sel = select(build_hardware(backend), os.environ.get("TUTORIAL_ONLY", ""), os.environ.get("TUTORIAL_SHARD"))
    keys = {stem: key for stem, key in tutorials().items() if stem in sel.execute}
    keys = [key for stem, key in keys.items() if will_execute(stem, key, GALLERY_OUT)]
    prep = prepare(keys, say=lambda line: print(f"preflight: {line}", flush=True))
    if prep is None:
        return
    path = write_record(prep)
    print(f"preflight: prepared {len(prep.jobs)} checkpoint(s), {prep.workers} at a time, in {prep.wall_s:.1f} s "
          f"({path})", flush=True)


main = command(run)  # scripts/preflight.py and npu-tutorials-preflight
