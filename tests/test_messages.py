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
from npu_tutorials.core.messages import N_, _, html, language, listed, sentences  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted(p for p in (ROOT / "results").glob("*/*.json") if p.parent.name != "methods")


def test_every_marked_message_has_a_translation_with_the_same_fields():
    assert messages.untranslated("zh_CN") == []
    assert messages.bad_fields("zh_CN") == []
    assert messages.read_catalog(messages.catalog_path("zh_CN"))[1] == []  # no message translated two ways


def test_every_knobs_reason_a_card_gives_is_translated_and_the_page_shows_it(monkeypatch):
    """The cards' knob reasons reach the tuning section's knob table through the catalog (issue 55: no English
    sentence on a Chinese page); scripts/check_translations.py names a reason left without one."""
    from npu_tutorials.inputs import cards
    from npu_tutorials.record.results import read_doc
    from npu_tutorials.views import Views

    texts = cards.catalog_texts()
    assert len(texts) >= 14 and messages.untranslated("zh_CN", texts) == []
    card = cards.load_card("palmyra-mini")
    why = card.tuning.knobs[0].why  # a CPU knob's: this build's backend
    for path in RECORDS:
        if path.parent.name == "palmyra-mini":
            with language("zh_CN"):
                table = Views(read_doc(path), card).tuning.tuning_knobs_table()
            assert why not in repr(table) and messages.catalog("zh_CN")[why] in repr(table), path.name
    monkeypatch.setitem(texts, "a reason nobody translated", ["cards/x.yaml: tuning knob 'y'"])
    (line,) = messages.untranslated("zh_CN", texts)
    assert line.startswith("cards/x.yaml: tuning knob 'y': 'a reason nobody translated' has no zh_CN translation")


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


def test_a_message_answers_in_the_language_being_rendered():
    over = _("{n} runs", n=3)
    t = _("{label} (median over {over})", label=_("Output token throughput"), over=over)
    assert t == "Output token throughput (median over 3 runs)" and type(t) is str
    with language("zh_CN"):
        zh_over = _("{n} runs", n=3)
        zh = _("{label} (median over {over})", label=_("Output token throughput"), over=zh_over)
        assert zh != t and zh_over in zh and _("Output token throughput") in zh
        assert listed(["a", "b"]) == "a、b" and sentences(["一。", "二。"]) == "一。二。"
    assert _("PASS") == "PASS" and listed(["a", "b"]) == "a, b" and sentences(["One.", "Two."]) == "One. Two."
    assert N_("anything") == "anything"
    with pytest.raises(ValueError, match="no language"):
        with language("fr"):
            pass
    # HTML is escaped text, one language: no per-language spans, no stylesheet toggle
    assert html("a < b") == "a &lt; b"
    css = (ROOT / "docs" / "source" / "_static" / "tutorials.css").read_text()
    assert "tut-l10n" not in css


def test_a_message_some_catalog_lacks_is_missed_in_every_language():
    messages.MISSED.clear()
    _("a sentence no catalog has")
    assert "a sentence no catalog has" in messages.MISSED
    messages.MISSED.clear()


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


def test_a_table_shows_the_language_it_is_drawn_in():
    from npu_tutorials.core.tables import Verdict

    table = Verdict([("top-1 agreement", "99 %", ">= 90 %", True)])
    with language("zh_CN"):
        zh_pass = _("PASS")
        zh = table._repr_html_()
    assert zh_pass != "PASS" and f"<td>{zh_pass}</td>" in zh and "<td>PASS</td>" not in zh
    assert "<td>PASS</td>" in table._repr_html_()


def test_a_recorded_weights_label_reads_in_both_languages_and_stays_the_recorded_one():
    from npu_tutorials.inputs.weights import shown_label, weights_label
    from npu_tutorials.record.schema import WeightsInfo

    label = weights_label("stand-in", seed=42, sha256="9ae0b78884bd" + "0" * 52)
    info = WeightsInfo(kind="stand-in", source="stand-in", label=str(label), seed=42, sha256="9ae0b78884bd" + "0" * 52)
    shown = shown_label(info)
    with language("zh_CN"):
        zh = shown_label(info)
    assert shown == info.label and "9ae0b78884bd" in zh and zh != shown
    # a label these fields do not give (an older wording, a local folder): the recorded words, as they are
    old = info.model_copy(update={"label": "stand-in weights, seed 42"})
    with language("zh_CN"):
        assert shown_label(old) == "stand-in weights, seed 42"
    real = WeightsInfo(kind="real", source="modelscope", label="real weights: Qwen/Qwen2.5-0.5B@master (from modelscope)",
                       hub_id="Qwen/Qwen2.5-0.5B", revision="master")
    with language("zh_CN"):
        zh = shown_label(real)
    assert shown_label(real) == real.label and "真实权重" in zh


def test_a_stored_sentence_is_its_message_and_shows_in_each_language():
    from npu_tutorials.engine import platform as C
    from npu_tutorials.record.schema import Conditions
    from npu_tutorials.record.schema_base import Message

    m = Message.of(C.ACCURACY_ENGINE, want="bfloat16", dtype="float32")  # as the build stores it
    assert str(m) == C.ACCURACY_ENGINE.format(want="bfloat16", dtype="float32") == m.shown()
    with language("zh_CN"):
        zh = m.shown()
    assert "bfloat16" in zh and zh != str(m)
    stored = Conditions(profile="quick", dtype="float32", eager=True, build_changes=[m]).model_dump(mode="json")
    assert stored["build_changes"] == [{"msgid": C.ACCURACY_ENGINE, "fields": {"want": "bfloat16", "dtype": "float32"}}]
    with language("zh_CN"):
        assert Message.of(C.CPU_MAX_LEN, max_len=8192).shown().count("8192") == 1
        # a plain sentence (a document written before messages were stored): shown as it is
        old = Conditions.model_validate({**stored, "build_changes": ["an older sentence"]}).build_changes[0]
        assert old.shown() == "an older sentence"
