"""vllm-ascend-style e2e accuracy test configs (``tests/e2e/models/configs/*.yaml``), from the card."""

from __future__ import annotations

import yaml

from .cards import Card


def e2e_config(card: Card) -> str:
    s = card.serve
    ref = card.hub.modelscope or card.hub.huggingface
    gsm = card.reported.figures.get("gsm8k", {})
    doc = {
        "model_name": (card.hub.huggingface or ref).id,
        "hardware": "Atlas A2 Series",
        "serve": {"tensor_parallel_size": s.tensor_parallel_size, "dtype": s.dtype, "max_model_len": s.max_model_len,
                  "gpu_memory_utilization": s.gpu_memory_utilization or 0.9,
                  "trust_remote_code": s.trust_remote_code},
        "tasks": [{"name": "gsm8k", "metrics": [
            {"name": "exact_match,strict-match", "value": round(gsm.get("accuracy_pct", 0) / 100, 4)}]}],
        "num_fewshot": 5,
        "limit": int(gsm.get("total", 20)),
    }
    head = (f"# e2e accuracy config for {card.name}, in vllm-ascend's tests/e2e/models/configs format.\n"
            f"# Expected values are the figures reported in the original evaluation ({card.reported.source}),\n"
            "# not measured by this site; the runner passes a metric within 5 % (relative) of them.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
