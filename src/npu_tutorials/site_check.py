"""Is the built site publishable?  One line per page that is not.

Two strictnesses:

* ``built`` (the end of every ``make html``): each tutorial page either shows a
  good executed run (output, tables, a figure, no traceback, provenance equal to
  its results JSON) or was rendered without execution and says so on the page.
  A failed or stale page fails the build.
* ``strict`` (``make check``, CI): every selected tutorial executed, and well.
"""

from __future__ import annotations

import json
from pathlib import Path

from .gallery_index import tutorials
from .results import REQUIRED_PROVENANCE

NOT_EXECUTED_MARK = "tut-not-executed"


def _executed(html: str) -> bool:
    return "sphx-glr-script-out" in html or "tut-table" in html


def check_page(build: Path, stem: str, key: str, *, strict: bool) -> list[str]:
    page = build / "html" / "tutorials" / "models" / f"{stem}.html"
    res = build / "results" / f"{key}.json"
    if not page.is_file():
        return [f"{stem}: no page at {page}"]
    html = page.read_text(encoding="utf-8")
    problems = []
    if "Traceback (most recent call last)" in html:
        return [f"{stem}: the page shows a traceback (the tutorial failed; the next make html re-runs it)"]
    if not _executed(html):
        if strict:
            problems.append(f"{stem}: the page shows no output: the tutorial did not execute")
        elif NOT_EXECUTED_MARK not in html:
            problems.append(f"{stem}: the page shows no output and does not say that it was not executed")
        return problems
    if html.count('class="tut-table"') < 3:
        problems.append(f"{stem}: fewer than 3 result tables on the page")
    if "sphx-glr-single-img" not in html and "sphx-glr-multi-img" not in html:
        problems.append(f"{stem}: no figure on the page")
    if not res.is_file():
        problems.append(f"{stem}: no results JSON at {res}")
        return problems
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


def check(build: str | Path, only: str = "", *, strict: bool = True) -> list[str]:
    """One line per page that is not publishable, naming the page and every problem it has."""
    build = Path(build)
    lines = []
    for stem, key in tutorials(only=only).items():
        problems = check_page(build, stem, key, strict=strict)
        if problems:
            lines.append(f"{stem}: " + "; ".join(p.removeprefix(f"{stem}: ") for p in problems))
    return lines
