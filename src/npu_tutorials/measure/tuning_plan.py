"""What the tuning section runs and concludes, as pure functions of the card, the build and the figures.

* :func:`select_knobs`: the card's knobs for a backend and profile, and why each other one is not measured
  in this build (another profile, a server on fewer cards than the knob needs, a library the host lacks,
  a setting the build's environment already has);
* :func:`tuning_servers`: the servers the section starts, in order: the report's conditions (eager),
  graph mode with the card's defaults, graph mode plus each knob alone (the concurrency sweep's own
  server stands in for the row it equals);
* :func:`verdict`, :func:`gain`, :func:`best_combination`, :func:`pick_best`: each row against graph
  mode beyond the spread of both, and the knobs that helped, combined into one more server;
* :func:`measured_best`: the newest best combination an NPU build recorded, for the copy-paste set;
* :func:`config_label`: a configuration's name, stored in English in the results document, as the language
  being rendered shows it (a knob's reason is stored as a :class:`~npu_tutorials.record.schema_base.Message`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..core.messages import N_, _
from ..engine.platform import platform_for
from ..inputs.knobs import combinable, in_effect, merge, preloaded, resolve_env
from ..record.schema_base import Message

EAGER = N_("report's conditions (eager)")
GRAPH = N_("graph mode")
COMBINED = "graph mode + best combination"
# why a knob is not measured (stored in the results document as a Message, shown in each language)
SKIP_PROFILE = N_("measured in the {profiles} profile only (each knob is another graph-mode server start); "
                  "this build ran {profile}")
SKIP_DEVICES = N_("a setting for a server on {needs} or more cards; this model's server uses {has}")
SKIP_MISSING = N_("{path} is not installed on this build's host")
SKIP_ALREADY = N_("this build's environment already has {variables}")
SKIP_FAILED = N_("its server failed: {error}")  # written by the tutorial's tuning step


@dataclass(frozen=True)
class TuningServer:
    """One configuration of the tuning section: flags and environment added to the build's server command
    (with ``--enforce-eager`` taken out first), and whether the concurrency sweep already measured it."""

    name: str
    flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    knobs: tuple[str, ...] = ()
    reused: bool = False


@dataclass
class KnobSelection:
    run: list = field(default_factory=list)  # the card's Knob objects, environment resolved for this host
    skipped: dict[str, Message] = field(default_factory=dict)  # knob name -> why it is not measured here


def server_devices(card) -> int:
    """The cards one server of this model spans (tensor parallelism; ``requires.devices`` covers it)."""
    return card.serve.tensor_parallel_size


def host_file_exists(path: str) -> bool:
    return os.path.exists(path)


def select_knobs(card, backend: str, profile: str, *, environ: Mapping[str, str] | None = None,
                 machine: str = "", exists: Callable[[str], bool] | None = None) -> KnobSelection:
    """The card's knobs of ``backend`` this build measures in ``profile``, and why each other is not.
    ``environ``, ``machine`` (``uname -m``) and ``exists`` (a file test) describe the build's host."""
    import platform

    environ = dict(os.environ if environ is None else environ)
    machine = machine or platform.machine()
    exists = exists or host_file_exists
    out = KnobSelection()
    t = card.tuning
    if t is None:
        return out
    for k in t.knobs:
        if backend not in k.backends:
            continue
        env = resolve_env(k.env, machine, {})  # as a reader sets it; the server gets resolve_env(env, .., environ)
        missing = [p for p in preloaded(env) if p not in preloaded(environ) and not exists(p)]
        already = in_effect(env, environ)
        if profile not in t.knob_profiles:
            out.skipped[k.name] = Message.of(SKIP_PROFILE, profiles=" and ".join(t.knob_profiles), profile=profile)
        elif server_devices(card) < k.min_devices:
            out.skipped[k.name] = Message.of(SKIP_DEVICES, needs=k.min_devices, has=server_devices(card))
        elif missing:
            out.skipped[k.name] = Message.of(SKIP_MISSING, path=missing[0])
        elif already and len(already) == len(env):
            out.skipped[k.name] = Message.of(SKIP_ALREADY, variables=", ".join(already))
        else:
            out.run.append(k.model_copy(update={"env": env}))
    return out


def tuning_servers(card, backend: str, profile: str, *, sweep_mode: str | None = None, **select) -> \
        tuple[list[TuningServer], KnobSelection]:
    """The configurations the tuning section measures before the combination, in the order of its table,
    and the knob selection.  ``sweep_mode``: how the concurrency sweep's server ran ("eager" or "graph"),
    when the sweep measured concurrency 1 and its highest: that row reuses it instead of a new server."""
    sel = select_knobs(card, backend, profile, **select)
    servers = [TuningServer(EAGER, ("--enforce-eager",), reused=sweep_mode == "eager"),
               TuningServer(GRAPH, reused=sweep_mode == "graph")]
    servers += [TuningServer(f"{GRAPH} + {k.name}", tuple(k.flags), dict(k.env), (k.name,)) for k in sel.run]
    return servers, sel


def combination_server(knobs: Sequence) -> TuningServer:
    flags, env = merge(knobs)
    return TuningServer(f"{COMBINED} ({' + '.join(k.name for k in knobs)})", tuple(flags), env,
                        tuple(k.name for k in knobs))


def starts(card, backend: str, profile: str, *, sweep_mode: str | None = None, **select) -> dict[str, int]:
    """Server starts the tuning section makes at most: configurations measured alone, the combination
    (one, where two knobs or more are measured) and the tiny model of the fixed overhead."""
    servers, sel = tuning_servers(card, backend, profile, sweep_mode=sweep_mode, **select)
    t = card.tuning
    return {"configurations": sum(not s.reused for s in servers) if t else 0,
            "combination": int(len(sel.run) >= 2),
            "overhead": int(bool(t and t.overhead_model))}


