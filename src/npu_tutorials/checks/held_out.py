"""False alarms: the right engine judged on prompts that no card judges.

A check that fails a right engine is as much a defect as one that passes a wrong one.  The greedy check (its
thresholds and the card's split rule) is run here on :data:`PLAIN` and :data:`CHAT`, fifty prompts written for
this purpose, none of them a card's or a calibration text: every row whose split the rule calls a fault is a
false alarm, counted with its 95 % interval (``scripts/negative_controls.py KEY --real`` records it beside the
faults, and the methods page shows it).
"""

from __future__ import annotations

from pathlib import Path

from ..engine.server import VLLMServer
from ..measure import consistency, metrics

PLAIN = (
    "The old lighthouse stood at the edge of the", "My grandmother always said that the secret to good soup is",
    "The train to Edinburgh leaves from platform", "In the middle of the forest there was a small",
    "The most important thing about learning a language is", "Every morning the baker opens his shop at",
    "The river flows slowly past the village and", "She opened the letter and read the first line:",
    "The recipe calls for two cups of flour and", "When the rain stopped, the children ran outside to",
    "The museum's newest exhibit shows paintings from", "A good night's sleep helps the body to",
    "The mountain path was steep, so we", "He bought a new bicycle because his old one",
    "The teacher wrote the answer on the", "During the winter, many birds fly south to",
    "The library is open from nine in the morning until", "To plant a tree, you first need to",
    "The city council decided to build a new", "Our cat likes to sleep on the",
    "The history of the printing press begins with", "The best way to save money is to",
    "At the top of the hill we could see", "The scientist looked through the microscope and saw",
    "for i in range(10):\n    print(",
)
CHAT = (
    "What is the boiling point of water in Fahrenheit?", "Name three animals that live in the ocean.",
    "How many legs does a spider have?", "What is the opposite of cold?", "Give me a synonym for happy.",
    "What colour are bananas when they are ripe?", "Which planet is closest to the sun?",
    "How many minutes are in an hour?", "Write one sentence about autumn.", "What do cows drink?",
    "What is the capital of Italy?", "Suggest a name for a pet goldfish.", "What is 12 plus 15?",
    "Describe a cat in three words.", "What language is spoken in Brazil?", "Why do we need to drink water?",
    "What is the largest animal on Earth?", "How do you say thank you in French?",
    "What is a triangle?", "Tell me a fun fact about the moon.", "What season comes after spring?",
    "What do plants need to grow?", "Who painted the Mona Lisa?", "What is the freezing point of water?",
    "Explain what a library is in one sentence.",
)


def false_alarms(server: VLLMServer, model: str, ref_path: str | Path, greedy, rule, vocab_size: int) -> dict:
    """The card's greedy check (``greedy``: its token count and thresholds; ``rule``: the card's split rule) on
    :data:`PLAIN` and :data:`CHAT` against the reference.  Returns ``{"prompts", "false_alarms" (rows whose split
    is a fault), "interval_pct" (its 95 % interval as a rate), "kinds", "verdict": {"passed", "checks"}}``."""
    rows = consistency.text_consistency(server, model, ref_path, list(PLAIN), greedy.num_tokens, chat=False,
                                        vocab_size=vocab_size)
    rows += consistency.text_consistency(server, model, ref_path, list(CHAT), greedy.num_tokens, chat=True,
                                         vocab_size=vocab_size)
    kinds = consistency.split_kinds(rows, rule)
    alarms = sum(k is not None and not metrics.excused(k) for k in kinds)
    v = consistency.greedy_verdict(rows, **greedy.thresholds.model_dump(), rule=rule)
    return {"prompts": len(rows), "false_alarms": alarms,
            "interval_pct": list(metrics.rate_interval_pct(alarms, len(rows))),
            "kinds": metrics.split_counts([k for k in kinds if k is not None]),
            "verdict": {"passed": v.passed, "checks": [{"metric": m, "measured": val, "threshold": th, "passed": ok}
                                                       for m, val, th, ok in v.checks]}}
