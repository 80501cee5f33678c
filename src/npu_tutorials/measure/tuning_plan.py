"""What the tuning section runs and concludes, as pure functions of the card, the build and the figures.

* :func:`select_knobs`: the card's knobs for a backend and profile, and why each other one is not measured
  in this build: already in the baseline (a setting the build's environment already has, as vllm-ascend's
  image sets it: :data:`IMAGE_ENV`; or what the pinned release does by default: the knob's ``baseline``),
  a setting the installed vllm-ascend no longer reads, another profile, a server on fewer cards than the
  knob needs, a library the host lacks;
* :func:`cpu_binding`: vllm-ascend's own CPU binding as a server's log reports it (the tuning section records it);
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
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence
import platform

from ..core.messages import N_, _
from ..engine.platform import platform_for
from ..inputs.knobs import (SKIP_UNSUPPORTED, combinable, in_effect, installed_vllm_ascend, merge, preloaded,
                            release_tuple, resolve_env, unsupported)
from ..record.schema_base import Message, Stat
from .paired import ROUNDS_95, paired_ratios
from ..inputs.cards import load_card
from ..inputs.gallery_index import tutorials
from ..record.results import recorded

EAGER = N_("report's conditions (eager)")
GRAPH = N_("graph mode")
COMBINED = "graph mode + best combination"
# why a knob is not measured (stored in the results document as a Message, shown in each language)
SKIP_PROFILE = N_("measured in the {profiles} profile only (each knob is another graph-mode server start); "
                  "this build ran {profile}")
SKIP_DEVICES = N_("a setting for a server on {needs} or more cards; this model's server uses {has}")
SKIP_MISSING = N_("{path} is not installed on this build's host")
SKIP_FAILED = N_("its server failed: {error}")  # written by the tutorial's tuning step
SKIP_REMOVED = N_("vllm-ascend {version} no longer reads it (read up to {release}, removed by {change}): its "
                  "server would ignore it without a word")
# why a knob is in the baseline (graph mode with the card's defaults, and so every row): not measured, since its row
# would repeat graph mode; the page lists these knobs as the baseline's (in_baseline)
SKIP_ALREADY = N_("this build's environment already has {variables}")
SKIP_IMAGE = N_("this build's environment already has {variables}, as vllm-ascend's image sets it ({where})")
SKIP_DEFAULT = N_("already the default: {how}")
BASELINE_REASONS = frozenset({SKIP_ALREADY, SKIP_IMAGE, SKIP_DEFAULT})

# What vllm-ascend's image (quay.io/ascend/vllm-ascend:v0.23.0, the pinned release) puts in the environment of every
# process of a build, with where (vllm-ascend v0.23.0, Dockerfile): value, source.  Dockerfile:27 installs
# libjemalloc2; Dockerfile:75 preloads it from ~/.bashrc, which a CI step's shell never reads, so the build's bootstrap
# exports it wherever the library exists (scripts/bootstrap_env.sh, IMAGE_BASHRC).  {machine}: ``uname -m``.
IMAGE_ENV = {
    "TASK_QUEUE_ENABLE": ("1", "vllm-ascend v0.23.0 Dockerfile:61, ENV"),
    "OMP_NUM_THREADS": ("1", "vllm-ascend v0.23.0 Dockerfile:62, ENV"),
    "LD_PRELOAD": ("/usr/lib/{machine}-linux-gnu/libjemalloc.so.2",
                   "vllm-ascend v0.23.0 Dockerfile:75, ~/.bashrc; the build's bootstrap exports it"),
}


def image_environ(machine: str = "aarch64") -> dict[str, str]:
    """The settings :data:`IMAGE_ENV` gives a build on a ``machine`` host (an Atlas A2/A3 server: aarch64)."""
    return {var: value.replace("{machine}", machine) for var, (value, _where) in IMAGE_ENV.items()}


def in_baseline(why) -> bool:
    """Whether a knob's reason for not being measured (a :class:`Message`, or a plain string of an older
    document) says the baseline already has it."""
    return getattr(why, "msgid", why) in BASELINE_REASONS


def _image_sources(env: Mapping[str, str], machine: str) -> list[str]:
    """Where vllm-ascend's image sets each setting of a resolved knob environment; empty unless it sets them all."""
    image = image_environ(machine)
    where = []
    for var, value in env.items():
        if var not in image:
            return []
        same = (set(preloaded(env)) <= set(preloaded(image)) if var == "LD_PRELOAD" else image[var] == value)
        if not same:
            return []
        where.append(IMAGE_ENV[var][1])
    return where


