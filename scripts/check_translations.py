#!/usr/bin/env python
"""Is every message of the site translated?  Extracts the pages' messages now (Sphinx's gettext builder,
executing nothing) and compares them with docs/source/locale/<lang>/LC_MESSAGES; one line per catalog
with untranslated or fuzzy messages (exit 1).  make check runs it; make intl updates the catalogs.

  python scripts/check_translations.py [--lang zh_CN]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from npu_tutorials.core.errors import run_cli  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="zh_CN")
    ap.add_argument("--locale-dir", default=str(ROOT / "docs" / "source" / "locale"))
    a = ap.parse_args()
    from npu_tutorials.checks.translations import catalog_problems

    with tempfile.TemporaryDirectory(prefix="gettext-") as tmp:
        env = {**os.environ, "TUTORIAL_TRANSLATION_PASS": "1"}
        r = subprocess.run([sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-c", str(ROOT),
                            str(ROOT / "docs" / "source"), str(Path(tmp) / "pot"), "-d", str(Path(tmp) / "doctrees")],
                           cwd=ROOT, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"translations: the message extraction failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        pots = list((Path(tmp) / "pot").rglob("*.pot"))
        problems = catalog_problems(Path(tmp) / "pot", a.locale_dir, a.lang)
    for p in problems:
        print(f"translations: {p}", file=sys.stderr)
    if not problems:
        print(f"translations: every message of {len(pots)} catalogs is translated into {a.lang}, none fuzzy")
    return 1 if problems else 0


if __name__ == "__main__":
    run_cli(main)
