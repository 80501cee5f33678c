"""The pages' generated blocks (site.pages): one mechanism, a ```{generated} NAME``` fence expanded when Sphinx
reads the page; an unknown name, or a fence left unexpanded, fails the build in one line; no page carries an
HTML-comment marker any more, which a missed replacement left as a silent comment."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ExtensionError

from npu_tutorials.site import pages

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "source").glob("*.md"))


def app(tmp_path: Path, builder: str = "html", lang: str = "en"):
    """What fill_landing reads of Sphinx's application (sphinx.application.Sphinx: builder.name, outdir,
    config.language)."""
    return SimpleNamespace(builder=SimpleNamespace(name=builder), outdir=str(tmp_path),
                           config=SimpleNamespace(language=lang))


def used() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in PAGES:
        for name in pages.BLOCK.findall(p.read_text()):
            out.setdefault(name, []).append(p.name)
    return out


def test_every_block_a_page_names_exists_and_every_block_is_on_a_page():
    assert set(used()) == set(pages.BLOCKS)
    assert all(len(v) == 1 for v in used().values()), used()  # each block placed once


def test_no_page_carries_a_comment_marker_and_no_site_module_replaces_one():
    for p in PAGES:
        assert not re.search(r"^<!-- [a-z-]+ -->$", p.read_text(), re.M), p.name
    for m in (ROOT / "src" / "npu_tutorials" / "site").glob("*.py"):
        assert not re.search(r"replace\([^)]*<!--", m.read_text()), m.name


def test_a_block_is_expanded_where_the_page_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(pages, "negative_controls_markdown", lambda: "| a | b |\n|---|---|\n| 1 | 2 |")
    source = ["# Methods\n\nbefore\n\n```{generated} negative-controls\n```\n\nafter\n"]
    pages.fill_landing(app(tmp_path), "methods", source)
    assert source[0] == "# Methods\n\nbefore\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n"


def test_an_unknown_block_fails_the_build_in_one_line_naming_it(tmp_path):
    source = ["# Methods\n\n```{generated} negativ-controls\n```\n"]
    with pytest.raises(ExtensionError) as exc:
        pages.fill_landing(app(tmp_path), "methods", source)
    assert "methods: no generated block 'negativ-controls'" in str(exc.value) and "\n" not in str(exc.value)


def test_the_catalogs_get_no_block_and_an_unexpanded_one_is_an_error(tmp_path):
    source = ["```{generated} paired\n```\n"]
    pages.fill_landing(app(tmp_path, builder="gettext"), "methods", source)
    assert source == ["```{generated} paired\n```\n"]  # what a build measures is no message

    def run(builder: str):
        d = pages.Generated.__new__(pages.Generated)
        d.arguments = ["paired"]
        d.state = SimpleNamespace(document=SimpleNamespace(settings=SimpleNamespace(
            env=SimpleNamespace(app=app(tmp_path, builder), docname="methods"))))
        return d.run()

    assert run("gettext") == []
    with pytest.raises(ExtensionError, match="methods: the generated block 'paired' was not expanded"):
        run("html")
