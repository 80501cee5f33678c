"""Is every message of the site translated?  Extracts the pages' messages now (Sphinx's gettext builder,
executing nothing) and compares them with docs/source/locale/<lang>/LC_MESSAGES; one line per catalog
with untranslated or fuzzy messages.  Then the messages the code writes (tables, verdicts, banners, plot labels:
every _() and N_() of the package) against their catalog, src/npu_tutorials/data/locale/<lang>/LC_MESSAGES/
messages/*.po: one line per message without a translation, per translation whose {fields} differ from the
English, and per message two files translate differently.  Exit 1 on any.  make check runs it; make intl
updates the pages' catalogs.

  python scripts/check_translations.py [--lang zh_CN]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import ROOT, command
from ..checks.translations import catalog_problems
from ..core import messages
from ..inputs.cards import catalog_texts


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lang", default="zh_CN")
    ap.add_argument("--locale-dir", default=str(ROOT / "docs" / "source" / "locale"))
    a = ap.parse_args()

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

    marked = messages.extract()
    for text, places in catalog_texts().items():  # the cards' prose a page shows through the catalog
        marked.setdefault(text, []).extend(places)
    have, clashes = messages.read_catalog(messages.catalog_path(a.lang))
    code = messages.untranslated(a.lang, marked, have) + messages.bad_fields(a.lang, have) + clashes
    for p in problems + code:
        print(f"translations: {p}", file=sys.stderr)
    if not problems:
        print(f"translations: every message of {len(pots)} catalogs is translated into {a.lang}, none fuzzy")
    if not code:
        print(f"translations: every one of the {len(marked)} messages the code writes is translated into {a.lang}")
    return 1 if problems or code else 0


main = command(run)  # scripts/check_translations.py and npu-tutorials-check-translations
