"""Is the built site publishable?  One line per page that is not.

Two strictnesses:

* ``built`` (the end of every ``make html``): each tutorial page either shows a
  good executed run (output, tables, a figure, no traceback, provenance equal to
  its results JSON) or was rendered without execution and says so on the page.
  A failed or stale page fails the build.
* ``strict`` (``make check``, CI): every selected tutorial executed, and well.
"""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from ..core.errors import FAILED_MARK, TutorialError, cause
from ..inputs.gallery_index import tutorials
from ..record.results import page_record, read_doc, recorded_dir
from ..inputs.cards import load_card
from ..record.results import machine_paths
from .gate import gate, host_label
from .recording import recorded_problems
from ..record.results import recorded

NOT_EXECUTED_MARK = "tut-not-executed"
RECORD_MARK = "tut-from-record"  # site.recorded_page.RECORD_MARK (checks may not import the site layer)
FRESH_MARK = "tut-freshness"  # site.freshness.FRESH_MARK


def failure_line(html: str) -> str:
    """The failed cell's own error as the page shows it, in one line: the message of a
    :class:`TutorialError` (shown without a traceback, in a block marked ``tut-failed``:
    :mod:`npu_tutorials.site.failures`), else the exception line of the first traceback (its first line after
    the frames, not the last line of a message that quotes a log)."""
    def text_of(block: str) -> list[str]:
        return [ln for ln in html_lib.unescape(re.sub(r"<[^>]+>", "", block)).splitlines() if ln.strip()]

    i = html.find(FAILED_MARK)
    if i >= 0:
        j = html.find("<pre", i)
        lines = text_of(html[j:html.find("</pre>", j)]) if j > 0 else []
        return cause("\n".join(lines).removeprefix("TutorialError: "))
    i = html.find("Traceback (most recent call last)")
    if i < 0:
        return ""
    end = html.find("</pre>", i)
    lines = text_of(html[i:end] if end > 0 else html[i:])[1:]
    # the frames are indented ("  File ...", "    code"); the exception's own text starts at the first line that is not
    first = next((ln.strip() for ln in lines if not ln.startswith(" ")), "")
    return first or (lines[-1].strip() if lines else "")


def failed(html: str) -> bool:
    """The page shows a failed run (a traceback, or a tutorial's error shown without one)."""
    return "Traceback (most recent call last)" in html or FAILED_MARK in html


def _executed(html: str) -> bool:
    return "sphx-glr-script-out" in html or "tut-table" in html


def check_page(build: Path, stem: str, key: str, *, strict: bool) -> list[str]:
    page = build / "html" / "tutorials" / "models" / f"{stem}.html"
    res = build / "results" / f"{key}.json"
    if not page.is_file():
        return [f"{stem}: no page at {page}"]
    html = page.read_text(encoding="utf-8")
    problems = []
    if failed(html):
        why = failure_line(html)
        if res.is_file():  # the failed run's document names the cause as the tutorial raised it
            try:
                prov = read_doc(res).provenance
                if prov.status == "failed" and prov.failure:
                    why = prov.failure
            except TutorialError:
                pass
        return [f"{stem}: the tutorial failed: {why or 'the page shows a traceback'} (the next make html re-runs it)"]
    if not _executed(html):
        if strict:
            problems.append(f"{stem}: the page shows no output: the tutorial did not execute")
        elif NOT_EXECUTED_MARK not in html:
            problems.append(f"{stem}: the page shows no output and does not say that it was not executed")
        return problems
    from_record = RECORD_MARK in html
    if from_record:  # drawn from a recorded run (site.recorded_page): checked against that document
        found = page_record(key)
        if found is None:
            return [f"{stem}: the page is drawn from a recorded run, and no recorded document of {key} fits its card "
                    "now (make record one on a machine that fits it)"]
        res = recorded_dir() / found[0]
    if 'class="tut-view"' in html:
        problems.append(f"{stem}: a view was left undrawn on the page (its placeholder reached the HTML: the pass "
                        "that read the page did not draw it from the results document)")
    for why in re.findall(r'<p class="tut-render-error">(.*?)</p>', html, re.S)[:3]:
        problems.append(f"{stem}: {html_lib.unescape(why)}")
    if FRESH_MARK not in html:
        problems.append(f"{stem}: no 'where these numbers come from' block under the title")
    if not (build / "html" / "api" / "bundles" / f"{stem}.zip").is_file():
        problems.append(f"{stem}: no bundle at html/api/bundles/{stem}.zip (the page links it)")
    if html.count('class="tut-table"') < 3:
        problems.append(f"{stem}: fewer than 3 result tables on the page")
    if "sphx-glr-single-img" not in html and "sphx-glr-multi-img" not in html:
        problems.append(f"{stem}: no figure on the page")
    drawn = html.count('class="tut-table"') + len(re.findall(r'class="sphx-glr-(?:single|multi)-img tut-figure', html))
    csvs = html.count('class="tut-data"')
    if csvs != drawn:
        problems.append(f"{stem}: {drawn} tables and figures and {csvs} CSV downloads under them "
                        "(site.render.table_block, figure_block: one each)")
    if not res.is_file():
        problems.append(f"{stem}: no results JSON at {res}")
        return problems
    try:
        doc = read_doc(res)
    except TutorialError as exc:
        problems.append(f"{stem}: {exc}")
        return problems
    prov = doc.provenance
    if prov.status != "complete":
        problems.append(f"{stem}: the run {prov.status} ({prov.failure or 'no reason recorded'})")
    elif not prov.wall_time_s > 0:
        problems.append(f"{stem}: wall time {prov.wall_time_s} s: the tutorial did not run")
    elif prov.built_at not in html or (prov.git_commit not in html and prov.git_commit[:12] not in html):
        problems.append(f"{stem}: the page's provenance does not match {res.name} (stale page or JSON)")
    if prov.weights is None:
        problems.append(f"{stem}: results JSON does not say which weights were used")
    problems += [f"{stem}: {line}" for line in failed_verdicts(doc, load_card(key))]
    if doc.results.server is None:
        problems.append(f"{stem}: results JSON has no server section")
    if doc.results.benchmark is None and not doc.results.concurrency_sweep:
        problems.append(f"{stem}: results JSON has no performance measurement")
    elif doc.results.memory is None:
        problems.append(f"{stem}: results JSON has no memory section (what the server held while it was measured)")
    return problems


