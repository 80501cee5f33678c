"""Is the second language complete?  Two checks, one line per problem.

* :func:`catalog_problems`: every message the pages hold now (the gettext builder's ``.pot`` files, made
  with :func:`npu_tutorials.site.i18n.static_text`) has a translation in
  ``docs/source/locale/<lang>/LC_MESSAGES``, and none is fuzzy (an English text that changed since it was
  translated comes back fuzzy from ``make intl``);
* :func:`mirror_problems`: the built site has a counterpart in the second language for every English
  page, each page's language switch points at a page that exists, and a tutorial page shows the same
  tables and figures in both languages (the second language reuses the first one's executed pages).
"""

from __future__ import annotations

import re
from pathlib import Path

from .site_check import failed

SKIP_DIRS = {"_static", "_sources", "_images", "_downloads", "_modules", "_data"}
SWITCH = re.compile(r'<a class="tut-lang-switch[^"]*" href="([^"]+)"')


def catalog_problems(pot_dir: str | Path, locale_dir: str | Path, lang: str = "zh_CN") -> list[str]:
    """One line per catalog that misses messages or holds fuzzy ones, with counts and the first few."""
    from babel.messages.pofile import read_po

    pot_dir, po_dir = Path(pot_dir), Path(locale_dir) / lang / "LC_MESSAGES"
    problems = []
    for pot in sorted(pot_dir.rglob("*.pot")):
        rel = pot.relative_to(pot_dir).with_suffix(".po")
        with open(pot, "rb") as f:
            wanted = [m.id for m in read_po(f) if m.id]
        if not wanted:
            continue
        po = po_dir / rel
        if not po.is_file():
            problems.append(f"{rel}: no catalog ({len(wanted)} messages untranslated; make intl creates it)")
            continue
        with open(po, "rb") as f:
            have = {m.id: m for m in read_po(f) if m.id}
        missing = [w for w in wanted if w not in have or not have[w].string]
        fuzzy = [w for w in wanted if w in have and have[w].string and have[w].fuzzy]
        if missing or fuzzy:
            first = (missing + fuzzy)[0]
            first = first if isinstance(first, str) else first[0]
            problems.append(f"{rel}: {len(missing)} untranslated, {len(fuzzy)} fuzzy (first: {first[:80]!r})")
    return problems


def english_pages(html_dir: Path, lang: str = "zh_CN") -> list[Path]:
    return [p for p in sorted(html_dir.rglob("*.html"))
            if p.relative_to(html_dir).parts[0] not in SKIP_DIRS | {lang}]


def mirror_problems(html_dir: str | Path, lang: str = "zh_CN") -> list[str]:
    """One line per English page without its counterpart, per broken language switch, and per tutorial page
    whose tables or figures differ between the languages (a page that shows a failed run is left to the site
    check, which names its cause)."""

    html_dir = Path(html_dir)
    other = html_dir / lang
    if not other.is_dir():
        return [f"no {lang} site at {other} (make html builds it after the English one)"]
    problems = []
    for page in english_pages(html_dir, lang):
        rel = page.relative_to(html_dir)
        twin = other / rel
        if not twin.is_file():
            problems.append(f"{rel}: no {lang} page")
            continue
        for p in (page, twin):
            text = p.read_text(encoding="utf-8", errors="replace")
            links = SWITCH.findall(text)
            if not links:
                problems.append(f"{p.relative_to(html_dir)}: no language switch")
            elif not (p.parent / links[0]).resolve().is_file():
                problems.append(f"{p.relative_to(html_dir)}: the language switch points at {links[0]}, which is missing")
        if rel.parts[:2] == ("tutorials", "models"):
            a, b = (x.read_text(encoding="utf-8", errors="replace") for x in (page, twin))
            if failed(a):  # the site check names the failure; its tables say nothing more
                continue
            for what, patterns in (("tables", ('class="tut-table"',)),
                                   ("figures", ('class="sphx-glr-single-img', 'class="sphx-glr-multi-img'))):
                n_a, n_b = (sum(x.count(p) for p in patterns) for x in (a, b))  # as site_check counts them
                if n_a != n_b:
                    problems.append(f"{rel}: {n_a} {what} in English, {n_b} in {lang}")
    return problems
