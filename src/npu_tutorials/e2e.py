"""vllm-ascend-style e2e accuracy test configs (``tests/e2e/models/configs/*.yaml``), from the card.

The config records what ran in this build (hardware, shots, limit); the
expected value is the figure reported in the original evaluation, cited as
such, since vllm-ascend's runner compares a real checkpoint's score with it.
"""

from __future__ import annotations

import yaml

from .cards import Card


def e2e_config(card: Card, doc=None) -> str:
    s = card.serve
    ref = card.hub.huggingface or card.hub.modelscope
    gsm = card.reported.figures.get("gsm8k", {})
    ran = doc.results.gsm if doc is not None else None
    hardware = doc.provenance.device if doc is not None else card.reported.hardware
    limit = ran.total if ran is not None else int(gsm.get("total", 20))
    data = {
        "model_name": ref.id,
        "hardware": hardware,
        "serve": {"tensor_parallel_size": s.tensor_parallel_size, "dtype": s.dtype, "max_model_len": s.max_model_len,
                  "gpu_memory_utilization": s.gpu_memory_utilization or 0.9,
                  "trust_remote_code": s.trust_remote_code},
        "tasks": [{"name": "gsm8k", "metrics": [
            {"name": "exact_match,strict-match", "value": round(gsm.get("accuracy_pct", 0) / 100, 4)}]}],
        "num_fewshot": 0,
        "limit": limit,
    }
    lines = [f"# e2e accuracy config for {card.name}, in vllm-ascend's tests/e2e/models/configs format.",
             f"# hardware, num_fewshot and limit are what this build ran ({hardware}; zero-shot with a",
             f"# step-by-step instruction; {limit} problems).",
             f"# The expected value is cited from the original evaluation ({card.reported.source},",
             f"# {card.reported.hardware}; its number of shots is not stated there), not measured by this site;",
             "# vllm-ascend's runner passes a metric within 5 % (relative) of it.",
             ]
    if s.trust_remote_code:
        lines.append(f"# {card.architecture} with remote code runs only on vLLM / vllm-ascend <= 0.23; newer "
                     "images serve the converted checkpoint (see the tutorial).")
    if ran is not None:
        lines.insert(3, f"# This build's own score on {ran.source.split(';')[0]}: {ran.correct}/{ran.total}"
                        + ("" if ran.meaningful_for_model_quality else " (stand-in weights: meaningless)") + ".")
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
