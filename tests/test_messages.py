"""What the code writes, in both languages: the message catalog (``npu_tutorials.core.messages``).

Every ``_()``/``N_()`` message of the package has a Chinese translation whose fields match; every view of every
recorded results document renders with no message the catalog lacks; the check says FAIL on a missing
translation, a fuzzy one and one whose fields differ.
"""

import inspect
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from npu_tutorials.core import messages  # noqa: E402
from npu_tutorials.core.errors import TutorialError  # noqa: E402
from npu_tutorials.core.messages import N_, Text, _, html, join  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted(p for p in (ROOT / "results").glob("*/*.json") if p.parent.name != "methods")


def test_every_marked_message_has_a_translation_with_the_same_fields():
    assert messages.untranslated("zh_CN") == []
    assert messages.bad_fields("zh_CN") == []
    assert messages.read_catalog(messages.catalog_path("zh_CN"))[1] == []  # no message translated two ways


def test_the_check_fails_on_a_missing_a_fuzzy_and_a_misfilled_translation(tmp_path):
    found = {"PASS": ["a.py:1"], "{n} of {total} positions": ["a.py:2"], "FAIL": ["a.py:3"]}
    (tmp_path / "part.po").write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
        'msgid "PASS"\nmsgstr "通过"\n\n'
        '#, fuzzy\nmsgid "FAIL"\nmsgstr "失败"\n\n'
        'msgid "{n} of {total} positions"\nmsgstr "{total} 个位置中的 {count} 个"\n', encoding="utf-8")
    have, clashes = messages.read_catalog(tmp_path)
    assert clashes == [] and set(have) == {"PASS", "{n} of {total} positions"}  # the fuzzy one does not count
    lines = messages.untranslated("zh_CN", found, have)
    assert len(lines) == 1 and lines[0].startswith("a.py:3: 'FAIL' has no zh_CN translation")
    assert messages.bad_fields("zh_CN", have) == [
        "'{n} of {total} positions': the zh_CN text has fields ['count', 'total'], the English ['n', 'total']"]
    (tmp_path / "other.po").write_text('msgid "PASS"\nmsgstr "合格"\n', encoding="utf-8")
    assert messages.read_catalog(tmp_path)[1] == [
        "'PASS': other.po and part.po translate it differently"]


def test_a_text_carries_both_languages_through_fields_sums_and_joins():
    over = _("{n} runs", n=3)  # a field that is a Text is filled in the same language
    t = _("{label} (median over {over})", label=_("Output token throughput"), over=over)
    assert t == "Output token throughput (median over 3 runs)" and isinstance(t, str)
    zh = t.in_("zh_CN")
    assert zh != str(t) and over.in_("zh_CN") in zh and _("Output token throughput").in_("zh_CN") in zh
    verdict = _("PASS") + " " + _("FAIL")
    assert verdict == "PASS FAIL" and verdict.in_("zh_CN") == f"{_('PASS').in_('zh_CN')} {_('FAIL').in_('zh_CN')}"
    joined = join("; ", [_("PASS"), "x", _("FAIL")])
    assert joined == "PASS; x; FAIL" and joined.in_("zh_CN").split("; ")[1] == "x"
    assert N_("anything") == "anything" and not isinstance(N_("anything"), Text)
    # HTML: one span per language where they differ, the page's stylesheet shows one; plain text once, escaped
    assert html(_("PASS")) == ('<span class="tut-l10n" lang="en">PASS</span>'
                               f'<span class="tut-l10n" lang="zh-CN">{_("PASS").in_("zh_CN")}</span>')
    assert html("a < b") == "a &lt; b" and html(Text("same", {"zh_CN": "same"})) == "same"
    css = (ROOT / "docs" / "source" / "_static" / "tutorials.css").read_text()
    assert 'html[lang|="zh"] .tut-l10n[lang="en"] { display: none; }' in css


def _render(obj) -> str:
    if hasattr(obj, "_repr_html_"):
        return obj._repr_html_()
    return repr(obj)


