"""Shards across runners.

  python scripts/shard.py pack --shard k/N      after `make html SHARD=k/N`: pack what this shard executed
  python scripts/shard.py assemble --shards DIR  check and unpack N shard archives (then make builds the site)

Bad input (an incomplete set, shards of different commits, a tutorial twice) is one line each, exit 2.
"""

import argparse
import os
import sys
from pathlib import Path

from . import ROOT, command
from ..core.errors import TutorialError

from ..inputs.gallery_index import GALLERY_OUT
from ..engine.backend import detect_backend
from ..record.results import git_commit
from ..site import shards
from ..site.selection import build_hardware, select


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["pack", "assemble"])
    ap.add_argument("--shard", default=os.environ.get("TUTORIAL_SHARD"))
    ap.add_argument("--shards", type=Path, help="folder of shard-k-of-N.tar.gz archives (assemble)")
    ap.add_argument("--build-dir", type=Path, default=ROOT / "_build")
    a = ap.parse_args()

    downloads, results = GALLERY_OUT / "data", a.build_dir / "results"
    if a.action == "pack":
        if not a.shard:
            raise TutorialError("pack needs SHARD=k/N (the shard this build executed)")
        sel = select(build_hardware(detect_backend()), os.environ.get("TUTORIAL_ONLY", ""), a.shard)
        out = shards.pack(a.shard, GALLERY_OUT, downloads, results, sel.execute, a.build_dir / "shards")
        print(f"shard: packed {', '.join(sel.execute) or 'nothing (no tutorial of this shard fits here)'} into {out}")
        return 0
    if not a.shards:
        raise TutorialError("assemble needs SHARDS=<folder of shard-k-of-N.tar.gz archives>")
    manifests = shards.read_manifests(a.shards)
    problems = shards.check_set(manifests, git_commit())
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        return 2
    stems = shards.unpack(manifests, GALLERY_OUT, downloads, results)
    print(f"shard: assembled {len(manifests)} shards: {', '.join(stems)}")
    return 0


main = command(run)  # scripts/shard.py and npu-tutorials-shard
