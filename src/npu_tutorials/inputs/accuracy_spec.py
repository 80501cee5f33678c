"""A card's engine-vs-reference checks (``accuracy``): their inputs, thresholds and split rule, validated when the
card loads (:mod:`npu_tutorials.inputs.cards`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..core.messages import N_
from ..core.model import FrozenModel


class LogitsThresholds(FrozenModel):
    nmse_pct_max: float = Field(gt=0)
    top1_pct_min: float = Field(ge=0, le=100)


class LogitsCheck(FrozenModel):
    prompts: list[str] = Field(min_length=1)
    thresholds: LogitsThresholds


class ConsistencyThresholds(FrozenModel):
    top1_pct_min: float = Field(ge=0, le=100)
    ppl_rel_diff_pct_max: float = Field(gt=0)
    cosine_min: float = Field(gt=0, le=1)
    kl_max: float = Field(gt=0)


class DerivedLimits(FrozenModel):
    """Which limits of a logits check come from a recorded bf16 floor (``results/methods/bf16-floor-<record>.json``,
    ``measure.floor.derive``) rather than from the report: the ones the report set on another quantity or not at
    all.  ``record`` is the card key whose real weights were measured."""

    record: str
    limits: list[Literal["ppl_rel_diff_pct_max", "cosine_min", "kl_max"]] = Field(min_length=1)

    @field_validator("limits")
    @classmethod
    def _logits_only_limits(cls, v: list[str]) -> list[str]:
        missing = [k for k in ("cosine_min", "kl_max") if k not in v]
        if missing:  # no report set these on logits: the Qwen-1_8B-Chat report's cosine was for hidden states
            raise ValueError(f"{', '.join(missing)} must be derived (a report's hidden-state figure is not a logits limit)")
        return v


class ConsistencyCheck(FrozenModel):
    """One forward pass over a fixed text, every position, engine vs reference; ``chat``: over the fp32 reference's
    greedy answer (``positions`` tokens) to ``text`` sent through the chat template, the positions chat judges."""

    text: str
    chat: bool = False
    positions: int | None = Field(default=None, ge=128)  # chat: the answer's length
    thresholds: ConsistencyThresholds
    derived: DerivedLimits


class QAItem(FrozenModel):
    prompt: str
    expected: list[str] = Field(min_length=1)


# The QA tables' titles a card may give (marked for the message catalog: the page shows them translated).
QA_TITLES = (N_("Chinese QA"), N_("English QA, written for this page"))


class QACheck(FrozenModel):
    items: list[QAItem] = Field(min_length=1)
    # what the questions are and where they come from (the page's table caption and the score's source)
    title: str = Field(default="Chinese QA", description="one of QA_TITLES")
    source: str = "the report's five questions (model card)"
    max_tokens: int = Field(gt=0)
    # text consistency's verdict: at least this many greedy answers identical to the reference's (default:
    # every one; the report fixed no threshold, and a lower one needs a reason that is not this build's result)
    text_exact_min: int | None = Field(default=None, ge=1)
    @property
    def exact_min(self) -> int:
        return len(self.items) if self.text_exact_min is None else self.text_exact_min


class TaskSize(FrozenModel):
    num_problems: int = Field(gt=0)
    max_tokens: int = Field(gt=0)


class GSMCheck(FrozenModel):
    seed: int = 42
    profiles: dict[Literal["full", "quick"], TaskSize]


class GreedyThresholds(FrozenModel):
    first_token_pct_min: float = Field(default=100.0, ge=0, le=100)
    mean_match_pct_min: float = Field(default=90.0, ge=0, le=100)


class GreedyCheck(FrozenModel):
    prompts: list[str] = Field(min_length=1)
    # more prompts sent through the model's chat template (a chat model's greedy answers), judged together
    chat_prompts: list[str] = []
    num_tokens: int = Field(gt=0)
    thresholds: GreedyThresholds = GreedyThresholds()


class Splits(FrozenModel):
    """When a split is bf16 rounding, for every check of the card (``measure.metrics.SplitRule``): the derivation of
    ``results/methods/bf16-floor-<record>.json`` (tests/test_floor.py).  A card without it excuses no split."""

    err_max: float = Field(ge=0)  # nats: the largest error rounding made on a contending pair
    rate_pct_max: float = Field(ge=0, le=100)  # % of positions: the near-tie rate's 95 % upper bound
    record: str


class Accuracy(FrozenModel):
    splits: Splits | None = None
    logits: LogitsCheck | None = None
    consistency: ConsistencyCheck | None = None
    chat_consistency: ConsistencyCheck | None = None
    qa: QACheck | None = None
    gsm: GSMCheck | None = None
    greedy: GreedyCheck | None = None
    known_deviations: dict[str, str] = {}  # "<section>: <check>" -> why its FAIL is known (the page shows it)
