"""The methods page's prose quotes the recorded paired comparisons through the ``fact`` role
(:mod:`npu_tutorials.site.paired_facts`): each figure computed from its record, none typed by hand.  Here:
the role's arithmetic on records whose answers are known (a slowdown called, an unchanged pair not), the sums over
several records, its one-line errors, and every role of the page (English and Chinese) computable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from docs import machine
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.measure import paired
from npu_tutorials.record.headline import METRICS
from npu_tutorials.record.results import write_record
from npu_tutorials.record.schema_paired import Comparison, Side
from npu_tutorials.site import paired_facts
from npu_tutorials.site.paired_facts import fact

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "docs" / "source" / "methods.md"
METHODS_ZH = ROOT / "docs" / "source" / "locale" / "zh_CN" / "LC_MESSAGES" / "methods.po"
ROLE = re.compile(r"\{fact\}`([^`]*)`")


def _rounds(ratios: list[float], control: list[float] | None = None) -> dict:
    """Side A's rounds on a drifting host, B's with the given TPOT ratios, throughput and TTFT unchanged."""
    a = [{"median_tpot_ms": 40.0 * (1 + 0.1 * i), "median_ttft_ms": 200.0, "output_throughput": 100.0}
         for i in range(len(ratios))]
    b = [{**r, "median_tpot_ms": r["median_tpot_ms"] * x} for r, x in zip(a, ratios)]
    c = [{**r, "median_tpot_ms": r["median_tpot_ms"] * x} for r, x in zip(a, control or [])]
    return {"rounds_a": a, "rounds_b": b, "rounds_c": c}


def _record(d: Path, stem: str, ratios: list[float], control: list[float] | None = None) -> None:
    r = _rounds(ratios, control)
    doc = Comparison(model="smollm2-135m-instruct", built_at="2026-12-04T12:00:00+00:00", machine=machine(),
                     profile="quick", steps=["benchmark"], servers="fresh", a=Side(label="A"),
                     b=Side(label="B", flags=["--max-num-batched-tokens", "448"]),
                     order=paired.order_of(len(ratios), "ABC" if control else "AB"),
                     ratios=paired.paired_ratios(r["rounds_a"], r["rounds_b"], METRICS), **r)
    write_record(doc.model_dump(mode="json"), d / "methods" / f"paired-{stem}.json")


@pytest.fixture
def records(tmp_path, monkeypatch):
    monkeypatch.setattr(paired_facts, "RECORDS", tmp_path / "methods")
    paired_facts._load.cache_clear()
    # 12 rounds 10 % slower, but round 3 of the first block has B faster: the first block of 6 cannot call it
    _record(tmp_path, "slow", [1.10, 1.12, 0.98, 1.09, 1.11, 1.10, 1.08, 1.10, 1.11, 1.12, 1.09, 1.10],
            control=[1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 0.99, 1.01, 1.00, 1.02, 0.99, 1.00])
    _record(tmp_path, "same", [1.01, 0.99, 1.00, 1.02, 0.98, 1.00])
    yield tmp_path
    paired_facts._load.cache_clear()


def test_a_slowdown_is_quoted_as_the_record_has_it(records):
    assert fact("slow tpot rounds") == "12"
    assert fact("slow tpot change") == "+10.0 %"  # the median of the 12 ratios
    assert fact("slow tpot median") == "1.100"
    assert fact("paired-slow tpot median") == "1.100"  # the stem's prefix may be written
    low, high = fact("slow tpot interval").split(" – ")
    assert float(low) > 1.0 and float(high) < 1.13
    assert fact("slow tpot spread") == "12.0 %"  # the furthest round from 1: 1.12
    # blocks of 6: the first holds the 0.98 round, so its interval covers 1; the second calls B worse
    assert (fact("slow tpot calls 6"), fact("slow tpot blocks 6")) == ("1", "2")
    assert (fact("slow tpot calls 12"), fact("slow tpot blocks 12")) == ("1", "1")
    assert fact("slow throughput change") == "+0.0 %" and fact("slow throughput calls 6") == "0"


def test_an_unchanged_pair_and_a_control_call_nothing_and_counts_add_up_over_records(records):
    assert fact("same any calls 6") == "0" and fact("same any blocks 6") == "1"
    assert fact("slow@control tpot median") == "1.000"
    assert fact("slow@control any calls 6") == "0" and fact("slow@control any blocks 6") == "2"
    assert fact("slow@control+same any blocks 6") == "3"
    assert fact("slow+same tpot calls 6") == "1"  # the slowdown's one called block; the unchanged pair's none
    assert fact("slow+slow tpot rounds") == "24"
    assert fact("slow tpot width 6").endswith(" %")


@pytest.mark.parametrize("target, message", [
    ("nowhere tpot change", "no recorded comparison paired-nowhere.json"),
    ("same@control tpot median", "has no control rounds"),
    ("slow speed change", "unknown figure 'speed'"),
    ("slow tpot mean", "the quantity one of"),
    ("slow tpot calls", "calls needs the block size"),
    ("slow tpot calls six", "is not a whole number"),
    ("slow any median", "'any' counts blocks"),
    ("slow+same tpot median", "only rounds, calls, blocks add up"),
    ("same tpot width 10", "the record has 6 rounds, fewer than one block of 10"),
    ("slow any width 6", "'any' counts blocks"),
])
def test_a_target_that_cannot_be_computed_says_why_in_one_line(records, target, message):
    with pytest.raises(TutorialError, match=re.escape(message)) as err:
        fact(target)
    assert "\n" not in str(err.value)


def test_every_fact_of_the_methods_page_is_computable_in_both_languages():
    english = ROLE.findall(METHODS.read_text())
    assert len(english) >= 20, "the methods page quotes its recorded comparisons through the fact role"
    for target in english:
        fact(target)  # raises with one line where a record or quantity is missing
    with METHODS_ZH.open("rb") as f:
        catalog = read_po(f)
    for msg in catalog:
        if msg.id and msg.string and not msg.fuzzy:
            # a translation quotes exactly the figures its source sentence quotes, and none typed instead
            assert sorted(ROLE.findall(msg.string)) == sorted(ROLE.findall(msg.id)), msg.id[:80]


def test_a_page_renders_the_role_and_a_missing_record_is_caught_by_make_check(records, tmp_path):
    """Sphinx with MyST, as the site builds: the role's text reaches the HTML; a role naming no record leaves
    docutils' problematic markup, which the site check reports with the page's name."""
    from sphinx.application import Sphinx

    from npu_tutorials.checks.site_check import markup_problems

    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "conf.py").write_text(
        "from npu_tutorials.site.paired_facts import fact_role\n"
        "extensions = ['myst_parser']\n"
        "def setup(app):\n    app.add_role('fact', fact_role)\n")
    (src / "index.md").write_text("# Methods\n\nTPOT changed by {fact}`slow tpot change` "
                                  "({fact}`slow tpot calls 6` of {fact}`slow tpot blocks 6` blocks).\n")
    app = Sphinx(str(src), str(src), str(build / "html"), str(build / "doctrees"), "html", status=None,
                 warning=None, freshenv=True)
    app.build()
    page = (build / "html" / "index.html").read_text()
    assert "TPOT changed by +10.0 % (1 of 2 blocks)." in page
    assert markup_problems(build) == []

    (src / "index.md").write_text("# Methods\n\nTPOT changed by {fact}`gone tpot change`.\n")
    app = Sphinx(str(src), str(src), str(build / "html"), str(build / "doctrees"), "html", status=None,
                 warning=None, freshenv=True)
    app.build()
    [line] = markup_problems(build)
    assert line.startswith("index.html: shows markup the build could not resolve (") and "`gone tpot change`" in line


def test_a_comparison_that_stopped_early_says_so_under_its_record_in_both_languages(tmp_path, monkeypatch):
    """A record with ``stopped`` (the rounds done before a run ended: the Qwen2.5 record, cut short by an OOM)
    is drawn with its reason, so a reader knows its rounds are fewer than asked."""
    from npu_tutorials.site.paired_page import paired_markdown

    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path))
    _record(tmp_path, "cut", [1.10, 1.12, 1.09, 1.11, 1.10, 1.08])
    path = tmp_path / "methods" / "paired-cut.json"
    doc = Comparison.model_validate_json(path.read_text())
    write_record({**doc.model_dump(mode="json"), "stopped": "after round 6 of 30: out of memory"}, path)
    english = paired_markdown("en", tmp_path / "images")
    assert 'It stopped before the rounds it was asked for; the record says why: "after round 6 of 30: out of memory"' \
        in english
    # its table and its forest plot each with their CSV (the plot's: every round's ratio) and the record's identifier
    from npu_tutorials.record.results import document_id
    assert english.count("Download as CSV") == 2 and english.count(document_id(path)) >= 2
    (forest,) = [f for f in (tmp_path / "_data").iterdir() if "table" not in f.name]
    assert len(forest.read_text().splitlines()) == 1 + 6 * 3  # a header, 6 rounds of each of the 3 figures
    assert "它在完成所要求的轮数之前就停止了" in paired_markdown("zh_CN", tmp_path / "images")
    write_record({**doc.model_dump(mode="json")}, path)  # a complete run: no such line
    assert "It stopped before" not in paired_markdown("en", tmp_path / "images")
