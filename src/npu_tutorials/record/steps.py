"""The names of the steps a tutorial times (``results.costs``), as messages: the tutorial stores each with its
fields (``Message.of(steps.BENCH, repeats=3, prompts=16)``), and a page shows it in its language.  A document
written before stored the English name; :func:`as_message` reads it back into its message and fields where a name
below matches it, so an old document's steps are shown translated too."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ..core.messages import N_
from ..core.model import StrictModel
from .schema_base import Message

ENVIRONMENT = N_("environment")
DEVICE_LEASE = N_("device lease")
WEIGHTS = N_("weights (find, download or build the stand-in)")
CONVERT = N_("convert {arch} to {target}")
SERVER_START = N_("server start")
SERVER_RESTART = N_("server restart in {dtype} for the {role} steps")
SERVER_START_KNOB = N_("server start, {name}")
SERVER_START_TINY = N_("server start, tiny model, graph mode")
OFFLINE_EXAMPLE = N_("offline example (vllm.LLM in its own process)")
BENCH = N_("vllm bench serve ({repeats} runs of {prompts} requests)")
INPUT_LENGTH_SWEEP = N_("input-length sweep")
CONCURRENCY_SWEEP = N_("concurrency sweep")
BANDWIDTH = N_("bandwidth probe")
TRANSFORMERS_BASELINE = N_("transformers baseline, batch {sizes} (the same prompts, lengths, dtype, device)")
TUNING = N_("tuning: {name}{mode}")
TUNING_OVERHEAD = N_("tuning: fixed overhead on a tiny model of the same architecture")
LOGITS = N_("logits agreement ({n} prompts, fp32 reference)")
CHAT_CONSISTENCY = N_("chat consistency (every position of a {n}-token answer)")
CONSISTENCY = N_("forward consistency (every position)")
FUNCTIONAL = N_("functional request, greedy, engine beside the fp32 reference ({n} tokens)")
TEXT = N_("text consistency ({n} chat prompts, greedy)")
GSM = N_("GSM-style problems ({n}, greedy, up to {max_tokens} tokens)")
GREEDY = N_("greedy agreement ({n} prompts x {tokens} tokens)")
# steps of older builds, which recorded documents still list
CHAT_REQUEST = N_("chat request")
FUNCTIONAL_CHECK = N_("functional check")

NAMES = (ENVIRONMENT, DEVICE_LEASE, WEIGHTS, CONVERT, SERVER_START, SERVER_RESTART, SERVER_START_KNOB, SERVER_START_TINY, OFFLINE_EXAMPLE, BENCH, INPUT_LENGTH_SWEEP, CONCURRENCY_SWEEP, BANDWIDTH, TRANSFORMERS_BASELINE, TUNING, TUNING_OVERHEAD, LOGITS, CHAT_CONSISTENCY, CONSISTENCY, FUNCTIONAL, TEXT, GSM, GREEDY, CHAT_REQUEST,
         FUNCTIONAL_CHECK)


def _pattern(msgid: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", msgid)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*)" for i, p in enumerate(parts)) + "$")


PATTERNS = [(m, _pattern(m)) for m in NAMES]


def as_message(name: str) -> Message:
    """A step's English name as its message and fields, or a message of the name alone (a step a gallery script
    named itself: ``tut.step("...")``)."""
    for msgid, pattern in PATTERNS:
        hit = pattern.match(name)
        if hit:
            return Message.of(msgid, **hit.groupdict())
    return Message.of(name)


def _read(value: Any) -> Any:
    return as_message(value) if isinstance(value, str) else value


StepName = Annotated[Message, BeforeValidator(_read)]  # a document written before stored the English name


class StepCost(StrictModel):
    """One top-level step of a run and its wall time (``results.costs``)."""

    step: StepName = Field(description="the step's name, as a message (as_message reads an older document's)")
    seconds: float