def _every_view(show):
    """(name, bound method) of every public view of ``show`` and its sections that takes no argument."""
    from npu_tutorials.views import Views

    sections = [("show", show)] + [(n, getattr(show, n)) for n in vars(show) if n not in ("doc", "card")
                                   and not n.startswith("_")]
    for label, obj in sections:
        for name, fn in inspect.getmembers(obj, inspect.ismethod):
            if name.startswith("_") or name in ("need", "recorded_note", "absent", "reported", "method_note",
                                                "verdict", "same_arithmetic_note", "engine_label"):
                continue
            params = [p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty]
            if not params and not (obj is show and name in vars(Views)):
                yield f"{label}.{name}", fn


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.parent.name)
def test_every_view_of_a_recorded_result_renders_with_every_message_translated(record):
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.record.results import read_doc
    from npu_tutorials.views import Views

    doc = read_doc(record)
    show = Views(doc, load_card(doc.model))
    messages.MISSED.clear()
    shown = 0
    for name, view in _every_view(show):
        try:
            out = view()
        except TutorialError:  # a section this document does not hold
            continue
        shown += 1
        if out is not None and not isinstance(out, plt.Figure):
            _render(out)
        plt.close("all")
    assert shown > 10
    assert sorted(messages.MISSED) == []


def test_a_table_shows_each_language_on_its_own_page():
    from npu_tutorials.core.tables import Verdict

    page = Verdict([("top-1 agreement", "99 %", ">= 90 %", True)])._repr_html_()
    zh = _("PASS").in_("zh_CN")
    assert f'<span class="tut-l10n" lang="zh-CN">{zh}</span>' in page
    assert '<span class="tut-l10n" lang="en">PASS</span>' in page
    assert json.dumps(zh) != json.dumps("PASS")


def test_a_recorded_weights_label_reads_in_both_languages_and_stays_the_recorded_one():
    from npu_tutorials.inputs.weights import shown_label, weights_label
    from npu_tutorials.record.schema import WeightsInfo

    label = weights_label("stand-in", seed=42, sha256="9ae0b78884bd" + "0" * 52)
    info = WeightsInfo(kind="stand-in", source="stand-in", label=str(label), seed=42, sha256="9ae0b78884bd" + "0" * 52)
    shown = shown_label(info)
    assert shown == info.label and "9ae0b78884bd" in shown.in_("zh_CN") and shown.in_("zh_CN") != str(shown)
    # a label these fields do not give (an older wording, a local folder): the recorded words, as they are
    old = info.model_copy(update={"label": "stand-in weights, seed 42"})
    assert shown_label(old) == "stand-in weights, seed 42" and not hasattr(shown_label(old), "tr")
    real = WeightsInfo(kind="real", source="modelscope", label="real weights: Qwen/Qwen2.5-0.5B@master (from modelscope)",
                       hub_id="Qwen/Qwen2.5-0.5B", revision="master")
    assert shown_label(real) == real.label and "真实权重" in shown_label(real).in_("zh_CN")


def test_a_stored_sentence_is_read_back_into_its_message():
    from npu_tutorials.core.messages import reread
    from npu_tutorials.engine import commands as C

    stored = C.ACCURACY_ENGINE.format(want="bfloat16", dtype="float32")  # as the build stores it, in English
    shown = reread(stored, C.BUILD_CHANGES)
    assert shown == stored and "bfloat16" in shown.in_("zh_CN") and shown.in_("zh_CN") != stored
    assert reread(C.CPU_MAX_LEN.format(max_len=8192), C.BUILD_CHANGES).in_("zh_CN").count("8192") == 1
    # a field repeated in its template must read back the same both times; a sentence of no template: as it is
    odd = "the engine-vs-reference checks ran on a bfloat16 engine started for them (the same command with " \
          "--dtype float16); the performance figures come from the float32 engine"
    assert reread(odd, C.BUILD_CHANGES) == odd and not hasattr(reread(odd, C.BUILD_CHANGES), "tr")
