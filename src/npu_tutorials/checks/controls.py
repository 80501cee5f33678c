"""Negative controls: serve a WRONG checkpoint and show that each check says FAIL.

A check that cannot fail proves nothing.  Each engine-vs-reference check
(last-position logits, every-position consistency, greedy agreement, text
consistency) is run with the engine serving a deliberately wrong checkpoint —
the right one with the tensors of one family (embedding/head, attention, MLP,
norms) perturbed by a stated relative amount (:func:`perturb_checkpoint`) —
against the fp32 reference of the right checkpoint, with the cards' own check
objects (:func:`spec_for_card`): the pages' prompts and thresholds.
:func:`run_checks` returns every check's verdict; ``scripts/negative_controls.py``
walks a ladder of perturbations per family to find the smallest one each check
detects, and which faults a check cannot see.
"""

from __future__ import annotations

import json
import math
import shutil
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
import hashlib
import inspect
import re

from ..measure import accuracy, consistency
from ..inputs.accuracy_spec import ConsistencyCheck, GreedyCheck, LogitsCheck, QACheck
from ..core.errors import TutorialError
from ..engine.server import VLLMServer
from ..record.results import scrub
from ..measure import metrics, reference

MARKER = "PERTURBED.json"
# relative RMS of the perturbation of every tensor of one family: steps of about 3x
LADDER = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0)
CHECKS = ("logits", "consistency", "chat_consistency", "greedy", "text")


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
    meta = {"source": scrub(str(src)), "family": family, "tensors": names, "rel": rel,
            "realized_rel": math.sqrt(num / den) if den else 0.0, "seed": seed, **first}
    (dst / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


@dataclass
class ControlSpec:
    """The checks to run: the cards' own check objects (the pages' prompts and thresholds)."""

    logits: LogitsCheck | None = None
    consistency: ConsistencyCheck | None = None
    chat_consistency: ConsistencyCheck | None = None
    greedy: GreedyCheck | None = None
    text: QACheck | None = None           # text consistency: its chat prompts, tokens and exact_min
    stop_ids: list[int] | None = None
    source: str = ""                      # which cards it came from, and how it was trimmed
    splits: object = None                 # the card's split rule (accuracy.splits); None: no split is excused

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(c for c in CHECKS if getattr(self, c) is not None)

    def to_dict(self) -> dict:
        # a check's inputs and thresholds; where its limits came from (consistency.derived) is not an input
        out = {c: getattr(self, c).model_dump(exclude={"derived"} if "consistency" in c else None)
               for c in self.checks}
        if self.text is not None:
            out["text"]["exact_min"] = self.text.exact_min
        splits = self.splits.model_dump(exclude={"record"}) if self.splits is not None else None
        return {**out, "splits": splits, "stop_ids": self.stop_ids, "source": self.source}


def spec_for_card(card, stop_ids: list[int] | None = None) -> ControlSpec:
    """Every engine-vs-reference check ``card`` declares, with its prompts and thresholds (the same
    objects the card's page uses)."""
    a = card.accuracy
    return ControlSpec(logits=a.logits, consistency=a.consistency, chat_consistency=a.chat_consistency,
                       greedy=a.greedy, text=a.qa, stop_ids=stop_ids, source=f"cards/{card.key}.yaml", splits=a.splits)


def _verdict_dict(v, figures: dict) -> dict:
    return {"passed": v.passed, "checks": [{"metric": m, "measured": val, "threshold": th, "passed": ok}
                                           for m, val, th, ok in v.checks], "figures": figures}


def run_checks(server: VLLMServer, model: str, ref_path: str | Path, spec: ControlSpec, vocab_size: int,
               only: tuple[str, ...] | None = None, keep_reports: bool = False) -> dict[str, dict]:
    """Run the checks of ``spec`` (those named in ``only``, default all) with the engine behind
    ``server`` against the reference at ``ref_path``, with the same functions and verdicts as the
    pages.  Returns ``{check: {"passed": bool, "checks": [{"metric", "measured", "threshold",
    "passed"}], "figures": {...}}}``; with ``keep_reports`` each also holds ``"report"``: the
    LogitsReport, ConsistencyReport or list of TextRow it came from (not JSON-able)."""
    only = spec.checks if only is None else tuple(c for c in only if c in spec.checks)
    out: dict[str, dict] = {}
    reports: dict[str, object] = {}
    if "logits" in only:
        rep = accuracy.logits_agreement(server, model, ref_path, spec.logits, vocab_size, False, spec.splits)
        out["logits"], reports["logits"] = _verdict_dict(rep.verdict(), rep.summary), rep
    for c in ("consistency", "chat_consistency"):
        if c in only:
            rep = consistency.forward_consistency(server, model, ref_path, getattr(spec, c), vocab_size, False,
                                                  spec.splits)
            d = rep.to_dict()
            d.pop("per_position")
            out[c], reports[c] = _verdict_dict(rep.verdict(), d), rep
    if "greedy" in only:
        g = spec.greedy
        rows = consistency.text_consistency(server, model, ref_path, g.prompts, g.num_tokens, chat=False,
                                            vocab_size=vocab_size)
        if g.chat_prompts:
            rows += consistency.text_consistency(server, model, ref_path, g.chat_prompts, g.num_tokens, chat=True,
                                                 vocab_size=vocab_size)
        out["greedy"] = _verdict_dict(consistency.greedy_verdict(rows, **g.thresholds.model_dump(), rule=spec.splits),
                                      consistency.greedy_summary(rows, spec.splits))
        reports["greedy"] = rows
    if "text" in only:
        t = spec.text
        rows = consistency.text_consistency(server, model, ref_path, [i.prompt for i in t.items], t.max_tokens,
                                            chat=True, stop_ids=spec.stop_ids, vocab_size=vocab_size)
        out["text"] = _verdict_dict(consistency.text_verdict(rows, exact_min=t.exact_min, rule=spec.splits),
                                    {"exact": sum(r.exact for r in rows), "total": len(rows),
                                     "mean_similarity": sum(r.similarity for r in rows) / len(rows)})
        reports["text"] = rows
    if keep_reports:
        for k, rep in reports.items():
            out[k]["report"] = rep
    return out


def first_failures(baseline: dict, rungs: list[dict], top: float | None = None) -> tuple[dict, dict]:
    """From ladder results: ``({check: smallest rel whose verdict is FAIL, or None}, {check: {metric:
    smallest rel at which that metric alone fails, or None}})``.  A check or metric that already
    fails on the right checkpoint maps to ``"baseline"``.  A metric that had not failed when its check stopped
    climbing (:func:`run_ladder` stops a check at its first failed verdict) maps to ``"above <rel>"``, the last
    rung the check ran (``"above baseline"`` for a check that failed on the right one), unless that rung is the
    ladder's ``top``: not "never"."""
    checks = {c: None for c in baseline}
    metrics_ = {c: {m["metric"]: None for m in baseline[c]["checks"]} for c in baseline}
    last: dict = {c: "baseline" for c in baseline}
    for c, res in baseline.items():
        if not res["passed"]:
            checks[c] = "baseline"
        for m in res["checks"]:
            if not m["passed"]:
                metrics_[c][m["metric"]] = "baseline"
    for rung in rungs:
        for c, res in rung["results"].items():
            last[c] = rung["rel"]
            if checks.get(c) is None and not res["passed"]:
                checks[c] = rung["rel"]
            for m in res["checks"]:
                if metrics_[c].get(m["metric"]) is None and not m["passed"]:
                    metrics_[c][m["metric"]] = rung["rel"]
    for c, by in metrics_.items():
        if checks[c] is not None and last[c] == checks[c] and last[c] != top:
            for m, v in by.items():
                if v is None:
                    by[m] = f"above {last[c]:g}" if isinstance(last[c], float) else f"above {last[c]}"
    return checks, metrics_


def config_faults(config: dict) -> dict[str, dict]:
    """Engine-only faults: config values an engine could misread, each as the ``--hf-overrides`` that makes vLLM
    read it so while the fp32 reference keeps the true config: ``{name: {"override": ...}}`` for those ``config``
    has."""
    out: dict[str, dict] = {}
    rope = config.get("rope_parameters") or (
        {"rope_type": "default", "rope_theta": config["rope_theta"]} if config.get("rope_theta") else None)
    if rope and rope.get("rope_theta"):
        out["RoPE base / 10"] = {"override": {"rope_parameters": {**rope, "rope_theta": rope["rope_theta"] / 10}}}
        out["RoPE read as linear scaling x 2"] = {
            "override": {"rope_parameters": {**rope, "rope_type": "linear", "factor": 2.0}}}
    if config.get("rms_norm_eps"):
        out["norm epsilon x 1000"] = {"override": {"rms_norm_eps": config["rms_norm_eps"] * 1000}}
    return out


# precision faults: the engine keeps fewer bits than the page's dtype where the CPU engine offers it (vLLM's CPU
# attention stores the KV cache in fp8 on x86 with AVX-512 or AMX, vllm/v1/attention/backends/cpu_attn.py
# _get_attn_isa; elsewhere it refuses to start, and the record says so)
PRECISION_FAULTS = {"KV cache in fp8 (e4m3)": {"args": ["--kv-cache-dtype", "fp8_e4m3"]},
                    "KV cache in fp8 (e5m2)": {"args": ["--kv-cache-dtype", "fp8_e5m2"]}}


def fault_flags(fault: dict) -> tuple[str, ...]:
    """The server flags of an engine fault (``{"override": --hf-overrides JSON, "args": [flags]}``)."""
    return (*(("--hf-overrides", json.dumps(fault["override"])) if fault.get("override") else ()),
            *fault.get("args", ()))


def refusal(message: str) -> str:
    """One line of a server's failed start: the first error its log's tail shows, the root cause (vLLM's engine
    core prints it before the API server's "RuntimeError: Engine core initialization failed. See root cause
    above."), else the message's first line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\b\w*(Error|Exception): ", ln)]
    return (errors[0] if errors else lines[0] if lines else "refused")[:300]


def run_engine_faults(serve: Callable[..., VLLMServer], right: Path, ref_path: Path, spec: ControlSpec, model: str,
                      vocab_size: int, faults: dict[str, dict], log: Callable[[str], None] = print) -> dict:
    """Each engine-only fault of ``faults`` (``{name: {"override", "args"}}``, :func:`config_faults`,
    :data:`PRECISION_FAULTS`): the right checkpoint served with its flags (``serve(path, flags)``), every check of
    ``spec``.  Returns ``{name: {**fault, "results": run_checks(...)}}``, or ``{**fault, "refused": why}`` where the
    engine would not start with it (one line: the fault is not offered there), or ``{**fault, "died": why}`` where
    it started and then failed a request (every page would fail loudly on it)."""
    out = {}
    for name, fault in faults.items():
        flags = " ".join(fault_flags(fault))
        with ExitStack() as stack:
            try:  # only the start is a refusal
                srv = stack.enter_context(serve(right, fault_flags(fault)))
            except TutorialError as exc:
                out[name] = {**fault, "refused": refusal(str(exc))}
                log(f"{name} ({flags}): the engine refused it: {out[name]['refused']}")
                continue
            try:
                res = run_checks(srv, model, ref_path, spec, vocab_size)
            except TutorialError as exc:  # it started, then failed a request: a page would fail loudly too
                out[name] = {**fault, "died": refusal(str(exc))}
                log(f"{name} ({flags}): the engine failed while judged: {out[name]['died']}")
                continue
        out[name] = {**fault, "results": res}
        log(f"{name} ({flags}): " + ", ".join(f"{c} {'PASS' if r['passed'] else 'FAIL'}" for c, r in res.items()))
    return out


def run_ladder(serve: Callable[[Path], VLLMServer], right: Path, ref_path: Path, spec: ControlSpec,
               model: str, vocab_size: int, workdir: Path, *, ladder: tuple[float, ...] = LADDER,
               families: tuple[str, ...] = tuple(FAMILIES), seed: int = 0,
               log: Callable[[str], None] = print) -> dict:
    """The right checkpoint, then for each tensor family each rung of ``ladder`` (one server each,
    ``serve(path)`` starts it), until every check's verdict has failed once for that family.  A check
    whose verdict has failed is not run again for that family (its metrics that had not failed by then read
    ``"above <rel>"``: :func:`first_failures`; climbing on until every metric fails doubled a real-weights
    run, for lines such as a near-tie count that no fault size moves).  ``None`` in the first-failure maps:
    no FAIL up to the ladder's top.

    Returns ``{"baseline": run_checks(...), "families": {family: {"rungs": [{"rel", "perturbation":
    perturb_checkpoint(...), "results": run_checks(...)}], "first_fail": {...},
    "first_fail_by_metric": {...}}}}``."""
    def checks_on(path: Path, only: tuple[str, ...]) -> dict:
        with serve(path) as srv:
            return run_checks(srv, model, ref_path, spec, vocab_size, only)

    def still_pending(rungs_: list[dict]) -> tuple[str, ...]:
        first, _ = first_failures(baseline, rungs_, max(ladder))
        return tuple(c for c in spec.checks if first[c] is None)

    baseline = checks_on(right, spec.checks)
    log("right checkpoint: " + ", ".join(f"{c} {'PASS' if r['passed'] else 'FAIL'}" for c, r in baseline.items()))
    out: dict = {}
    for family in families:
        rungs: list[dict] = []
        pending = still_pending(rungs)
        for rel in ladder:
            if not pending:
                break
            dst = Path(workdir) / f"{family.replace('/', '-')}-rel{rel:g}"
            meta = perturb_checkpoint(right, dst, rel=rel, family=family, seed=seed)
            res = checks_on(dst, pending)
            shutil.rmtree(dst, ignore_errors=True)
            rungs.append({"rel": rel, "perturbation": meta, "results": res})
            log(f"{family} rel {rel:g} (realized {meta['realized_rel']:.3g}): "
                + ", ".join(f"{c} {'PASS' if r['passed'] else 'FAIL'}" for c, r in res.items()))
            pending = still_pending(rungs)
        first, by_metric = first_failures(baseline, rungs, max(ladder))
        out[family] = {"rungs": rungs, "first_fail": first, "first_fail_by_metric": by_metric}
    return {"baseline": baseline, "families": out}


def _check_code() -> list:
    """What the checks compute: every function and class that turns engine and reference outputs into a
    verdict (their source, not their module's, so moving them between modules keeps a record current)."""
    return [metrics.compare_logits, metrics.topk_ids, metrics.top1, metrics.topk_agreement, metrics.agrees,
            metrics.decisive_top1, metrics.position_error, metrics.split_kind, metrics.excused,
            metrics.split_counts, metrics.split_checks, consistency.split_kinds, metrics.top2_margin, metrics.sequence_match,
            metrics.near_tie_allowance, metrics.rate_upper_pct, consistency.judged_positions,
            metrics.normalized_mse_pct, metrics.cosine, metrics.kl_divergence, metrics.log_softmax,
            metrics.logsumexp, metrics.logits_form, metrics.comparable,
            accuracy.engine_last_logits, accuracy.one_form, accuracy.LogitsReport, accuracy.logits_agreement,
            consistency.engine_greedy, consistency.ConsistencyReport, consistency.forward_consistency,
            consistency.TextRow, consistency.similarity, consistency.text_consistency, consistency.greedy_summary,
            consistency.greedy_verdict, consistency.text_verdict, reference.greedy_along,
            reference.argmax_continuation, run_checks, perturb_checkpoint, family_tensors]


def check_digest(spec: ControlSpec) -> str:
    """A digest of the check code (:func:`_check_code`'s sources, and the tensor families) and of the spec's
    thresholds and inputs: a recorded control run whose digest differs from today's measured other checks."""
    h = hashlib.sha256()
    for obj in _check_code():
        h.update(inspect.getsource(obj).encode())
    h.update(json.dumps(FAMILIES, sort_keys=True).encode())
    h.update(json.dumps(spec.to_dict(), sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()[:16]
