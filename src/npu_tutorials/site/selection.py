"""Which tutorials this build executes: the ones selected, in this shard, that fit its hardware.

The others are rendered without execution; their pages say why (and show
results recorded on other hardware where there are some).

* ``TUTORIAL_ONLY``: a regular expression on the gallery file names.
* ``SHARD=k/N`` (``TUTORIAL_SHARD``): the k-th of N shards, a stable split
  balanced by each tutorial's recorded cost (longest first onto the least
  loaded shard), so N runners share a build; ``make assemble`` merges them.
* The card's ``requires``: device count and memory, whether a CPU build can run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..inputs.cards import Card, load_card
from ..engine.platform import platform_for
from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..engine.backend import describe_environment
from ..record.results import recorded

DEFAULT_COST_S = 600.0  # a tutorial without a recorded run counts as ten minutes


@dataclass(frozen=True)
class Hardware:
    backend: str
    devices: int
    device_memory_gib: float | None
    memory_gib: float | None


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise TutorialError(f"SHARD={text!r} is not k/N with 1 <= k <= N (for example SHARD=1/3)")
    return int(m.group(1)), int(m.group(2))


def recorded_cost(key: str) -> float:
    """Seconds a tutorial took in its newest recorded run (any machine), else the default."""
    try:
        docs = recorded(key)
    except TutorialError:
        docs = []
    return docs[-1].provenance.wall_time_s if docs else DEFAULT_COST_S


def split(costs: dict[str, float], n: int) -> list[list[str]]:
    """Longest-processing-time split of ``costs`` (name -> seconds) into ``n`` shards; stable."""
    shards: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    for name in sorted(costs, key=lambda s: (-costs[s], s)):
        i = min(range(n), key=lambda j: (load[j], j))
        shards[i].append(name)
        load[i] += costs[name]
    return [sorted(s) for s in shards]


def fits(card: Card, hw: Hardware, named: bool = False, stem: str = "") -> str:
    """'' when the tutorial fits this build's hardware, else why not (one line).  ``named``: the build names
    the tutorial (``TUTORIAL_ONLY``), which a card that a default CPU build leaves out asks for."""
    r = card.requires
    if not platform_for(hw.backend).accelerator:
        if not r.cpu:
            return "it cannot run on a CPU build (its card says cpu: false)"
        if hw.memory_gib is not None and hw.memory_gib < r.cpu_memory_gib:
            return f"it needs {r.cpu_memory_gib:g} GiB of RAM on a CPU build; this machine has {hw.memory_gib:g} GiB"
        if not r.cpu_by_default and not named:
            return ("its card leaves it to accelerators and to a CPU build that names it "
                    f"(make html TUTORIAL_ONLY={stem or card.key})")
        return ""
    if hw.devices < r.devices:
        return f"it needs {r.devices} {hw.backend} devices; this build sees {hw.devices}"
    if hw.device_memory_gib is not None and hw.device_memory_gib < r.device_memory_gib:
        return (f"it needs {r.device_memory_gib:g} GiB per device; this build's devices have "
                f"{hw.device_memory_gib:g} GiB")
    return ""


@dataclass
class Selection:
    execute: list[str]  # gallery file stems
    skipped: dict[str, str]  # stem -> why it is not executed here
    jobs: int = 1  # tutorials run at once (sphinx-gallery's parallel workers)

    def filename_pattern(self) -> str:
        if not self.execute:
            return r"^$"  # matches no file
        return r"/(" + "|".join(re.escape(s) for s in self.execute) + r")\.py$"


def select(hw: Hardware, only: str = "", shard: str | None = None, costs: dict[str, float] | None = None,
           assemble: bool = False) -> Selection:
    tuts = tutorials()
    chosen = tutorials(only=only) if only else tuts
    execute, skipped = [], {}
    parts = parse_shard(shard)
    mine = None
    if parts:
        k, n = parts
        cost = costs or {stem: recorded_cost(key) for stem, key in tuts.items()}
        mine = set(split({s: cost.get(s, DEFAULT_COST_S) for s in tuts}, n)[k - 1])
    for stem, key in tuts.items():
        if assemble:
            skipped[stem] = "this site was assembled from shards built on other runners"
        elif stem not in chosen:
            skipped[stem] = f"this build was limited to TUTORIAL_ONLY={only}"
        elif mine is not None and stem not in mine:
            skipped[stem] = f"it belongs to another shard than this build's ({shard})"
        else:
            why = fits(load_card(key), hw, named=bool(only), stem=stem)
            if why:
                skipped[stem] = why
            else:
                execute.append(stem)
    return Selection(execute, skipped)


def build_hardware(backend: str, env=None) -> Hardware:
    """This build's hardware, from the environment report (no device is initialised here)."""
    env = env if env is not None else describe_environment(backend)
    d = env.to_dict() if hasattr(env, "to_dict") else dict(env)
    devices = d.get("devices") or []
    mems = [x.get("memory_gib") for x in devices if x.get("memory_gib")]
    count = len(devices) if devices else (int(d.get("device_count") or 0) if platform_for(backend).accelerator else 0)
    return Hardware(backend, count, min(mems) if mems else None, d.get("memory_gib"))


