"""Negative controls: serve a WRONG checkpoint and show that each check says FAIL.

A check that cannot fail proves nothing.  Each engine-vs-reference check
(last-position logits, every-position consistency, greedy agreement, text
consistency) is run with the engine serving a deliberately wrong checkpoint —
the right one with one tensor perturbed by a stated relative amount
(:func:`perturb_checkpoint`), or a stand-in drawn with another seed — against
the fp32 reference of the right checkpoint.  :func:`run_checks` returns every
check's verdict; ``scripts/negative_controls.py`` walks a ladder of
perturbations to find the smallest one each check detects.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from . import accuracy, consistency
from .cards import ConsistencyCheck, LogitsCheck
from .errors import TutorialError
from .server import VLLMServer

MARKER = "PERTURBED.json"
# relative RMS of the perturbation of one layer's MLP down-projection
LADDER = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0)
CHECKS = ("logits", "consistency", "greedy", "text")


def down_proj_name(config: dict, layer: int = 0) -> str:
    """The MLP down-projection of ``layer`` in the checkpoint's own naming."""
    if not 0 <= layer < config["num_hidden_layers"]:
        raise ValueError(f"layer {layer} is not in 0..{config['num_hidden_layers'] - 1}")
    if "kv_channels" in config:  # first-generation QWen: c_proj(w1(x) * silu(w2(x)))
        return f"transformer.h.{layer}.mlp.c_proj.weight"
    return f"model.layers.{layer}.mlp.down_proj.weight"


# Tensor families, by name in either layout (Qwen2's and first-generation QWen's).
FAMILIES = {
    "embedding/head": r"(embed_tokens|wte|lm_head)\.weight$",
    "attention": r"\.(self_attn|attn)\.",
    "mlp": r"\.mlp\.",
    "norms": r"(layernorm|\.ln_\d|ln_f|model\.norm)\.weight$",
}


def family_tensors(names, family: str) -> list[str]:
    """The tensors of ``family`` (a key of :data:`FAMILIES`) among ``names``, sorted."""
    import re

    if family not in FAMILIES:
        raise TutorialError(f"unknown tensor family {family!r}; known: {', '.join(FAMILIES)}")
    return sorted(n for n in names if re.search(FAMILIES[family], n))


