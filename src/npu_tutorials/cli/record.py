"""make record: store this build's complete results documents in results/<model>/<machine>.json.

MODEL=<card key> records that model's document only.  Without it, a document an
earlier build left in the build folder (another commit) is named, not recorded.
Refuses (one line, exit 2) a document from a failed or partial run, from
uncommitted code, or one that fails the regression gate against the record it
would replace (unless REASON="..." says why; the record keeps the reason).  Commit the files it writes: they are what later builds on
other machines show under "On other hardware", and the regression baselines.
"""

import argparse
import os
from pathlib import Path

from . import ROOT, command
from ..checks.recording import record
from ..core.errors import TutorialError
from ..inputs.cards import known_models
from ..inputs.gallery_index import tutorials


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "_build"))
    ap.add_argument("--into", default=None, help="recorded results folder (default: results/ in the repository)")
    ap.add_argument("--reason", default=os.environ.get("REASON", ""),
                    help="why a build that fails the regression gate becomes the baseline (make record REASON=...)")
    ap.add_argument("--model", action="append", default=[], help="record only this model's document (a card key; "
                    "repeatable; make record MODEL=...)")
    a = ap.parse_args()

    only = os.environ.get("TUTORIAL_ONLY", "")
    unknown = sorted(set(a.model) - set(known_models()))
    if unknown:
        raise TutorialError(f"make record: no model card {', '.join(map(repr, unknown))} (known: "
                            f"{', '.join(known_models())})")
    models = a.model or (list(tutorials(only=only).values()) if only else None)
    notes: list[str] = []
    for path in record(Path(a.build_dir) / "results", Path(a.into) if a.into else None, models, a.reason, notes):
        print(f"record: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    for line in notes:
        print(f"record: {line}")
    return 0


main = command(run)  # scripts/record.py and npu-tutorials-record
