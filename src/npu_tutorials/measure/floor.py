"""A model of bf16 rounding for logits: the limits of a check that compares logits, derived, not copied.

The Qwen-1_8B-Chat report set cosine > 0.9999 for *hidden states*; the pages compare *logits*, whose
rounding error is larger (the last hidden state times lm_head, over the whole vocabulary), and on a
trained model larger still.  So a logits check's limits are derived here from a measured floor: the
same checkpoint run by transformers in bf16 against transformers in fp32 on calibration texts, which
are not the texts the check judges.  That is bf16 arithmetic by another implementation than the
engine under test, so no engine, right or wrong, can move its own limit.

:func:`measure_floor` gives per text the mean cosine and mean KL over its positions and the text's perplexity difference
(the quantities the forward-consistency check judges), the largest error on a contending pair and the top-1 flips
(what a split must stay within, and how often rounding splits: ``metrics.SplitRule``), on plain texts and on chat
answers (the chat template and the reference's own greedy answer: the positions the chat checks judge).
:func:`derive` turns the worst of each into limits: :data:`FACTOR` times the floor for the averaged checks (room for
another implementation's accumulation order and fused kernels, far below a fault: the negative controls on the
methods page give the levels at which each check fails); for splits, the calibration's largest pair error itself
and the 95 % upper bound of its flip rate (no factor: a maximum over hundreds of positions and a confidence bound
already hold the room).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import metrics
from . import reference

FACTOR = 4.0
# Calibration texts: plain English of the kind the pages judge, none of them a text a check judges.
TEXTS = (
    "Water boils at one hundred degrees Celsius at sea level, and it freezes at zero degrees.",
    "The quick brown fox jumps over the lazy dog while the farmer watches from the barn.",
    "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar and oxygen.",
    "A train left the station at nine in the morning and reached the city two hours later.",
    "def square(x):\n    return x * x\n\nprint(square(4))",
)
# Calibration chat requests (sent through the chat template, answered by the fp32 reference), none a card's prompt.
CHAT_TEXTS = (
    "Tell me about the history of bread.",
    "How do bicycles stay upright?",
    "Describe a rainy afternoon in a small town.",
    "What should I pack for a weekend hike?",
    "Explain how a refrigerator keeps food cold.",
)
CHAT_TOKENS = 128  # the reference's answer to each: the positions a chat check judges


def measure_floor(path: str | Path, texts: tuple[str, ...] = TEXTS, chats: tuple[str, ...] = CHAT_TEXTS) -> list[dict]:
    """Per text: ``{"text", "chat", "positions", "ppl_rel_diff_pct", "mean_cosine", "mean_kl_nats", "max_nmse_pct",
    "max_pair_err", "flips"}`` of transformers bf16 against transformers fp32 on the checkpoint at ``path``: every
    position of each plain text; each chat request's answer positions (the fp32 reference's greedy answer)."""
    import torch
    from transformers import AutoModelForCausalLM

    reference.quiet_transformers()
    fp32 = reference.load_model(str(path))
    bf16 = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.bfloat16).eval()
    out = []
    try:
        for text, chat in [(t, False) for t in texts] + [(t, True) for t in chats]:
            ids = torch.tensor([reference.tokenize(path, text)])
            start = 0
            if chat:  # the reference's answer, as a chat consistency check generates it (no stop)
                prompt = reference.chat_ids(path, text)
                start = len(prompt) - 1
                ids = torch.tensor([prompt + reference.greedy(str(path), prompt, CHAT_TOKENS)])
            with torch.inference_mode():
                ref = fp32(ids).logits[0, start:].double().numpy()
                eng = bf16(ids).logits[0, start:].float().double().numpy()
            ids = ids[:, start:]
            rows = [metrics.compare_logits(e, r, "logits") for e, r in zip(eng, ref)]
            nxt = ids[0, 1:].tolist()  # the text's own next tokens: its perplexity under each side
            lp_e = [metrics.log_softmax(e)[t] for e, t in zip(eng, nxt)]
            lp_r = [metrics.log_softmax(r)[t] for r, t in zip(ref, nxt)]
            ppl_e, ppl_r = float(np.exp(-np.mean(lp_e))), float(np.exp(-np.mean(lp_r)))
            out.append({"text": text, "chat": chat, "positions": len(rows),
                        "ppl_rel_diff_pct": 100 * abs(ppl_e - ppl_r) / ppl_r,
                        "mean_cosine": float(np.mean([r["cosine"] for r in rows])),
                        "mean_kl_nats": float(np.mean([r["kl_nats"] for r in rows])),
                        "max_nmse_pct": float(max(r["nmse_pct"] for r in rows)),
                        "max_pair_err": float(max(r["pair_err"] for r in rows)),
                        "flips": int(sum(1 - r["top1_match"] for r in rows))})
    finally:
        del bf16
    return out


def _round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (a limit is never tighter than its derivation)."""
    if x <= 0:
        return x
    scale = 10 ** (digits - 1 - int(np.floor(np.log10(x))))
    return float(np.ceil(x * scale - 1e-9) / scale)


def _round_down(x: float, digits: int) -> float:
    scale = 10 ** digits
    return float(np.floor(x * scale + 1e-9) / scale)


def _averaged(rows: list[dict], factor: float) -> dict:
    gap = 1.0 - min(f["mean_cosine"] for f in rows)
    return {"ppl_rel_diff_pct_max": _round_up(factor * max(f["ppl_rel_diff_pct"] for f in rows)),
            "cosine_min": _round_down(1.0 - _round_up(factor * gap), 5),
            "kl_max": _round_up(factor * max(f["mean_kl_nats"] for f in rows))}


def derive(floor: list[dict], factor: float = FACTOR) -> dict:
    """The logits limits from a measured floor.  From the plain texts (the kind the forward-consistency check
    judges): ``ppl_rel_diff_pct_max`` = factor x the worst perplexity difference, ``cosine_min`` = 1 - factor x
    (1 - worst mean cosine), ``kl_max`` = factor x worst mean KL (each rounded to two significant digits of the
    allowed error, looser side); the same from the chat answers, prefixed ``chat_`` (the chat consistency check's).
    From every text, plain and chat: ``split_err_max`` = the largest pair error, ``split_rate_pct_max`` = the 95 %
    upper bound of the flip rate over every position (metrics.SplitRule)."""
    plain, chat = [f for f in floor if not f.get("chat")], [f for f in floor if f.get("chat")]
    if not plain:
        raise ValueError("no floor measured")
    return {**_averaged(plain, factor), **({f"chat_{k}": v for k, v in _averaged(chat, factor).items()} if chat else {}),
            "split_err_max": _round_up(max(f["max_pair_err"] for f in floor)),
            "split_rate_pct_max": _round_up(metrics.rate_upper_pct(sum(f["flips"] for f in floor),
                                                                   sum(f["positions"] for f in floor)))}