def no_longer_read(knob, version: str | None) -> bool:
    """Whether vllm-ascend ``version`` is a release after the last one that reads ``knob``'s setting."""
    last, have = release_tuple(knob.read_until), release_tuple(version or "")
    return bool(last and have and have > last)


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
                 machine: str = "", exists: Callable[[str], bool] | None = None,
                 vllm_ascend: str | None = None) -> KnobSelection:
    """The card's knobs of ``backend`` this build measures in ``profile``, and why each other is not.
    ``environ``, ``machine`` (``uname -m``), ``exists`` (a file test) and ``vllm_ascend`` (its version; None: the
    installed one, "": not checked) describe the build's host.  A knob the baseline already has (the environment
    has all it sets, or the pinned release does it by default) is not measured in any profile: its row would
    repeat graph mode."""
    environ = dict(os.environ if environ is None else environ)
    machine = machine or platform.machine()
    exists = exists or host_file_exists
    ascend = platform_for(backend).ascend
    if vllm_ascend is None and ascend:
        vllm_ascend = installed_vllm_ascend()
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
        image = _image_sources(env, machine) if ascend else []
        if already and len(already) == len(env):
            out.skipped[k.name] = (Message.of(SKIP_IMAGE, variables=", ".join(already), where="; ".join(image))
                                   if image else Message.of(SKIP_ALREADY, variables=", ".join(already)))
        elif k.baseline:
            out.skipped[k.name] = Message.of(SKIP_DEFAULT, how=k.baseline)
        elif ascend and no_longer_read(k, vllm_ascend):
            out.skipped[k.name] = Message.of(SKIP_REMOVED, version=vllm_ascend, release=k.read_until,
                                             change=k.removed_by)
        elif ascend and vllm_ascend and (gone := unsupported(k, vllm_ascend)):
            out.skipped[k.name] = Message.of(SKIP_UNSUPPORTED, version=vllm_ascend, what="; ".join(gone))
        elif profile not in t.knob_profiles:
            out.skipped[k.name] = Message.of(SKIP_PROFILE, profiles=" and ".join(t.knob_profiles), profile=profile)
        elif server_devices(card) < k.min_devices:
            out.skipped[k.name] = Message.of(SKIP_DEVICES, needs=k.min_devices, has=server_devices(card))
        elif missing:
            out.skipped[k.name] = Message.of(SKIP_MISSING, path=missing[0])
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
    """Server starts the tuning section makes at most: configurations measured alone (where it measures knobs,
    :data:`PAIRED_ROUNDS` rounds of every configuration but the report's conditions, which run once), the
    combination (where two knobs or more are measured: paired with graph mode likewise) and the tiny model of
    the fixed overhead."""
    rounds = PAIRED_ROUNDS if tuning_servers(card, backend, profile, sweep_mode=sweep_mode, **select)[1].run else 1
    # paired rounds measure graph mode in every round: a graph-mode sweep's server stands for none of them
    servers, sel = tuning_servers(card, backend, profile, sweep_mode=None if rounds > 1 and sweep_mode == "graph"
                                  else sweep_mode, **select)
    t = card.tuning
    eager = sum(s.name == EAGER and not s.reused for s in servers)
    return {"configurations": (eager + rounds * sum(s.name != EAGER and not s.reused for s in servers)) if t else 0,
            "combination": (2 * rounds if rounds > 1 else 1) if len(sel.run) >= 2 else 0,
            "overhead": int(bool(t and t.overhead_model)),
            "rounds": rounds}


