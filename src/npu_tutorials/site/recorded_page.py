"""A tutorial page this build did not execute, drawn from a run recorded elsewhere.

A card may leave its tutorial out of a default CPU build (``requires.cpu_by_default: false``: a model too large
for the CI's budget), and a shard or a ``TUTORIAL_ONLY`` build leaves others out.  sphinx-gallery then writes the
page's code without output.  Where a recorded document fits (:func:`npu_tutorials.record.results.page_record`:
the same model, recorded with the card as it is now), :func:`draw_from_record` puts, after each cell, the view
that cell shows when it executes, as a reference to that document (:mod:`npu_tutorials.views.refs`), and a
banner under the title says where, when, at which commit and on which weights it was measured, and that this
build executed nothing for it.  Each language's pass then draws the views (:mod:`npu_tutorials.site.render`),
so the page reads like an executed one, drawn by the same views.

Which view a cell shows is read from the cell's code the way sphinx-gallery captures it: the value of its last
statement, when that is ``show.<view>(...)`` with plain arguments (or ``print(show.<view>(...))``).
"""

from __future__ import annotations

import ast
import re
import textwrap

from ..core.messages import _, in_lang
from ..views.refs import placeholder

RECORD_MARK = "tut-from-record"  # the class of the banner of a page drawn from a recorded document
SHOW_NAMES = ("show",)  # what a gallery script binds ``tut.show`` to
GENERATED = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES \d+-\d+[ \t]*\n", re.M)
CODE = re.compile(r"\A\s*\.\. code-block:: [A-Za-z]+[ \t]*\n")
OUTPUT = """
.. raw:: html

    <div class="output_subarea output_html rendered_html output_result">
    {placeholder}
    </div>
    <br />
    <br />

"""


def _view_path(node: ast.AST) -> str | None:
    """``show.serving.bench_table`` -> ``"serving.bench_table"``; ``tut.show.x`` too; None otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.reverse()
    if isinstance(node, ast.Name) and node.id in SHOW_NAMES and parts:
        return ".".join(parts)
    if isinstance(node, ast.Name) and parts[:1] == ["show"] and len(parts) > 1:
        return ".".join(parts[1:])
    return None


def shown_view(code: str) -> tuple[str, list, dict] | None:
    """The view a cell's ``code`` shows when it executes: its last statement, when that is a ``show`` call with
    literal arguments, as (view name, args, kwargs); None for a cell that shows none."""
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    if not body or not isinstance(body[-1], ast.Expr) or not isinstance(body[-1].value, ast.Call):
        return None
    call = body[-1].value
    if isinstance(call.func, ast.Name) and call.func.id == "print" and len(call.args) == 1 \
            and isinstance(call.args[0], ast.Call):  # print(show.x()): the view's text, as the cell printed it
        call = call.args[0]
    view = _view_path(call.func)
    if view is None:
        return None
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError:
        return None
    return view, args, kwargs


def _code_block(chunk: str) -> tuple[str, int] | None:
    """(the code, the offset where the block ends) of a code block that opens ``chunk``; None otherwise."""
    m = CODE.match(chunk)
    if not m:
        return None
    lines = chunk[m.end():].splitlines(keepends=True)
    end, code = m.end(), []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            break
        code.append(line)
        end += len(line)
    return textwrap.dedent("".join(code)), end


def draw_from_record(text: str, model: str, record: str) -> str:
    """An unexecuted sphinx-gallery page ``text`` with, after each cell that shows a view, that view as a
    reference to the recorded document ``record`` (``<model>/<file>.json`` under ``results/``)."""
    marks = list(GENERATED.finditer(text))
    out, last = [], 0
    for i, m in enumerate(marks):
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        block = _code_block(text[m.end():stop])
        if block is None:
            continue
        code, end = block
        shown = shown_view(code)
        if shown is None:
            continue
        at = m.end() + end
        out += [text[last:at], OUTPUT.format(placeholder=placeholder(model, *shown, doc=record))]
        last = at
    return "".join(out) + text[last:]


RECORD_BANNER = """
.. admonition:: {title}
   :class: note {mark}

   {body}

"""


@in_lang
def record_banner(doc, record: str, why: str, stem: str, lang: str | None = None) -> str:
    """The banner of a page drawn from the recorded document ``doc`` (``record``: its path under ``results/``);
    when, at which commit, with which engine and on which weights it was measured, the block above it says
    (:func:`npu_tutorials.site.freshness.freshness_block`)."""
    p = doc.provenance
    body = _("This build executed nothing for this page ({why}). Every table and figure below is drawn from the "
             "run recorded in ``results/{record}`` ({device}; {backend}, {dtype}, {profile} profile). Where the "
             "page says 'this build', it means that run. To measure it again, run ``make html "
             "TUTORIAL_ONLY={stem}`` on a machine that fits it, then ``make record``.",
             why=why or _("it was not selected"), record=record, device=p.device_and_generation,
             backend=p.backend, dtype=p.engine_dtype, profile=p.profile, stem=stem)
    return RECORD_BANNER.format(title=_("Measured elsewhere: drawn from a recorded run"), mark=RECORD_MARK,
                                body=body)