# -- what the figures say ---------------------------------------------------------------------------------

def _pairs(row, base):
    """(lower is better?, row's stat, base's stat) for TPOT at 1 and throughput at the highest concurrency."""
    out = [(True, row.tpot_ms, base.tpot_ms)]
    if row.throughput_high is not None and base.throughput_high is not None:
        out.append((False, row.throughput_high, base.throughput_high))
    return out


def verdict(row, base) -> str:
    """``row`` against ``base`` on TPOT at concurrency 1 and output throughput at the highest concurrency:
    "better" / "worse" when one figure moved beyond the spread (interquartile ranges apart) and none the
    other way, "mixed" when both ways, else "no clear change"."""
    up = down = False
    for lower, r, b in _pairs(row, base):
        better = r.q3 < b.q1 if lower else r.q1 > b.q3
        worse = r.q1 > b.q3 if lower else r.q3 < b.q1
        up, down = up or better, down or worse
    return N_("mixed") if up and down else N_("better") if up else N_("worse") if down else N_("no clear change")


def gain(row, base) -> float:
    """The geometric mean of the speedups of ``row`` over ``base`` (TPOT at 1, throughput at the highest)."""
    ratios = [(b.median / r.median) if lower else (r.median / b.median) for lower, r, b in _pairs(row, base)]
    return math.prod(ratios) ** (1 / len(ratios))


def best_combination(measured: Sequence[tuple], base) -> list:
    """From ``(knob, row)`` pairs, the knobs whose row was better than ``base``, largest gain first, each
    added unless it conflicts with those already chosen (two task-queue levels: the better one)."""
    helped = sorted(((gain(r, base), i, k) for i, (k, r) in enumerate(measured) if verdict(r, base) == "better"),
                    key=lambda x: (-x[0], x[1]))
    chosen: list = []
    for _gain, _i, k in helped:
        if combinable([*chosen, k]):
            chosen.append(k)
    return chosen


def pick_best(rows: Sequence, base):
    """The row with the largest gain among those better than ``base`` beyond the spread, else ``base``."""
    better = [r for r in rows if r is not base and verdict(r, base) == "better"]
    return max(better, key=lambda r: gain(r, base)) if better else base


def row_named(rows: Sequence, name: str):
    return next((r for r in rows if r.name == name), None)


def graph_row(rows: Sequence):
    """The graph-mode row every knob is measured against (the second row of documents that predate names)."""
    return row_named(rows, GRAPH) or (rows[1] if len(rows) > 1 else None)


def config_label(name: str) -> str:
    """A configuration's name (stored in English: compared, and the key of ``best``) as a text to show."""
    if name in (EAGER, GRAPH):
        return _(name)
    if name.startswith(f"{COMBINED} (") and name.endswith(")"):
        return _("graph mode + best combination ({knobs})", knobs=name[len(COMBINED) + 2:-1])
    if name.startswith(f"{GRAPH} + "):
        return _("graph mode + {knob}", knob=name.removeprefix(f"{GRAPH} + "))
    return name


def measured_best(docs: Sequence) -> tuple | None:
    """``(document, best row)`` of the newest complete NPU build that measured tuning knobs, else None."""
    for doc in sorted(docs, key=lambda d: d.provenance.built_at, reverse=True):
        t = doc.results.tuning
        copied = "tuning" in doc.results.from_records  # shown from another record: that one counts
        if platform_for(doc.provenance.backend).ascend and doc.provenance.status == "complete" and t and t.best and not copied:
            row = row_named(t.rows, t.best)
            if row is not None:
                return doc, row
    return None


def runner_tuning_md() -> str:
    """The runner page's table (``docs/source/_generated/runner_tuning.md``): the tuning servers an NPU build
    of each tutorial starts (full profile), what each measures, and the time tuning took in recorded builds."""
    from ..inputs.cards import load_card
    from ..inputs.gallery_index import tutorials
    from ..record.results import recorded

    lines = ["| tutorial | tuning servers on an NPU build | each one measures | tuning time in recorded builds |",
             "|---|---|---|---|"]
    for key in tutorials().values():
        card = load_card(key)
        if card.tuning is None or not card.sweeps:
            lines.append(f"| {key} | none (its card has no tuning section) | | |")
            continue
        n = starts(card, "npu", "full", sweep_mode="eager" if card.serve.enforce_eager else "graph", environ={},
                   exists=lambda path: True)
        sw = card.sweeps["full"]
        top = max(sw.concurrency)
        what = (f"up to {sum(n.values())}: {n['configurations']} configurations (the report's conditions and each "
                f"knob alone), at most {n['combination']} combination of the knobs that helped, "
                f"{n['overhead']} tiny model for the fixed overhead")
        each = (f"a server start, then {sw.repeats} benchmark runs at concurrency 1 ({max(2, sw.rounds)} "
                f"requests) and {sw.repeats} at {top} ({max(2, sw.rounds * top)} requests)")
        rec = []
        for doc in recorded(key):
            secs = [c.seconds for c in doc.results.costs if c.step.startswith("tuning")]
            if secs:
                p = doc.provenance
                rec.append(f"{sum(secs):.0f} s for {len(secs)} servers on {p.device} ({p.profile} profile, "
                           f"{p.built_at[:10]})")
        lines.append(f"| {key} | {what} | {each} | {'; '.join(rec) or 'none recorded'} |")
    return "\n".join(lines) + "\n"