# -- what a server's log says ------------------------------------------------------------------------------

# vllm-ascend v0.23.0 binds each worker's threads to CPU cores by default (ascend_config.py:162, enable_cpu_binding
# True): after warm-up (worker/worker.py:777-783) it pins the worker's threads (taskset -acp, then its acl and
# release threads: cpu_binding.py:249-257, 683-694), on an ARM host only (cpu_binding.py:801-805).  A failure is a
# warning and the server goes on; torch_npu's CPU_AFFINITY_CONF (the "CPU affinity" knob) binds on top of it.  The
# lines that say what happened, the most telling first (a plan is logged before the binding that may fail):
CPU_BINDING_LINES = (
    re.compile(r"Bind cpus failed in rank"),  # worker/worker.py:783 (WARNING): the binding failed, skipped
    re.compile(r"CPU binding skipped: non-ARM CPU detected"),  # cpu_binding.py:803 (INFO)
    re.compile(r"Unknown CPU architecture\. arch="),  # cpu_binding.py:40-43 (WARNING): binding off
    re.compile(r"\bNPU\d+: main=\[.*\]\s+acl=\["),  # cpu_binding.py:641 (INFO): the cores each thread got
    re.compile(r"\bAscend 950 NPU\d+: worker=\["),  # cpu_binding.py:635 (INFO), Atlas 950
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# vLLM's log format (vllm/logger.py:22-26): an optional "(EngineCore_DP0 pid=1) " prefix, level, date and time
_VLLM_LOG_LINE = re.compile(r"^(?:\([^)]*\)\s*)?(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d"
                            r"(?:\.\d+)?\s+(.*)$")


def cpu_binding(log_text: str) -> str | None:
    """vllm-ascend's own CPU binding as a server's log reports it: its line, without the process prefix and time
    (``"INFO [cpu_binding.py:641] NPU0: main=[2 3 4]  acl=[5]  release=[6]"``), a failure or a skip before a
    plan; None where the log has none (another backend, the binding turned off, a server that logged none)."""
    lines = [_ANSI.sub("", line).strip() for line in (log_text or "").splitlines()]
    for rx in CPU_BINDING_LINES:
        for line in lines:
            if rx.search(line):
                m = _VLLM_LOG_LINE.match(line)
                return f"{m[1]} {m[2]}" if m else line
    return None


# -- what the figures say ---------------------------------------------------------------------------------

def _pairs(row, base):
    """(lower is better?, row's stat, base's stat) for TPOT at 1 and throughput at the highest concurrency."""
    out = [(True, row.tpot_ms, base.tpot_ms)]
    if row.throughput_high is not None and base.throughput_high is not None:
        out.append((False, row.throughput_high, base.throughput_high))
    return out


PAIRED_ROUNDS = ROUNDS_95  # rounds of the paired comparison where a build measures knobs
TUNING_METRICS = [("tpot_ms", N_("TPOT at concurrency 1"), "ms", "lower"),
                  ("throughput_high", N_("output throughput at the highest concurrency"), "tok/s", "higher")]


def row_figures(row) -> dict[str, float]:
    """The figures one round's row is paired on: TPOT at 1 and throughput at the highest concurrency."""
    out = {"tpot_ms": row.tpot_ms.median}
    if row.throughput_high is not None:
        out["throughput_high"] = row.throughput_high.median
    return out


def paired_vs(rounds_row: Sequence, rounds_base: Sequence) -> list:
    """A configuration's rounds against graph mode's rounds of the same build (the same rounds, in order), as
    paired ratios (:func:`npu_tutorials.measure.paired.paired_ratios`)."""
    return paired_ratios([row_figures(r) for r in rounds_base], [row_figures(r) for r in rounds_row],
                         TUNING_METRICS)


def merge_rounds(rounds: Sequence):
    """One configuration's rows of every round as one row: each figure the median over the rounds' medians (its
    spread and sample size: the rounds'), start-up likewise."""
    first = rounds[0]
    if len(rounds) == 1:
        return first
    fraction = [r.fraction for r in rounds if r.fraction is not None]

    def over_rounds(key: str):  # a figure some round lacks (a record from before it existed): the first round's
        v = [getattr(r, key).median for r in rounds if getattr(r, key) is not None]
        return Stat.of(v) if len(v) == len(rounds) else getattr(first, key)

    return first.model_copy(update={
        "startup_s": round(Stat.of([r.startup_s for r in rounds]).median, 1),
        **{k: over_rounds(k) for k in ("tpot_ms", "throughput_c1", "throughput_high", "tpot_high_ms", "ttft_high_ms")},
        "fraction": Stat.of(fraction).median if fraction else None})


def verdict(row, base) -> str:
    """``row`` against ``base`` on TPOT at concurrency 1 and output throughput at the highest concurrency.
    Paired (``row.vs_graph``, measured in rounds with graph mode): "better" / "worse" when one figure's interval
    excludes 1 that way and none the other, "mixed" when both ways, else "no measurable change".  Measured
    once (a document from before, or a build of one round): beyond the spread (interquartile ranges apart),
    else "no clear change"."""
    if row.vs_graph:
        calls = {p.verdict for p in row.vs_graph}
        up, down = "B better" in calls, "B worse" in calls
        return (N_("mixed") if up and down else N_("better") if up else N_("worse") if down
                else N_("no measurable change"))
    up = down = False
    for lower, r, b in _pairs(row, base):
        better = r.q3 < b.q1 if lower else r.q1 > b.q3
        worse = r.q1 > b.q3 if lower else r.q3 < b.q1
        up, down = up or better, down or worse
    return N_("mixed") if up and down else N_("better") if up else N_("worse") if down else N_("no clear change")


def gain(row, base) -> float:
    """The geometric mean of the speedups of ``row`` over ``base`` (TPOT at 1, throughput at the highest): the
    paired medians where the row has them, else the medians' ratios."""
    if row.vs_graph:
        ratios = [1 / p.median if p.better == "lower" else p.median for p in row.vs_graph]
    else:
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
    of each tutorial starts (full profile) in vllm-ascend's image (:func:`image_environ`, the pinned release; a knob
    its baseline has starts none), what each measures, and the time tuning took in recorded builds."""
    lines = ["| tutorial | tuning servers on an NPU build | each one measures | tuning time in recorded builds |",
             "|---|---|---|---|"]
    for key in tutorials().values():
        card = load_card(key)
        if card.tuning is None or not card.sweeps:
            lines.append(f"| {key} | none (its card has no tuning section) | | |")
            continue
        n = starts(card, "npu", "full", sweep_mode="eager" if card.serve.enforce_eager else "graph",
                   environ=image_environ("aarch64"), machine="aarch64", exists=lambda path: True, vllm_ascend="")
        sw = card.sweeps["full"]
        top = max(sw.concurrency)
        paired = (f" ({n['rounds']} paired rounds: each round starts graph mode and every knob once)"
                  if n["rounds"] > 1 else "")
        what = (f"up to {n['configurations'] + n['combination'] + n['overhead']}: {n['configurations']} starts of the "
                f"report's conditions, graph mode and each knob the image's baseline lacks, alone{paired}; at most "
                f"{n['combination']} for the combination of the knobs that helped (with graph mode, paired); "
                f"{n['overhead']} tiny model for the fixed overhead")
        each = (f"a server start, then {sw.repeats} benchmark runs at concurrency 1 ({max(2, sw.rounds)} "
                f"requests) and {sw.repeats} at {top} ({max(2, sw.rounds * top)} requests)")
        rec = []
        for doc in recorded(key):
            secs = [c.seconds for c in doc.results.costs if c.step.msgid.startswith("tuning")]
            if secs:
                p = doc.provenance
                rec.append(f"{sum(secs):.0f} s for {len(secs)} servers on {p.device} ({p.profile} profile, "
                           f"{p.built_at[:10]})")
        lines.append(f"| {key} | {what} | {each} | {'; '.join(rec) or 'none recorded'} |")
    return "\n".join(lines) + "\n"
