"""Sections a quick build leaves to the full profile (tuning, the transformers baseline) are shown as a
recorded build measured them, with that build's provenance, or the page says none holds them."""

import copy

import pytest

from npu_tutorials.inputs.cards import load_card
from npu_tutorials.record.results import ROOT, read_doc, section_from_records
from npu_tutorials.views import Views

RECORD = ROOT / "results" / "palmyra-mini" / "cpu-amd-epyc-2c-bf16.json"
WHY = "the quick profile leaves tuning to the full one (TUTORIAL_PROFILE=full)"


@pytest.fixture
def rec():
    return read_doc(RECORD)


def _this_build(rec, **prov):
    """A build of the same page that has not measured tuning or the baseline (yet)."""
    doc = rec.model_copy(deep=True)
    doc.results.tuning = None
    doc.results.efficiency.baselines = []
    doc.provenance.built_at = "2030-01-01T00:00:00+00:00"
    doc.provenance.git_commit = "f" * 40
    for k, v in prov.items():
        setattr(doc.provenance, k, v)
    return doc


def test_the_record_that_measured_it_is_named(rec):
    doc = _this_build(rec)
    value, origin = section_from_records(doc, "tuning", [rec], WHY)
    assert value == rec.results.tuning
    assert origin.file == "results/palmyra-mini/cpu-amd-epyc-2c-bf16.json"
    assert (origin.built_at, origin.git_commit, origin.profile) == (rec.provenance.built_at, rec.provenance.git_commit,
                                                                    rec.provenance.profile)
    assert origin.slug == rec.provenance.machine.slug and origin.why == WHY
    base, o2 = section_from_records(doc, "transformers_baseline", [rec], WHY)
    assert base == rec.results.efficiency.baselines and o2.file == origin.file


def test_a_copy_passes_on_the_build_that_measured_it(rec):
    doc = _this_build(rec)
    value, origin = section_from_records(doc, "tuning", [rec], WHY)
    copied = _this_build(rec)  # a quick build recorded with the copied section
    copied.results.tuning, copied.results.from_records["tuning"] = value, origin
    copied.provenance.built_at = "2029-01-01T00:00:00+00:00"
    _, again = section_from_records(doc, "tuning", [copied], WHY)
    assert again.built_at == rec.provenance.built_at and again.git_commit == rec.provenance.git_commit


@pytest.mark.parametrize("change", ["backend", "dtype", "seed", "real"])
def test_a_record_of_other_conditions_does_not_fit(rec, change):
    doc = _this_build(rec)
    if change == "backend":
        doc.provenance.backend = "npu"
    elif change == "dtype":
        doc.provenance.engine_dtype = "float32"
    elif change == "seed":
        doc.provenance.weights.seed = 7
    else:
        doc.provenance.weights.kind = "real"
    assert section_from_records(doc, "tuning", [rec], WHY) == (None, None)


def test_the_same_machine_kind_wins_over_a_newer_record(rec):
    doc = _this_build(rec)
    other = copy.deepcopy(rec)
    other.provenance.machine.cpu_model = "Intel Xeon"
    other.provenance.built_at = "2029-06-01T00:00:00+00:00"
    _, origin = section_from_records(doc, "tuning", [other, rec], WHY)
    assert origin.slug == rec.provenance.machine.slug
    _, origin = section_from_records(doc, "tuning", [other], WHY)  # no same-kind record: the newest that fits
    assert origin.slug == other.provenance.machine.slug


def test_the_page_says_where_a_recorded_section_came_from(rec):
    card = load_card("palmyra-mini")
    doc = _this_build(rec)
    doc.results.tuning, doc.results.from_records["tuning"] = section_from_records(doc, "tuning", [rec], WHY)
    base, origin = section_from_records(doc, "transformers_baseline", [rec], WHY)
    doc.results.efficiency.baselines, doc.results.from_records["transformers_baseline"] = base, origin
    show = Views(doc, card)
    t = show.tuning.tuning_table()
    assert "recorded by an earlier build" in t.caption and "Not measured in this build" in t.note
    assert origin.file in t.note and rec.provenance.git_commit[:10] in t.note
    assert show.tuning.tuned_command().text.startswith(f"# the best configuration as {origin.file} recorded it")
    e = show.performance.efficiency_table()
    assert "in the recording build" in e.note and origin.file in e.note
    # this build's own sections say nothing of the kind
    assert "recorded it in" not in Views(rec, card).tuning.tuning_table().note


def test_with_no_record_the_page_says_so_instead_of_a_table(rec):
    card = load_card("palmyra-mini")
    doc = _this_build(rec)
    doc.results.not_measured["tuning"] = WHY + "; no build recorded it"
    show = Views(doc, card)
    for view in (show.tuning.tuning_table, show.tuning.tuning_plot):
        assert "Not measured in this build" in repr(view())
    assert show.tuning.tuned_command().text.startswith("# Not measured")
    # the knobs are the card's facts: listed even so, each marked unmeasured
    knobs = show.tuning.tuning_knobs_table()
    assert "Not measured in this build" in knobs.note
    assert [r[0] for r in knobs.rows] == [k.name for k in card.tuning.knobs if "cpu" in k.backends]
    assert all(r[-1].startswith("no") for r in knobs.rows)


def test_only_the_named_sections_can_come_from_a_record(rec):
    """A document whose ``from_records`` or ``not_measured`` names another section fails when it loads."""
    from pydantic import ValidationError

    from npu_tutorials.record.schema import ResultsDoc

    data = rec.dump()
    data["results"]["not_measured"] = {"tunning": "a typo"}
    with pytest.raises(ValidationError, match="tuning"):
        ResultsDoc.model_validate(data)


@pytest.mark.parametrize("stem", ["palmyra_mini", "qwen2_5_0_5b", "qwen3_0_6b", "qwen_1_8b_chat"])
def test_an_unexecuted_page_shows_its_recorded_results_as_tables(stem):
    """The section an unexecuted page gets (site.banners.recorded_rst): the newest recorded run beside the
    others, and the headline views of its sections (each model's records hold at least two of them)."""
    from npu_tutorials.site.banners import recorded_rst

    rst = recorded_rst(stem)
    assert rst.startswith("Recorded results\n") and ".. raw:: html" in rst
    assert rst.count("<table") >= 3, rst[:400]