def perturb_checkpoint(src: str | Path, dst: str | Path, *, rel: float, tensor: str | None = None,
                       family: str | None = None, layer: int = 0, seed: int = 0) -> dict:
    """Copy the checkpoint folder ``src`` to ``dst`` with tensors perturbed: each becomes
    ``w + rel * rms(w) * N(0, 1)`` (noise from one ``torch.Generator().manual_seed(seed)``, tensors
    in name order), saved in the tensor's own dtype.  ``family`` perturbs every tensor of that family
    (:data:`FAMILIES`) in every layer; otherwise ``tensor``, which defaults to :func:`down_proj_name`
    of ``layer``.

    Returns (and writes to ``dst/PERTURBED.json``) ``{"source", "family", "tensors", "tensor", "rel",
    "realized_rel", "seed", "dtype", "rms", "shape"}``; ``realized_rel`` is rms(new - old) / rms(old)
    after the cast back to the tensor's dtype, pooled over the perturbed tensors (bf16 rounds small
    perturbations partly away); ``tensor``, ``rms`` and ``shape`` describe the first one.
    """
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    if rel < 0 or not math.isfinite(rel):
        raise ValueError("rel must be a finite number >= 0")
    config = json.loads((src / "config.json").read_text())
    shards = {}
    for f in sorted(src.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            shards.update({k: f for k in st.keys()})
    if family is not None:
        names = family_tensors(shards, family)
        if not names:
            raise TutorialError(f"{src} has no tensor of the family {family!r}")
    else:
        names = [tensor or down_proj_name(config, layer)]
        if names[0] not in shards:
            raise TutorialError(f"{src} has no tensor {names[0]!r}")
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    touched = {shards[n] for n in names}
    for f in src.iterdir():
        if f.is_file() and f not in touched and f.name not in ("STANDIN.json", MARKER):
            shutil.copyfile(f, dst / f.name)
    gen = torch.Generator().manual_seed(seed)
    first: dict = {}
    num = den = 0.0
    for shard in sorted(touched):
        tensors = load_file(str(shard))
        with safe_open(str(shard), "pt") as st:
            metadata = st.metadata()
        for name in sorted(n for n in names if shards[n] == shard):
            w = tensors[name]
            w32 = w.float()
            rms = float(w32.pow(2).mean().sqrt())
            noise = torch.randn(w.shape, generator=gen, dtype=torch.float32) * (rel * rms)
            new = (w32 + noise).to(w.dtype).contiguous()
            num += float((new.float() - w32).pow(2).sum())
            den += rms * rms * w.numel()
            tensors[name] = new
            first = first or {"tensor": name, "dtype": str(w.dtype).removeprefix("torch."), "rms": rms,
                              "shape": list(w.shape)}
        save_file(tensors, str(dst / shard.name), metadata=metadata or {"format": "pt"})
    meta = {"source": str(src), "family": family, "tensors": names, "rel": rel,
            "realized_rel": math.sqrt(num / den) if den else 0.0, "seed": seed, **first}
    (dst / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


@dataclass
class ControlSpec:
    """What each check runs and the thresholds its verdict uses."""

    logits_prompts: list[str]
    logits_thresholds: dict  # LogitsThresholds: nmse_pct_max, top1_pct_min
    consistency_text: str
    consistency_thresholds: dict  # ConsistencyThresholds: top1_pct_min, ppl_rel_diff_pct_max, cosine_min, kl_max
    greedy_prompts: list[str]
    greedy_tokens: int
    greedy_thresholds: dict  # first_token_pct_min, mean_match_pct_min
    text_prompts: list[str]
    text_tokens: int
    text_exact_min: int
    text_chat: bool = True
    stop_ids: list[int] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _verdict_dict(v, figures: dict) -> dict:
    return {"passed": v.passed, "checks": [{"metric": m, "measured": val, "threshold": th, "passed": ok}
                                           for m, val, th, ok in v.checks], "figures": figures}


def run_checks(server: VLLMServer, model: str, ref_path: str | Path, spec: ControlSpec, vocab_size: int,
               only: tuple[str, ...] = CHECKS, keep_reports: bool = False) -> dict[str, dict]:
    """Run the checks named in ``only`` with the engine behind ``server`` against the reference at
    ``ref_path``.  Returns ``{check: {"passed": bool, "checks": [{"metric", "measured", "threshold",
    "passed"}], "figures": {...}}}`` for check in ``logits``, ``consistency``, ``greedy``, ``text``;
    with ``keep_reports`` each also holds ``"report"``: the LogitsReport, ConsistencyReport or
    list of TextRow it came from (not JSON-able)."""
    out: dict[str, dict] = {}
    reports: dict[str, object] = {}
    if "logits" in only:
        rep = accuracy.logits_agreement(server, model, ref_path,
                                        LogitsCheck(prompts=spec.logits_prompts, thresholds=spec.logits_thresholds),
                                        vocab_size, real_weights=False)
        out["logits"], reports["logits"] = _verdict_dict(rep.verdict(), rep.summary), rep
    if "consistency" in only:
        rep = consistency.forward_consistency(server, model, ref_path,
                                              ConsistencyCheck(text=spec.consistency_text,
                                                               thresholds=spec.consistency_thresholds),
                                              vocab_size, real_weights=False)
        d = rep.to_dict()
        d.pop("per_position")
        out["consistency"], reports["consistency"] = _verdict_dict(rep.verdict(), d), rep
    if "greedy" in only:
        rows = consistency.text_consistency(server, model, ref_path, spec.greedy_prompts, spec.greedy_tokens,
                                            chat=False, vocab_size=vocab_size)
        out["greedy"] = _verdict_dict(consistency.greedy_verdict(rows, **spec.greedy_thresholds),
                                      consistency.greedy_summary(rows))
        reports["greedy"] = rows
    if "text" in only:
        rows = consistency.text_consistency(server, model, ref_path, spec.text_prompts, spec.text_tokens,
                                            chat=spec.text_chat, stop_ids=spec.stop_ids, vocab_size=vocab_size,
                                            measure_errors=False)
        out["text"] = _verdict_dict(consistency.text_verdict(rows, exact_min=spec.text_exact_min),
                                    {"exact": sum(r.exact for r in rows), "total": len(rows),
                                     "mean_similarity": sum(r.similarity for r in rows) / len(rows)})
        reports["text"] = rows
    if keep_reports:
        for k, rep in reports.items():
            out[k]["report"] = rep
    return out


# Thresholds for the checks no card states yet (greedy agreement, text consistency).
GREEDY_THRESHOLDS = {"first_token_pct_min": 100.0, "mean_match_pct_min": 90.0}


def default_spec(stop_ids: list[int] | None = None) -> ControlSpec:
    """The tutorials' own checks: logits (Qwen2.5-0.5B card), every-position consistency and the
    chat texts (Qwen-1_8B-Chat card), greedy prompts (palmyra-mini card), with the cards' thresholds
    and :data:`GREEDY_THRESHOLDS`; text consistency must reproduce every text exactly."""
    from .cards import load_card

    q05, q18, pal = load_card("qwen2.5-0.5b"), load_card("qwen-1_8b-chat"), load_card("palmyra-mini")
    texts = [i.prompt for i in q18.accuracy.qa.items]
    return ControlSpec(
        logits_prompts=list(q05.accuracy.logits.prompts),
        logits_thresholds=q05.accuracy.logits.thresholds.model_dump(),
        consistency_text=q18.accuracy.consistency.text,
        consistency_thresholds=q18.accuracy.consistency.thresholds.model_dump(),
        greedy_prompts=list(pal.accuracy.greedy.prompts), greedy_tokens=pal.accuracy.greedy.num_tokens,
        greedy_thresholds=dict(GREEDY_THRESHOLDS),
        text_prompts=texts, text_tokens=q18.accuracy.qa.max_tokens, text_exact_min=len(texts), stop_ids=stop_ids,
        notes=["thresholds: logits from cards/qwen2.5-0.5b.yaml, consistency from cards/qwen-1_8b-chat.yaml, "
               "greedy from controls.GREEDY_THRESHOLDS, text: every text identical"])


def tiny_spec(stop_ids: list[int] | None = None) -> ControlSpec:
    """A small set for tests on the tiny stand-in (few full-vocabulary requests: each costs ~2 s
    on 2 cores).  Thresholds as :func:`default_spec`, except every-position top-1 >= 80 %: random
    weights make near-ties, and a flip at one of 6 positions is a tie, not a fault (the
    per-position margins say which)."""
    return ControlSpec(
        logits_prompts=["The capital of France is", "def fibonacci(n):"],
        logits_thresholds={"nmse_pct_max": 1.0, "top1_pct_min": 100.0},
        consistency_text="The capital of France is Paris.",
        consistency_thresholds={"top1_pct_min": 80.0, "ppl_rel_diff_pct_max": 1.0, "cosine_min": 0.9999,
                                "kl_max": 0.001},
        greedy_prompts=["Hello, how are you?", "The capital of France is"], greedy_tokens=8,
        greedy_thresholds=dict(GREEDY_THRESHOLDS),
        text_prompts=["中国的首都是？", "Translate Hello"], text_tokens=8, text_exact_min=2, stop_ids=stop_ids,
        notes=["tiny stand-in set (controls.tiny_spec)"])


def first_failures(baseline: dict, rungs: list[dict]) -> tuple[dict, dict]:
    """From ladder results: ``({check: smallest rel whose verdict is FAIL, or None}, {check: {metric:
    smallest rel at which that metric alone fails, or None}})``.  A check or metric that already
    fails on the right checkpoint maps to ``"baseline"``."""
    checks = {c: None for c in baseline}
    metrics_ = {c: {m["metric"]: None for m in baseline[c]["checks"]} for c in baseline}
    for c, res in baseline.items():
        if not res["passed"]:
            checks[c] = "baseline"
        for m in res["checks"]:
            if not m["passed"]:
                metrics_[c][m["metric"]] = "baseline"
    for rung in rungs:
        for c, res in rung["results"].items():
            if checks.get(c) is None and not res["passed"]:
                checks[c] = rung["rel"]
            for m in res["checks"]:
                if metrics_[c].get(m["metric"]) is None and not m["passed"]:
                    metrics_[c][m["metric"]] = rung["rel"]
    return checks, metrics_


def run_ladder(serve: Callable[[Path], VLLMServer], right: Path, ref_path: Path, spec: ControlSpec,
               model: str, vocab_size: int, workdir: Path, *, ladder: tuple[float, ...] = LADDER, layer: int = 0,
               seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """The right checkpoint, then each rung of ``ladder`` (one server each, ``serve(path)`` starts it),
    until every metric of every check has failed once.  A check whose metrics have all failed is not
    run again.  ``None`` in the first-failure maps: no FAIL up to the ladder's top.

    Returns ``{"baseline": run_checks(...), "rungs": [{"rel", "perturbation": perturb_checkpoint(...),
    "results": run_checks(...)}], "first_fail": {...}, "first_fail_by_metric": {...}}``."""
    def checks_on(path: Path, only: tuple[str, ...]) -> dict:
        with serve(path) as srv:
            return run_checks(srv, model, ref_path, spec, vocab_size, only)

    def still_pending(rungs_: list[dict]) -> tuple[str, ...]:
        _, by_metric = first_failures(baseline, rungs_)
        return tuple(c for c in CHECKS if any(v is None for v in by_metric[c].values()))

    baseline = checks_on(right, CHECKS)
    log("right checkpoint: " + ", ".join(f"{c} {'PASS' if r['passed'] else 'FAIL'}" for c, r in baseline.items()))
    rungs: list[dict] = []
    pending = still_pending(rungs)
    for rel in ladder:
        if not pending:
            break
        dst = Path(workdir) / f"rel{rel:g}"
        meta = perturb_checkpoint(right, dst, rel=rel, layer=layer, seed=seed)
        res = checks_on(dst, pending)
        shutil.rmtree(dst, ignore_errors=True)
        rungs.append({"rel": rel, "perturbation": meta, "results": res})
        log(f"rel {rel:g} (realized {meta['realized_rel']:.3g}): "
            + ", ".join(f"{c} {'PASS' if r['passed'] else 'FAIL'}" for c, r in res.items()))
        pending = still_pending(rungs)
    first, by_metric = first_failures(baseline, rungs)
    return {"baseline": baseline, "rungs": rungs, "first_fail": first, "first_fail_by_metric": by_metric}
