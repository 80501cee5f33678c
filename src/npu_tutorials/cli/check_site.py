"""Post-build check: is the built site publishable?  One line per page that is not (exit 1).

  --strict (make check, CI): every tutorial executed, with tables, figures and provenance.
  --built  (the end of make html): every executed page is good (no traceback, provenance equal
           to its results JSON); a page rendered without execution must say so.
  --lang2 zh_CN  also: the second language's site mirrors the English one (every page, the language
           switch of each, a tutorial page's tables and figures); make html and make check pass it.
"""

import argparse
import os
import sys
from pathlib import Path

from . import ROOT, command
from ..checks.site_check import check
from ..checks.paired_gate import K as PAIRED_K, paired_gate_lines
from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..checks.methods import stale_controls
from ..checks.publish import publish_problems, publish_target
from ..checks.site_check import gate_lines
from ..checks.translations import mirror_problems


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "_build"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--strict", dest="strict", action="store_true", default=True)
    mode.add_argument("--built", dest="strict", action="store_false")
    ap.add_argument("--lang2", default="", metavar="LANG",
                    help="also check the site of this second language (html/LANG) against the English one")
    ap.add_argument("--gate", action="store_true", help="also compare with the recorded baselines (GATE=1): every "
                    "figure and accuracy check present, accuracy within its margins")
    ap.add_argument("--paired", default="", metavar="REF",
                    help="with --gate: also run the gated steps of REF's code (a git worktree) and of this checkout "
                         "alternately, a fresh server per side and round, and fail on a figure that is slower beyond "
                         "its interval by at least paired_gate.MIN_CHANGE (PAIRED=<ref>): the one judge of speed")
    ap.add_argument("--paired-k", type=int, default=PAIRED_K, metavar="K", help="rounds per side (default 6)")
    a = ap.parse_args()
    if a.paired and not a.gate:
        raise TutorialError("PAIRED=<ref> is a form of the regression gate: give GATE=1 too")
    # make check and the end of make html both judge the selection (TUTORIAL_ONLY) only: a page this build was
    # not asked to execute is not this build's to fail
    only = os.environ.get("TUTORIAL_ONLY", "")
    problems = check(Path(a.build_dir), only, strict=a.strict)
    pages = list(problems)  # printed last: a failed page's cause is the build's last line
    if not problems:
        print("check: every tutorial executed, with tables, figures and provenance" if a.strict else
              "check: every page is publishable (executed pages are complete, the others say they did not run)")
    if a.lang2:
        mirror = mirror_problems(Path(a.build_dir) / "html", a.lang2)
        for p in mirror:
            print(f"languages: {p}", file=sys.stderr)
        if not mirror:
            print(f"languages: every page has its {a.lang2} counterpart, with the same tables and figures, and "
                  "a language switch that resolves")
        problems += mirror
    if a.strict:  # the methods page's recorded controls: measured with today's check code and thresholds?

        for line in stale_controls():
            print(f"check: stale record: {line}")

    target = publish_target()
    if target:
        pub = publish_problems(Path(a.build_dir), target, only)
        for p in pub:
            print(f"publish: {p}", file=sys.stderr)
        if not pub:
            print(f"publish: every tutorial ran on {target} with real, identified weights")
        problems += pub
    if a.gate:
        notes, regressions = gate_lines(Path(a.build_dir), only)
        for line in notes:
            print(f"gate: {line}")
        for line in regressions:
            print(f"gate: {line}", file=sys.stderr)
        problems += regressions
    if a.gate and a.paired:
        notes, regressions = paired_gate_lines(Path(a.build_dir), ROOT, a.paired, list(tutorials(only=only).values()),
                                               k=a.paired_k)
        for line in notes:
            print(f"paired gate: {line}")
        for line in regressions:
            print(f"paired gate: {line}", file=sys.stderr)
        problems += regressions
    sys.stdout.flush()  # the lines above first, also where stdout is a pipe
    for p in pages:
        print(f"check: {p}", file=sys.stderr)
    return 1 if problems else 0


main = command(run)  # scripts/check_site.py and npu-tutorials-check-site
