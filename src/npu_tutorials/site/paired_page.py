"""The methods page's paired comparisons: each recorded ``make compare`` document
(``results/methods/paired-*.json``) drawn as its table and forest plot, and, for a long one, its resolution: the
session cut into blocks of each of :data:`BLOCKS` rounds, each judged as ``make compare K=<rounds>`` would judge it."""

from __future__ import annotations

from pathlib import Path

from ..core.messages import _, language
from ..measure.paired import ROUNDS_95, ROUNDS_DEFAULT, in_blocks
from ..record.headline import METRICS
from ..record.results import document_id, recorded_dir
from ..record.schema_base import Stat
from ..record.schema_paired import Comparison
from ..views.paired import VERDICTS, paired_forest, paired_table, side_text
from .render import figure_block, table_block

BLOCK = ROUNDS_95  # CI's paired gate's rounds
BLOCKS = (ROUNDS_95, ROUNDS_DEFAULT)  # and make compare's default: each block size a table of its own


def recorded_comparisons() -> list[tuple[Path, Comparison]]:
    d = Path(recorded_dir()) / "methods"
    return [(p, Comparison.model_validate_json(p.read_text())) for p in sorted(d.glob("paired-*.json"))] \
        if d.is_dir() else []


def _block_lines(blocks: list, suffix: str) -> list[str]:
    lines = []
    for key, label, _unit, _better in METRICS:
        rows = [b for b in (next((r for r in blk if r.key == key), None) for blk in blocks) if b is not None]
        if not rows:
            continue
        calls = [r.verdict for r in rows if r.called]
        widths = [r.width_pct for r in rows]
        called = _("{n} of {m}", n=len(calls), m=len(rows)) + (
            f" ({', '.join(_(VERDICTS[c]) for c in sorted(set(calls)))})" if calls else "")
        lines.append(f"| {_(label)}{suffix} | {called} | {min(r.median for r in rows):.3f} – "
                     f"{max(r.median for r in rows):.3f} | {Stat.of(widths).median:.1f} %, {max(widths):.1f} % |")
    return lines


def blocks_markdown(doc: Comparison, k: int = BLOCK) -> str:
    """Per figure, over the document's consecutive blocks of ``k`` rounds: how many called a change, and the
    intervals' widths (as a share of the ratio), as a markdown table, the control's blocks (A again / A: every
    change called is a false alarm) after B's; '' for fewer than two blocks.  In the current language."""
    blocks = in_blocks(doc.rounds_a, doc.rounds_b, METRICS, k)
    if len(blocks) < 2:
        return ""
    lines = [_("Cut into {n} blocks of {k} rounds (each judged as `make compare K={k}` would judge it):",
               n=len(blocks), k=k), "",
             "| " + " | ".join([_("figure"), _("blocks calling a change"), _("B/A medians"),
                                _("interval widths (median, max)")]) + " |", "|---|---|---|---|"]
    lines += _block_lines(blocks, "")
    if doc.rounds_c:
        lines += _block_lines(in_blocks(doc.rounds_a, doc.rounds_c, METRICS, k),
                              _(", control A again / A (a change called: a false alarm)"))
    return "\n".join(lines) + "\n"


def paired_markdown(lang: str, images: Path, prefix: str = "") -> str:
    """Every recorded comparison: what was compared, its table, its forest plot and its blocks, in ``lang``."""
    found = recorded_comparisons()
    with language(lang):
        if not found:
            return _("*No paired comparison is recorded (run `make compare`).*")
        out = []
        for path, doc in found:
            doc_id = document_id(path)
            table = table_block(paired_table(doc), images, prefix, f"{path.stem}_table", doc_id)
            fig = figure_block(paired_forest(doc), images, prefix, path.stem, doc_id)
            out += [f"#### {doc.model}: A `{side_text(doc.a)}`, B `{side_text(doc.b)}`", "",
                    _("Recorded {date} at commit `{commit}` on {device}, {backend}; {k} rounds, servers {servers}, "
                      "{seconds:.0f} s in all (`{file}`).", date=doc.built_at[:10],
                      commit=(doc.git_commit or "?")[:12], device=doc.machine.device_label,
                      backend=doc.machine.backend, k=len(doc.order), servers=doc.servers,
                      seconds=doc.wall_time_s or 0, file=path.name),
                    *([_("It stopped before the rounds it was asked for; the record says why: \"{why}\"", why=doc.stopped), ""]
                      if doc.stopped else []),
                    "", table, "", fig, ""] + [blocks_markdown(doc, k) for k in BLOCKS] + [""]
        return "\n".join(out)
