"""What a gallery script's ``show.…()`` leaves on its page: a reference to a view, drawn later from the document.

A tutorial executes once and stores what it measured in its results document.  Where a cell shows a table or
a plot (``show.serving.bench_table()``), the executed page keeps a *reference* to that view, by model, view
name and arguments, and each language's Sphinx pass draws the view from the results document as it was
written at the end of the run (:mod:`npu_tutorials.site.render`).  So a view, a message or a translation can
change without executing any tutorial, and both languages come from one document.

The cell still draws the view once, in English, while it executes: a view whose section is missing fails the
tutorial at that cell, with its one clear line, and a terminal (``print(show.provenance())``) shows the text.
"""

from __future__ import annotations

import html
import json
from typing import Any

from ..core.errors import TutorialError

MARK = "tut-view"  # the class of the placeholder an executed page holds until it is rendered


def placeholder(model: str, view: str, args: list, kwargs: dict, doc: str = "") -> str:
    """The HTML an executed page holds for one view (what :mod:`npu_tutorials.site.render` replaces).  ``doc``:
    a recorded document to draw it from (``<model>/<file>.json`` under ``results/``), for a page this build
    did not execute (:mod:`npu_tutorials.site.recorded_page`); by default this build's document."""
    fields = {"model": model, "view": view, "args": args, "kwargs": kwargs}
    if doc:
        fields["doc"] = doc
    ref = json.dumps(fields, sort_keys=True, ensure_ascii=True)
    return f'<div class="{MARK}" data-tut-view="{html.escape(ref, quote=True)}"></div>'


def parse(attribute: str) -> dict[str, Any]:
    """The reference a placeholder's ``data-tut-view`` attribute holds."""
    ref = json.loads(html.unescape(attribute))
    if not isinstance(ref, dict) or not {"model", "view"} <= set(ref):
        raise TutorialError(f"not a view reference: {attribute[:80]!r}")
    return ref


def _walk(views, name: str):
    obj = views
    for part in name.split("."):
        if part.startswith("_") or not hasattr(obj, part):
            raise TutorialError(f"no view {name!r} (show.{name}): see npu_tutorials.views for the views there are")
        obj = getattr(obj, part)
    return obj


def resolve(views, name: str):
    """The view ``name`` (``"environment"``, ``"serving.bench_table"``) of a :class:`~npu_tutorials.views.Views`."""
    obj = _walk(views, name)
    if not callable(obj):
        raise TutorialError(f"show.{name} is not a view")
    return obj


def close_figure(value: Any) -> None:
    """A figure drawn only to check that its view draws: closed, so that no scraper takes it."""
    if hasattr(value, "savefig"):
        import matplotlib.pyplot as plt

        plt.close(value)


class ViewRef:
    """A view shown by an executing cell: the placeholder in the gallery's HTML, the English text on a
    terminal; the drawn value's attributes read through (``ref.rows``)."""

    def __init__(self, model: str, view: str, args: list, kwargs: dict, value: Any):
        self.model, self.view, self.args, self.kwargs, self.value = model, view, args, kwargs, value

    def _repr_html_(self) -> str:
        return placeholder(self.model, self.view, self.args, self.kwargs)

    def __repr__(self) -> str:
        if hasattr(self.value, "savefig"):
            return f"<figure: show.{self.view}>"
        return repr(self.value)

    __str__ = __repr__

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["value"], name)


class Show:
    """``tut.show``: every view of the tutorial's live document, by the name a page uses."""

    def __init__(self, views, model: str, path: str = ""):
        self._views, self._model, self._path = views, model, path

    def __getattr__(self, name: str) -> "Show":
        if name.startswith("_"):
            raise AttributeError(name)
        path = f"{self._path}.{name}" if self._path else name
        _walk(self._views, path)  # an unknown name fails here, with one clear line
        return Show(self._views, self._model, path)

    def __call__(self, *args, **kwargs) -> ViewRef:
        for value in (*args, *kwargs.values()):
            try:
                json.dumps(value)
            except TypeError:
                raise TutorialError(f"show.{self._path}: a view's arguments must be plain values (numbers, "
                                    f"strings), so the page can draw it again from the document; got "
                                    f"{type(value).__name__}") from None
        value = resolve(self._views, self._path)(*args, **kwargs)
        close_figure(value)
        return ViewRef(self._model, self._path, list(args), dict(kwargs), value)
