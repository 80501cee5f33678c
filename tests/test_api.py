"""What a gallery author calls is documented: the facade's steps and every public view have a docstring,
and the contributing page lists them."""

import inspect
from pathlib import Path

from npu_tutorials.tutorial import Tutorial
from npu_tutorials.views import Views

ROOT = Path(__file__).resolve().parents[1]


def _classes():
    import npu_tutorials.views as views
    from npu_tutorials.tutorial import facade, records, state, steps_accuracy, steps_performance, steps_serving
    from npu_tutorials.tutorial import steps_tuning, steps_weights

    return ([getattr(views, n) for n in views.__all__] + [facade.Tutorial, state.TutorialState,
            steps_weights.WeightsSteps, steps_serving.ServingSteps, steps_accuracy.AccuracySteps,
            steps_performance.PerformanceSteps, steps_tuning.TuningSteps, records.RecordSteps])


def test_every_public_view_has_a_docstring():
    import npu_tutorials.views as views

    missing = [f"{c}.{n}" for c in views.__all__ for n, f in inspect.getmembers(getattr(views, c), inspect.isfunction)
               if not n.startswith("_") and not (f.__doc__ or "").strip()]
    assert missing == []


def test_every_public_method_of_the_facade_its_steps_and_state_is_documented():
    missing = [f"{c.__name__}.{n}" for c in _classes() for n, f in inspect.getmembers(c, inspect.isfunction)
               if not n.startswith("_") and not (f.__doc__ or "").strip()]
    assert missing == []


def test_no_class_a_gallery_author_meets_has_over_25_methods():
    """Methods and properties, inherited ones included: a class is read whole."""
    for cls in _classes():
        names = {n for k in cls.__mro__ if k is not object for n, v in vars(k).items()
                 if inspect.isfunction(v) or isinstance(v, property)}
        assert len(names) <= 25, (cls.__name__, len(names), sorted(names))


def test_every_view_section_is_an_attribute_of_show():
    """``show.<section>`` holds each section's views; every views class is reachable from ``show``."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from docs import make_doc

    from npu_tutorials.inputs.cards import load_card

    show = Views(make_doc(), load_card("qwen2.5-0.5b"))
    import npu_tutorials.views as views

    reached = {type(show)} | {type(v) for v in vars(show).values() if isinstance(v, views.base.BaseViews)}
    assert reached == {getattr(views, n) for n in views.__all__} - {views.BuildViews, views.Show, views.ViewRef} | {Views}


def test_the_facade_steps_the_contributing_page_lists_exist_and_are_documented():
    page = (ROOT / "docs" / "source" / "contributing.md").read_text()
    listed = page.split(":members:", 1)[1].split("\n\n", 1)[0].replace("\n", " ")
    names = [n.strip() for n in listed.split(",") if n.strip()]
    assert len(names) > 10
    for n in names:
        assert (getattr(Tutorial, n).__doc__ or "").strip(), n
    assert "tutorial_template.py" in page and (ROOT / "docs" / "source" / "tutorial_template.py").is_file()


def test_the_template_is_a_tutorial_the_build_recognises(tmp_path):
    """Copied verbatim into a gallery, the contributing guide's template is found as its card's tutorial, and it
    has what the site check wants of a page: tables, a figure, the deploy section."""
    import shutil

    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.inputs.gallery_index import tutorials

    src = ROOT / "docs" / "source" / "tutorial_template.py"
    shutil.copy(src, tmp_path / "my_model.py")
    found = tutorials(tmp_path)
    assert list(found) == ["my_model"] and load_card(found["my_model"])
    text = src.read_text()
    assert "show.serving.bench_plot()" in text and f".. include:: /_generated/{found['my_model']}/deploy.rst" in text
    assert text.count("show.") >= 5
