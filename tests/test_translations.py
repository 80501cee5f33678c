"""The site in Simplified Chinese: the translators' catalogs are complete, the check says FAIL on a missing
or fuzzy translation, the second language's site mirrors the English one, and what a build measures stays
out of the catalogs.  (The second language reuses the executed pages: tests/test_shards.py counts the
executions of a real make html and make assemble.)"""

import subprocess
import sys
from pathlib import Path

from npu_tutorials.checks.translations import catalog_problems, mirror_problems
from npu_tutorials.site.i18n import static_text

ROOT = Path(__file__).resolve().parents[1]

POT = '''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Throughput"
msgstr ""

msgid "Deploy it yourself"
msgstr ""
'''


def _catalogs(tmp_path, po_body: str | None):
    pot, loc = tmp_path / "pot", tmp_path / "locale"
    (pot / "tutorials").mkdir(parents=True)
    (pot / "tutorials" / "page.pot").write_text(POT)
    if po_body is not None:
        po = loc / "zh_CN" / "LC_MESSAGES" / "tutorials" / "page.po"
        po.parent.mkdir(parents=True)
        po.write_text(po_body)
    return pot, loc


def test_a_complete_catalog_passes_and_a_missing_or_fuzzy_message_fails(tmp_path):
    good = POT.replace('msgid "Throughput"\nmsgstr ""', 'msgid "Throughput"\nmsgstr "吞吐"').replace(
        'msgid "Deploy it yourself"\nmsgstr ""', 'msgid "Deploy it yourself"\nmsgstr "自行部署"')
    assert catalog_problems(*_catalogs(tmp_path / "a", good)) == []
    untranslated = good.replace('msgstr "吞吐"', 'msgstr ""')
    assert catalog_problems(*_catalogs(tmp_path / "b", untranslated)) == [
        "tutorials/page.po: 1 untranslated, 0 fuzzy (first: 'Throughput')"]
    fuzzy = good.replace('msgid "Deploy it yourself"', '#, fuzzy\nmsgid "Deploy it yourself"')
    assert catalog_problems(*_catalogs(tmp_path / "c", fuzzy)) == [
        "tutorials/page.po: 0 untranslated, 1 fuzzy (first: 'Deploy it yourself')"]
    changed = good.replace('msgid "Throughput"', 'msgid "Output throughput"')  # the English text changed
    assert "1 untranslated" in catalog_problems(*_catalogs(tmp_path / "d", changed))[0]
    assert catalog_problems(*_catalogs(tmp_path / "e", None)) == [
        "tutorials/page.po: no catalog (2 messages untranslated; make intl creates it)"]


def test_every_message_of_the_site_is_translated():
    """scripts/check_translations.py extracts the pages' messages now and finds each translated, none fuzzy."""
    p = subprocess.run([sys.executable, "scripts/check_translations.py"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "every message of" in p.stdout and "translated into zh_CN" in p.stdout
    assert "messages the code writes is translated into zh_CN" in p.stdout


def _page(path: Path, body: str, switch: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    link = f'<a class="tut-lang-switch nav-link" href="{switch}">x</a>' if switch else ""
    path.write_text(f"<html><body>{link}{body}</body></html>")


def test_the_second_site_mirrors_the_first(tmp_path):
    html = tmp_path / "html"
    tables = '<div class="tut-table"></div>' * 3 + '<img class="sphx-glr-single-img">'
    _page(html / "index.html", "", "zh_CN/index.html")
    _page(html / "zh_CN" / "index.html", "", "../index.html")
    _page(html / "tutorials" / "models" / "a.html", tables, "../../zh_CN/tutorials/models/a.html")
    _page(html / "zh_CN" / "tutorials" / "models" / "a.html", tables, "../../../tutorials/models/a.html")
    _page(html / "_static" / "x.html", "", None)  # not a page
    assert mirror_problems(html) == []

    _page(html / "zh_CN" / "tutorials" / "models" / "a.html", '<div class="tut-table"></div>',
          "../../../tutorials/models/b.html")
    _page(html / "usage.html", "", "zh_CN/usage.html")
    assert mirror_problems(html) == [
        "zh_CN/tutorials/models/a.html: the language switch points at ../../../tutorials/models/b.html, "
        "which is missing",
        "tutorials/models/a.html: 3 tables in English, 1 in zh_CN",
        "tutorials/models/a.html: 1 figures in English, 0 in zh_CN",
        "usage.html: no zh_CN page"]
    assert mirror_problems(tmp_path / "nothing")[0].startswith("no zh_CN site")


class _App:
    def __init__(self, builder):
        self.builder = type("B", (), {"name": builder})()


def test_what_a_build_measures_stays_out_of_the_catalogs():
    page = "Title\n=====\n\nProse.\n\n.. rst-class:: sphx-glr-timing\n\n   **Total running time of the script:** (3 minutes 12.5 seconds)\n\nMore.\n"
    src = [page]
    static_text(_App("gettext"), "tutorials/models/qwen2_5_0_5b", src)
    assert "Total running time" not in src[0] and "Prose." in src[0] and "More." in src[0]
    src = [page]
    static_text(_App("html"), "tutorials/models/qwen2_5_0_5b", src)
    assert src == [page]  # the pages themselves keep it
    times = [":orphan:\n\nComputation times\n=================\n**09:09.359** total execution time\n\n+---+\n"]
    static_text(_App("gettext"), "sg_execution_times", times)
    assert times == [":orphan:\n\nComputation times\n=================\n"]


def test_the_deploy_snippets_comments_read_in_the_pages_language():
    """The Chinese pass shows the "Deploy it yourself" snippets' comments in Chinese, commands untouched."""
    from types import SimpleNamespace

    from npu_tutorials.core.messages import _, language
    from npu_tutorials.engine import deploy
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.site.i18n import comments_in_language

    card = load_card("qwen2.5-0.5b")
    snippet = deploy.offline_code(card, "cpu", "./Qwen2.5-0.5B")
    assert f"# {deploy.SPAWN_NOTE}" in snippet
    for lang, translated in (("en", False), ("zh_CN", True)):
        app = SimpleNamespace(config=SimpleNamespace(language=lang), builder=SimpleNamespace(name="html"))
        content = [snippet]
        comments_in_language(app, "deploy.rst", "tutorials/models/qwen2_5_0_5b", content)
        with language("zh_CN"):
            zh = _(deploy.SPAWN_NOTE)
        assert (f"# {zh}" in content[0]) is translated and (deploy.SPAWN_NOTE in content[0]) is not translated
        assert content[0].replace(zh, deploy.SPAWN_NOTE) == snippet  # only the comment changed
