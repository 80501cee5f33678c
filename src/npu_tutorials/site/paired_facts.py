"""The figures the methods page's prose quotes from the recorded paired comparisons, computed from the records,
so that no number in that prose is typed by hand.

The prose names each figure with the ``fact`` role, in MyST: ``{fact}`<records> <figure> <quantity> [<k>]```.

* ``<records>``: one or more of the checkout's ``results/methods/paired-*.json`` stems, joined by ``+`` (a count is then summed over
  them: several sessions of the same comparison).  The ``paired-`` prefix may be left out.  ``<stem>@control``
  stands for that record's control: its "A again" rounds against A (C/A).
* ``<figure>``: ``throughput``, ``ttft`` or ``tpot``; ``any`` for a count over the three together.
* ``<quantity>``:

  - ``rounds``: rounds, in all;
  - ``change``: the median ratio as a signed change ("+9.5 %");
  - ``median``: the median ratio ("1.095");
  - ``interval``: its interval ("1.068 – 1.113");
  - ``width``: the interval's width as a share of the ratio ("4.5 %"); with ``k``, the median over the blocks
    of ``k`` rounds;
  - ``spread``: how far the furthest round's ratio lies from 1 ("8.1 %");
  - ``calls k``: how many consecutive blocks of ``k`` rounds called a change (as ``make compare K=k`` would);
  - ``blocks k``: how many such blocks there are.

The role's text is the same in every language (numbers only); the translated sentence around it carries the role
as the source does.  A role that names no record, or a quantity this module does not know, fails the page with
one line (:func:`fact`)."""

from __future__ import annotations

import statistics
from functools import lru_cache
from pathlib import Path

from docutils import nodes

from ..core.errors import TutorialError
from ..measure.paired import in_blocks, paired_ratios
from ..record.headline import METRICS
from ..record.results import RECORDED_DIR
from ..record.schema_base import PairedRatio
from ..record.schema_paired import Comparison

# the checkout's committed records, which the prose names one by one (not TUTORIAL_RECORDED_DIR: a build that draws
# another machine's records beside its own still explains this site's method with the records it cites)
RECORDS = RECORDED_DIR / "methods"
FIGURES = {"throughput": "output_throughput", "ttft": "median_ttft_ms", "tpot": "median_tpot_ms"}
QUANTITIES = ("rounds", "change", "median", "interval", "width", "spread", "calls", "blocks")
SUMMED = ("rounds", "calls", "blocks")  # the quantities a "+" of records adds up
CONTROL = "@control"


@lru_cache(maxsize=None)
def _load(path: Path) -> Comparison:
    return Comparison.model_validate_json(path.read_text())


def _pairs(name: str) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """The two sides' rounds one record name stands for: (A, B), or (A, A again) for ``<stem>@control``."""
    stem, control = (name[:-len(CONTROL)], True) if name.endswith(CONTROL) else (name, False)
    stem = stem if stem.startswith("paired-") else f"paired-{stem}"
    path = RECORDS / f"{stem}.json"
    if not path.is_file():
        raise TutorialError(f"no recorded comparison {path.name} in {path.parent}")
    doc = _load(path)
    if control and not doc.rounds_c:
        raise TutorialError(f"{path.name} has no control rounds (make compare CONTROL=1)")
    return doc.rounds_a, doc.rounds_c if control else doc.rounds_b


def _metrics(figure: str) -> list[tuple[str, str, str, str]]:
    if figure == "any":
        return [m for m in METRICS if m[0] in FIGURES.values()]
    if figure not in FIGURES:
        raise TutorialError(f"unknown figure {figure!r}: one of {', '.join(FIGURES)} or any")
    return [m for m in METRICS if m[0] == FIGURES[figure]]


def _whole_metric(figure: str) -> list[tuple[str, str, str, str]]:
    """The one figure a ratio, an interval or a width is of."""
    if figure == "any":
        raise TutorialError("'any' counts blocks (calls, blocks, rounds); name one figure for a ratio")
    return _metrics(figure)


def _whole(a: list[dict], b: list[dict], figure: str) -> PairedRatio:
    ratios = paired_ratios(a, b, _whole_metric(figure))
    if not ratios:
        raise TutorialError(f"the record does not hold {figure} in every round of both sides")
    return ratios[0]


def _one(a: list[dict], b: list[dict], figure: str, quantity: str, k: int | None) -> float | str:
    if quantity == "rounds":
        return len(a)
    if quantity in ("calls", "blocks"):
        if k is None:
            raise TutorialError(f"{quantity} needs the block size: <records> <figure> {quantity} <k>")
        blocks = in_blocks(a, b, _metrics(figure), k)
        return sum(r.called for blk in blocks for r in blk) if quantity == "calls" else len(blocks)
    if quantity == "width" and k is not None:
        blocks = in_blocks(a, b, _whole_metric(figure), k)
        if not blocks:
            raise TutorialError(f"width {k}: the record has {len(a)} rounds, fewer than one block of {k}")
        return f"{statistics.median(blk[0].width_pct for blk in blocks):.1f} %"
    r = _whole(a, b, figure)
    if quantity == "change":
        return f"{100 * (r.median - 1):+.1f} %"
    if quantity == "median":
        return f"{r.median:.3f}"
    if quantity == "interval":
        return f"{r.low:.3f} – {r.high:.3f}"
    if quantity == "width":
        return f"{r.width_pct:.1f} %"
    return f"{100 * max(abs(x - 1) for x in r.ratios):.1f} %"  # spread


def fact(target: str) -> str:
    """The text of ``{fact}`target```: ``"<records> <figure> <quantity> [<k>]"`` (this module's docstring)."""
    words = target.split()
    if len(words) not in (3, 4) or words[2] not in QUANTITIES:
        raise TutorialError(f"fact {target!r}: write <records> <figure> <quantity> [<k>], the quantity one of "
                            f"{', '.join(QUANTITIES)}")
    names, figure, quantity = words[0].split("+"), words[1], words[2]
    try:
        k = int(words[3]) if len(words) == 4 else None
    except ValueError:
        raise TutorialError(f"fact {target!r}: the block size {words[3]!r} is not a whole number") from None
    if len(names) > 1 and quantity not in SUMMED:
        raise TutorialError(f"fact {target!r}: only {', '.join(SUMMED)} add up over several records")
    values = [_one(*_pairs(n), figure, quantity, k) for n in names]
    return str(sum(values)) if quantity in SUMMED else str(values[0])


def fact_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """The docutils role ``fact``: :func:`fact`'s text; a target it cannot compute is an error on the page's line
    (the build reports it and ``make check`` names the page; ``tests/test_paired_facts.py`` holds every target of
    the methods page computable)."""
    try:
        return [nodes.Text(fact(text))], []
    except TutorialError as exc:
        msg = inliner.reporter.error(f"{{fact}}`{text}`: {exc}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
