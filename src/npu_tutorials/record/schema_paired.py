"""A paired comparison's document: two configurations measured alternately on one host, and per gated figure
the ratio within pairs with its confidence interval (:mod:`npu_tutorials.measure.paired`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.model import StrictModel
from .schema import Machine, WeightsInfo
from .schema_base import PairedRatio  # noqa: F401  (a comparison's ratios; shared with the tuning section)

PAIRED_SCHEMA = 1


class Side(StrictModel):
    """One configuration: the flags added to the page's serve command and the environment set for its server."""

    label: str
    flags: list[str] = []
    env: dict[str, str] = {}
    versions: dict[str, str | None] = Field({}, description="vLLM, vllm-ascend, torch as this side's run found them")
    code: str | None = Field(None, description="the commit whose code ran this side (make check GATE=1 PAIRED=<ref>); "
                                               "None: this checkout's, with the flags and environment above")
    python: str | None = Field(None, description="the interpreter that ran this side's server (``python:PATH``: another "
                                                 "virtualenv, so another vLLM or vllm-ascend), machine paths scrubbed; "
                                                 "None: this build's")
    image: str | None = Field(None, description="the container image that ran this side's server (``image:REF``); "
                                                "None: this host")


class Comparison(StrictModel):
    """``make compare``'s document: both sides' configuration and provenance, each round's figures per side in the
    order they ran, and the paired ratios."""

    schema_version: int = PAIRED_SCHEMA
    model: str
    built_at: str
    git_commit: str | None = None
    machine: Machine
    weights: WeightsInfo | None = Field(None, description="what both sides served (real with id and revision, or a stand-in)")
    profile: str
    steps: list[str] = Field(description="the page's gated steps each side ran per round")
    servers: Literal["shared", "fresh"] = Field(
        description="shared: one server per side for every round; fresh: a new server per side and round")
    a: Side
    b: Side
    order: list[str] = Field(description="the order the sides ran in each round: 'AB' or 'BA'; with a control, "
                                         "one of the six orders of 'ABC'")
    rounds_a: list[dict[str, float]]
    rounds_b: list[dict[str, float]]
    ratios: list[PairedRatio]
    rounds_c: list[dict[str, float]] = Field([], description="the control's rounds: side A run again (C), "
                                                             "make compare CONTROL=1; empty without one")
    control: list[PairedRatio] = Field([], description="the ratios C/A: two identical sides, what the host's noise "
                                                       "alone makes of a comparison in this session")
    warmup: bool = Field(False, description="one run of side A went first and was discarded (cold caches)")
    stopped: str | None = Field(None, description="why the comparison ended before the rounds it was asked for: "
                                                  "the document holds the rounds completed before (None: all ran)")
    wall_time_s: float | None = None
