"""Small result tables that render as HTML in sphinx-gallery and as text elsewhere.

Each language's pass renders a page's views from its results document
(:mod:`npu_tutorials.site.render`) as the HTML of these objects, in that
language; the text form is what a terminal shows.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .messages import _, html


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 1e7):
            return f"{value:.{digits - 1}e}"
        return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


class Table:
    """Columns, rows and a caption; optional note rendered under the table."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "", note: str = ""):
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.caption = caption
        self.note = note

    def cells(self) -> list[list[str]]:
        """The rows as shown: every value as the page prints it (:func:`fmt`)."""
        return [[c if isinstance(c, str) else fmt(c) for c in row] for row in self.rows]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html(c)}</td>" for c in row) + "</tr>" for row in self.cells())
        cap = f"<caption>{html(self.caption)}</caption>" if self.caption else ""
        note = f'<p class="tut-note">{html(self.note)}</p>' if self.note else ""
        return (f'<div class="tut-table"><table class="table">{cap}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>{note}</div>")

    def __repr__(self) -> str:
        cells = [self.columns] + self.cells()
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = [self.caption] if self.caption else []
        for j, row in enumerate(cells):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)))
            if j == 0:
                lines.append("  ".join("-" * w for w in widths))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


class Pre:
    """Text shown as it is, in a monospaced block: what a program printed, a command."""

    def __init__(self, text: str):
        self.text = text

    def _repr_html_(self) -> str:
        return f'<pre class="tut-output">{html(self.text)}</pre>'

    def __repr__(self) -> str:
        return self.text


class Note:
    """One paragraph in place of a table or plot: what is not there, and why."""

    def __init__(self, text: str):
        self.text = text

    def _repr_html_(self) -> str:
        return f'<p class="tut-caveat"><strong>{html(_("Note:"))}</strong> {html(self.text)}</p>'

    def __repr__(self) -> str:
        return f"Note: {self.text}"


class Verdict:
    """PASS / FAIL lines against thresholds, with a banner when the result is not meaningful."""

    def __init__(self, checks: list[tuple[str, str, str, bool]], caveat: str = ""):
        # (metric, measured, threshold, passed)
        self.checks = checks
        self.caveat = caveat

    @property
    def passed(self) -> bool:
        return all(c[3] for c in self.checks)

    def table(self) -> Table:
        """The lines as the page's table shows them."""
        return Table([_("check"), _("measured"), _("threshold"), _("verdict")],
                     [[_(m), v, th, _("PASS") if ok else _("FAIL")] for m, v, th, ok in self.checks])

    def _repr_html_(self) -> str:
        t = self.table()
        cav = (f'<p class="tut-caveat"><strong>{html(_("Note:"))}</strong> {html(self.caveat)}</p>'
               if self.caveat else "")
        return t._repr_html_() + cav

    def __repr__(self) -> str:
        lines = [f"{'PASS' if ok else 'FAIL'}  {m}: {v} (threshold {th})" for m, v, th, ok in self.checks]
        return "\n".join(lines + ([f"Note: {self.caveat}"] if self.caveat else []))
