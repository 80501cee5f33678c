"""Views of a paired comparison's document (:class:`~npu_tutorials.record.schema_paired.Comparison`): the table
of ratios and a forest plot of them with their intervals, drawn from the document alone, so a comparison made
on any runner renders the same way."""

from __future__ import annotations

from ..core.messages import N_, _
from ..core.tables import Table
from ..measure.paired import ROUNDS_95
from ..record.schema_base import Stat
from ..record.schema_paired import Comparison, Side
from . import plots

VERDICTS = {"B better": N_("B better"), "B worse": N_("B worse"), "no measurable change": N_("no measurable change")}


def side_text(side: Side) -> str:
    """A side as ``make compare`` was given it: its environment words, then its flags; the page's server as it
    is when it has neither."""
    words = [f"{k}={v}" for k, v in side.env.items()] + list(side.flags)
    if side.python:
        words.insert(0, f"python:{side.python}")
    if side.image:
        words.insert(0, f"image:{side.image}")
    if side.code:
        words.insert(0, _("the code of {commit}", commit=side.code[:12]))
    return " ".join(words) if words else _("the page's server as it is")


def change(ratio: float) -> str:
    """A ratio as the change it means: 1.031 -> "+3.1 %"."""
    return f"{100 * (ratio - 1):+.1f} %"


def _row(label: str, p, first: list[dict[str, float]], second: list[dict[str, float]], verdict: str) -> list[str]:
    a = Stat.of([r[p.key] for r in first]).median
    b = Stat.of([r[p.key] for r in second]).median
    unit = f" {p.unit}" if p.unit else ""
    return [label, f"{a:.4g}{unit}", f"{b:.4g}{unit}", f"{p.median:.3f} ({change(p.median)})",
            f"{p.low:.3f} – {p.high:.3f}", verdict]


def with_latency(verdict: str, p, ratios) -> str:
    """A throughput ratio called a change, with the latency ratios of the same rounds beside it (a gain bought with
    latency shows in its own row); any other verdict as it is."""
    beside = [q for q in ratios if q.key in ("median_ttft_ms", "median_tpot_ms")]
    if p.key != "output_throughput" or p.verdict == "no measurable change" or not beside:
        return verdict
    return _("{verdict}; in the same rounds: {latency}", verdict=verdict,
             latency=", ".join(f"{_(q.label)} {change(q.median)}" for q in beside))


def control_label(p) -> str:
    return _("{figure}: control, A again / A", figure=_(p.label))


def paired_table(doc: Comparison) -> Table:
    """Per headline figure: each side's median over the rounds, the paired ratio B/A (median and interval, as
    changes in per cent) and the verdict (a throughput change with the latency ratios of the same rounds in its
    row); with a control, its rows after: A run again against A, where any
    change called is a false alarm."""
    rows = [_row(_(p.label), p, doc.rounds_a, doc.rounds_b, with_latency(_(VERDICTS[p.verdict]), p, doc.ratios))
            for p in doc.ratios]
    rows += [_row(control_label(p), p, doc.rounds_a, doc.rounds_c,
                  _("no measurable change") if p.verdict == "no measurable change" else _("false alarm"))
             for p in doc.control]
    conf = min((p.confidence for p in doc.ratios), default=0.0)
    order = _("A, B and A again in the six orders in turn") if doc.control else _("alternating AB, BA, ...")
    note = _("A: {a}. B: {b}. {k} rounds of the page's gated steps ({steps}) per side, {order}; "
             "servers: {servers}. The ratio is B/A within each round (the host's drift cancels); the interval "
             "is the sign test's exact {conf:.1f} % interval for its median. A change is called only when the "
             "interval covers at least 95 % ({k95} rounds or more) and excludes 1.", k95=ROUNDS_95, a=side_text(doc.a), b=side_text(doc.b), k=len(doc.order),
             steps=", ".join(doc.steps), order=order, servers=_("one per side for every round") if doc.servers == "shared"
             else _("a fresh one per side and round"), conf=100 * conf)
    differ = [f"{k} {doc.a.versions.get(k) or '–'} / {doc.b.versions.get(k) or '–'}"
              for k in sorted(set(doc.a.versions) | set(doc.b.versions))
              if doc.a.versions.get(k) != doc.b.versions.get(k)]
    if differ:
        note += " " + _("The sides' versions differ (A / B): {versions}.", versions="; ".join(differ))
    if doc.control:
        note += " " + _("Control: A also ran a second time in every round; its rows judge that copy against A, so "
                        "a change called there is a false alarm of this host in this session.")
    return Table([_("figure"), _("A (median)"), _("B (median)"), _("B/A (median)"), _("interval"), _("verdict")],
                 rows, caption=_("Paired comparison on {device} ({date})", device=doc.machine.device_label,
                                 date=doc.built_at[:10]), note=note)


def paired_forest(doc: Comparison):
    """Each figure's ratio B/A: every round's ratio (dots), their median (bar) and the interval (line), around 1;
    with a control, its ratios A again / A below."""
    ratios = list(doc.ratios) + list(doc.control)
    labels = [_(p.label) for p in doc.ratios] + [control_label(p) for p in doc.control]
    return plots.paired_forest(ratios, _("{model}: B against A, {k} paired rounds", model=doc.model,
                                         k=len(doc.order)), labels)
