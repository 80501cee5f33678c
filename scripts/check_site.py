#!/usr/bin/env python
"""Post-build check: every tutorial executed and its page shows what it measured.

Fails (exit 1, one line per problem) when a tutorial page is missing, was
built without execution, lacks result tables, figures or provenance, or has
no results JSON (or one whose provenance does not match the page).
"""

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from npu_tutorials.gallery_index import tutorials  # noqa: E402
from npu_tutorials.results import REQUIRED_PROVENANCE  # noqa: E402


def check(build: Path, only: str = "") -> list[str]:
    problems = []
    for stem, key in tutorials(only=only).items():
        page = build / "html" / "tutorials" / "models" / f"{stem}.html"
        res = build / "results" / f"{key}.json"
        if not page.is_file():
            problems.append(f"{stem}: no page at {page}")
            continue
        html = page.read_text(encoding="utf-8")
        if "sphx-glr-script-out" not in html and "tut-table" not in html:
            problems.append(f"{stem}: the page shows no output: the tutorial did not execute")
            continue
        if html.count('class="tut-table"') < 3:
            problems.append(f"{stem}: fewer than 3 result tables on the page")
        if "sphx-glr-single-img" not in html and "sphx-glr-multi-img" not in html:
            problems.append(f"{stem}: no figure on the page")
        if "Traceback (most recent call last)" in html:
            problems.append(f"{stem}: the page shows a traceback")
        if not res.is_file():
            problems.append(f"{stem}: no results JSON at {res}")
            continue
        doc = json.loads(res.read_text(encoding="utf-8"))
        prov = doc.get("provenance", {})
        missing = [k for k in REQUIRED_PROVENANCE if prov.get(k) in (None, "")]
        if missing:
            problems.append(f"{stem}: results JSON lacks provenance {missing}")
        elif not prov["wall_time_s"] > 0:
            problems.append(f"{stem}: wall time {prov['wall_time_s']} s: the tutorial did not run")
        elif prov["built_at"] not in html or prov["git_commit"] not in html:
            problems.append(f"{stem}: the page's provenance does not match {res.name} (stale page or JSON)")
        results = doc.get("results", {})
        for section in ("environment", "weights", "server"):
            if section not in results:
                problems.append(f"{stem}: results JSON lacks '{section}'")
        if not {"benchmark", "concurrency_sweep"} & set(results):
            problems.append(f"{stem}: results JSON has no performance measurement")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build-dir", default=str(ROOT / "_build"))
    a = ap.parse_args()
    problems = check(Path(a.build_dir), os.environ.get("TUTORIAL_ONLY", ""))
    for p in problems:
        print(f"check: {p}", file=sys.stderr)
    if not problems:
        print("check: every tutorial executed, with tables, figures and provenance")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