def failed_verdicts(doc, card) -> list[str]:
    """A FAIL is loud: one line per check that says FAIL on the page, naming its section, the check and its figure
    (so make check, and the make html that ends with it, exit non-zero), except one the card declares as a known
    deviation (``accuracy.known_deviations["<section>: <check>"]``: its reason is shown under the verdict)."""
    known = card.accuracy.known_deviations
    return [f"{section} says FAIL: {c.metric} {c.measured} (threshold {c.threshold})"
            for section in type(doc.results).model_fields
            for c in getattr(getattr(doc.results, section), "checks", None) or []
            if not c.passed and f"{section}: {c.metric}" not in known]


def machine_path_problems(files) -> list[str]:
    """One line per file (a results document, a page, a committed record) that carries a path of this machine
    (its checkout, cache, venv, home or working directory: :func:`~npu_tutorials.record.results.machine_paths`).
    A failed page is left out: the build fails on it already, with its cause, which may name the server's log."""
    # /root is also the home inside every container the pages' docker commands start (-v /root/.cache:...)
    paths = sorted((p for p in machine_paths() if len(p) > 1 and p != "/root"), key=len, reverse=True)
    out = []
    for f in files:
        try:
            text = Path(f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found = next((p for p in paths if p in text), None)
        if found and FAILED_MARK not in text:  # a failed page is reported once, with its cause (the server log's path)
            out.append(f"{Path(f).name}: carries the machine path {found} (a page, document or record must not)")
    return out


PROBLEMATIC = re.compile(r'<span class="problematic"[^>]*>(.*?)</span>', re.S)


def markup_problems(build: Path) -> list[str]:
    """One line per page where docutils left markup it could not resolve (a ``{fact}`` role whose record is
    missing, :mod:`npu_tutorials.site.paired_facts`; a broken role or reference): the page shows the raw markup."""
    out = []
    for f in sorted((build / "html").rglob("*.html")):
        found = PROBLEMATIC.search(f.read_text(encoding="utf-8", errors="replace"))
        if found:
            out.append(f"{f.relative_to(build / 'html')}: shows markup the build could not resolve "
                       f"({html_lib.unescape(re.sub('<[^>]+>', '', found.group(1)))[:120]}; the build log says why)")
    return out


def written_files(build: Path) -> list[Path]:
    """What a build writes for readers: every results document and every page (both languages)."""
    return sorted([*(build / "results").glob("*.json"), *(build / "html").rglob("*.html")])


def check(build: str | Path, only: str = "", *, strict: bool = True) -> list[str]:
    """One line per page that is not publishable, naming the page and every problem it has, and one per
    written file that carries a machine path."""
    build = Path(build)
    lines = []
    selected = tutorials(only=only)
    for stem, key in selected.items():
        problems = check_page(build, stem, key, strict=strict)
        if problems:
            lines.append(f"{stem}: " + "; ".join(p.removeprefix(f"{stem}: ") for p in problems))
    # the recorded documents the pages draw beside this build's ("On other hardware", the support matrix)
    recorded = recorded_problems(models=set(selected.values()) if only else None)
    return lines + recorded + machine_path_problems(written_files(build)) + markup_problems(build)


def gate_lines(build: str | Path, only: str = "") -> tuple[list[str], list[str]]:
    """``make check GATE=1``: (notes, regressions), one regression per line with both values and provenances
    (:func:`gate.gate`: presence and accuracy; speed is the paired gate's).  An unreadable recorded document is a
    regression: it would turn the gate off."""
    notes, regressions = [], []
    for stem, key in tutorials(only=only).items():
        path = Path(build) / "results" / f"{key}.json"
        if not path.is_file():
            notes.append(f"{key}: no results in this build, nothing to compare")
            continue
        doc = read_doc(path)
        errors: list[str] = []
        g = gate(doc, recorded(key, errors=errors), errors)
        if g.baseline is None:
            notes.append(f"{key}: no recorded baseline for {doc.provenance.machine.slug}, "
                         f"{doc.provenance.weights.kind if doc.provenance.weights else '?'} weights, "
                         f"{doc.provenance.profile} profile, {doc.provenance.engine_dtype}: nothing to compare")
        elif g.passed:
            notes.append(f"{key}: every figure and accuracy check of the baseline of {g.baseline.provenance.built_at} "
                         f"is here, accuracy within its margins; speed against it, not judged here (the paired "
                         f"gate judges speed): {g.ratio_text()}; this build on {host_label(doc)}, the baseline on "
                         f"{host_label(g.baseline)}")
        regressions += g.regressions
    return notes, regressions
