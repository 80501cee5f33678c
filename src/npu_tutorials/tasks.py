"""Task-level checks: short QA with expected answers, and GSM-style word problems.

With stand-in (random) weights these pipelines still run end to end, but the
scores measure nothing about the model; tables say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TutorialError
from .tables import Table

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def qa_correct(output: str, expected: list[str]) -> bool:
    """Correct when any expected answer occurs in the output (case-insensitive)."""
    low = output.lower()
    return any(e.lower() in low for e in expected)


def last_number(text: str) -> str | None:
    """The final numeric answer: after '####' if present, else the last number in the text."""
    tail = text.split("####")[-1] if "####" in text else text
    nums = _NUM.findall(tail)
    return nums[-1].replace(",", "").rstrip(".") if nums else None


def gsm_correct(output: str, answer: str) -> bool:
    got = last_number(output)
    if got is None:
        return False
    try:
        return abs(float(got) - float(answer)) < 1e-6
    except ValueError:
        return False


@dataclass
class GSMProblem:
    question: str
    answer: str


GSM_INSTRUCTION = "Solve the problem step by step, then give the final number after '####'.\n\n"


def gsm_problems(n: int, seed: int) -> tuple[str, list[GSMProblem]]:
    """(source label, problems): real GSM8K when a hub is reachable, else reasoning-gym's GSM templates."""
    try:  # the real test split, only where a dataset hub answers
        from datasets import load_dataset  # type: ignore

        ds = load_dataset("openai/gsm8k", "main", split="test")
        probs = [GSMProblem(r["question"], r["answer"].split("####")[-1].strip().replace(",", ""))
                 for r in ds.select(range(n))]
        return "GSM8K test split, first problems (openai/gsm8k)", probs
    except Exception:
        pass
    try:
        import reasoning_gym
    except ImportError:
        raise TutorialError("no GSM8K hub and no offline set: pip install reasoning-gym") from None
    ds = reasoning_gym.create_dataset("gsm_symbolic", size=n, seed=seed)
    return (f"reasoning-gym gsm_symbolic (GSM8K-style templates, generated offline, seed {seed}); "
            "GSM8K itself is only reachable through a hub"), [GSMProblem(e["question"], str(e["answer"])) for e in ds]


def qa_table(items, outputs: list[str], real_weights: bool) -> tuple[Table, int]:
    rows, correct = [], 0
    for item, out in zip(items, outputs):
        ok = qa_correct(out, item.expected)
        correct += ok
        rows.append([item.prompt, " / ".join(item.expected), out, "correct" if ok else "wrong"])
    note = ("" if real_weights else
            "Stand-in (random) weights: this score measures nothing about the model; it shows the pipeline runs.")
    return Table(["question", "expected", "engine output", "result"], rows,
                 caption=f"Chinese QA: {correct} / {len(items)} correct", note=note), correct
