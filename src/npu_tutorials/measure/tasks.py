"""Task-level checks: short QA with expected answers, and GSM-style word problems.

With stand-in weights these pipelines still run end to end, but the scores
measure nothing about the model; tables say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import TutorialError

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


# An answer counts only where it is not negated or hedged just before it ("not yellow", "isn't Paris", "maybe 7",
# "不是北京"): these words within the three words (English) or two characters (Chinese) before the match.
NEGATIONS = ("not", "no", "never", "neither", "nor", "isn't", "aren't", "wasn't", "maybe", "perhaps", "possibly")
NEGATIONS_ZH = ("不", "没", "非", "或许", "可能")


def _negated(low: str, start: int) -> bool:
    before = low[:start]
    words = re.findall(r"[a-z']+", before)[-3:]
    if any(w in NEGATIONS or w.endswith("n't") for w in words):
        return True
    return any(n in before[-3:] for n in NEGATIONS_ZH)


def qa_correct(output: str, expected: list[str]) -> bool:
    """Correct when any expected answer occurs in the output (case-insensitive) as a whole: a number not as part
    of another number ("0" is not in "-18.0"), a word not inside another word ("Au" is not in "Australia"); an
    answer in a script without word spaces (Chinese) as a substring; and not negated or hedged just before it
    (:data:`NEGATIONS`: "The banana is not yellow" does not answer "yellow")."""
    low = output.lower()
    for e in expected:
        e = e.lower().strip()
        if re.fullmatch(r"[\d.,]+", e):
            pattern = rf"(?<![\d.,-]){re.escape(e)}(?![\d]|[.,]\d)"
        elif re.fullmatch(r"[\w' -]+", e, flags=re.ASCII):
            pattern = rf"(?<!\w){re.escape(e)}(?!\w)"
        else:
            pattern = re.escape(e)
        if any(not _negated(low, m.start()) for m in re.finditer(pattern, low)):
            return True
    return False


def last_number(text: str) -> str | None:
    """The final numeric answer: after '####' if present, else the last number in the text."""
    tail = text.split("####")[-1] if "####" in text else text
    nums = _NUM.findall(tail)
    return nums[-1].replace(",", "").rstrip(".") if nums else None


def _expected_number(answer: str) -> float:
    try:
        return float(str(answer).replace(",", "").strip())
    except ValueError:
        raise TutorialError(f"the expected GSM answer {answer!r} is not a number: the problem set is "
                            "malformed, so its score would be wrong") from None


def gsm_correct(output: str, answer: str) -> bool:
    """Whether the output's final number equals the expected answer.  An output without a number
    is wrong; an expected answer that is not a number raises (a scoring error must surface)."""
    expected = _expected_number(answer)
    got = last_number(output)
    if got is None:
        return False
    return abs(float(got) - expected) < 1e-6


@dataclass
class GSMProblem:
    question: str
    answer: str


GSM_INSTRUCTION = "Solve the problem step by step, then give the final number after '####'.\n\n"


def gsm_request(model: str, question: str, max_tokens: int) -> dict:
    """The ``/v1/chat/completions`` body that asks one GSM-style problem, greedily."""
    return {"model": model, "messages": [{"role": "user", "content": GSM_INSTRUCTION + question}],
            "temperature": 0.0, "max_tokens": max_tokens}


@dataclass
class GSMSet:
    """One problem set, generated once and passed on (score and show the same problems)."""

    source: str
    problems: list[GSMProblem]
    seed: int
    hub: bool  # True: the real GSM8K test split; False: the offline fallback
    fallback_reason: str | None = None  # why the hub split was not used (None when it was)

    def to_dict(self) -> dict:
        return {"source": self.source, "num_problems": len(self.problems), "seed": self.seed, "hub": self.hub,
                "fallback_reason": self.fallback_reason}


def _offline_errors() -> tuple[type[BaseException], ...]:
    """The failures that mean "no hub here": no network, offline mode, nothing cached.

    (ConnectionError and TimeoutError are OSErrors; requests' and huggingface_hub's connection
    and offline-mode errors derive from them.)"""
    errs: list[type[BaseException]] = [OSError]
    try:
        from datasets.exceptions import DatasetNotFoundError  # type: ignore

        errs.append(DatasetNotFoundError)  # raised offline when nothing is cached
    except ImportError:
        pass
    return tuple(errs)


def _load_hub_gsm8k(n: int) -> list[GSMProblem]:
    from datasets import load_dataset  # type: ignore

    ds = load_dataset("openai/gsm8k", "main", split="test")
    return [GSMProblem(r["question"], r["answer"].split("####")[-1].strip().replace(",", ""))
            for r in ds.select(range(n))]


def gsm_set(n: int, seed: int, *, fallback: str | None = "") -> GSMSet:
    """Real GSM8K (first ``n`` test problems) where a dataset hub answers, else reasoning-gym's
    GSM8K-style templates (``n`` problems, ``seed``).  Only the expected offline failures fall back
    (``datasets`` not installed, no connection, offline mode, nothing cached); ``fallback_reason``
    records which.  Any other error surfaces.  ``fallback=None`` forbids the fallback (a build with
    real weights, or one to publish, must score GSM8K itself); its string says why in the error."""
    try:
        problems = _load_hub_gsm8k(n)
        return GSMSet("GSM8K test split, first problems (openai/gsm8k)", problems, seed, True)
    except ImportError as exc:
        if exc.name != "datasets":  # a broken installation is not "offline"
            raise
        reason = "the datasets package is not installed"
    except _offline_errors() as exc:
        reason = f"the dataset hub is not reachable ({type(exc).__name__}: {str(exc)[:200]})"
    if fallback is None:
        raise TutorialError(f"GSM8K is not available ({reason}), and a build with real weights or one to publish "
                            "scores GSM8K itself, not a generated stand-in set: make the openai/gsm8k dataset "
                            "reachable (or cached under HF_DATASETS_CACHE) and build again")
    try:
        import reasoning_gym
    except ImportError:
        raise TutorialError(f"no GSM8K ({reason}) and no offline set: pip install reasoning-gym") from None
    ds = reasoning_gym.create_dataset("gsm_symbolic", size=n, seed=seed)
    problems = [GSMProblem(e["question"], str(e["answer"])) for e in ds]
    for p in problems:
        _expected_number(p.answer)  # a malformed answer fails here, not as a silent 'wrong'
    return GSMSet(f"reasoning-gym gsm_symbolic (GSM8K-style templates, generated offline, seed {seed}); "
                  "GSM8K itself is only reachable through a hub", problems, seed, False, reason)
