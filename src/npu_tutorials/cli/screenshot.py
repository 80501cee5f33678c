"""Screenshots of built pages, in both languages, as headless Chromium draws them; then each page opened in the
browser and checked (tables laid out, figures decoded, the language switch resolving).  make screenshots runs it.

  python scripts/screenshot.py [--site _build/html] [--page tutorials/models/qwen2_5_0_5b.html ...]
                               [--lang2 zh_CN] [--out _build/screenshots]

Writes <out>/en-<page>.png and <out>/<lang2>-<page>.png (``/`` in the page's path becomes ``-``); exit 1 when the
browser shows a problem on any of them.
"""

import argparse
import sys
from pathlib import Path

from . import ROOT, command
from ..checks.browser import probe, screenshot

DEFAULT_PAGE = "tutorials/models/qwen2_5_0_5b.html"


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", default=str(ROOT / "_build" / "html"))
    ap.add_argument("--page", action="append", help=f"a page's path in the site (default {DEFAULT_PAGE})")
    ap.add_argument("--lang2", default="zh_CN")
    ap.add_argument("--out", default=str(ROOT / "_build" / "screenshots"))
    ap.add_argument("--height", type=int, default=2400)
    a = ap.parse_args()

    site, out = Path(a.site), Path(a.out)
    pages = [p for page in a.page or [DEFAULT_PAGE] for p in (page, f"{a.lang2}/{page}")]
    for page in pages:
        lang, _, rest = page.partition("/") if page.startswith(f"{a.lang2}/") else ("en", "", page)
        png = screenshot(site, page, out / f"{lang}-{rest.replace('/', '-').removesuffix('.html')}.png",
                         height=a.height)
        print(f"screenshot: {png}")
    problems = [p for view in probe(site, pages) for p in view.problems()]
    for p in problems:
        print(f"browser: {p}", file=sys.stderr)
    if not problems:
        print(f"browser: {len(pages)} pages render (tables laid out, figures decoded, language switches resolve)")
    return 1 if problems else 0


main = command(run)  # scripts/screenshot.py and npu-tutorials-screenshot
