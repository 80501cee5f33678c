"""vllm-ascend-style e2e accuracy test configs (``tests/e2e/models/configs/*.yaml``), from the card.

The config records what ran in this build (hardware, shots, limit); the
expected value is the figure reported in the original evaluation, cited as
such, since vllm-ascend's runner compares a real checkpoint's score with it.
"""

from __future__ import annotations

import yaml

from ..engine import devices
from ..engine.platform import platform_for
from ..inputs.cards import Card
from ..core.errors import TutorialError


def hardware_series(doc=None) -> str:
    """vllm-ascend's ``hardware`` label of the build's NPU family; for a build elsewhere (or none), that of
    the family the copy-paste commands' image targets (Atlas A2)."""
    soc = doc.provenance.machine.soc if doc is not None and platform_for(doc.provenance.backend).ascend else None
    try:
        return devices.npu_family(int(soc)).series
    except (TypeError, ValueError, TutorialError):  # no SoC recorded, or a chip vllm-ascend refuses
        return devices.FAMILY["a2"].series


def e2e_config(card: Card, doc=None) -> str:
    s = card.serve
    ref = card.hub.huggingface or card.hub.modelscope
    gsm = card.reported.figures.get("gsm8k", {})
    ran = doc.results.gsm if doc is not None else None
    ran_on = doc.provenance.device if doc is not None else None
    hardware = hardware_series(doc)
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
        # the build asks through /v1/chat/completions: the chat template applies (vllm-ascend's default,
        # set explicitly as its configs do)
        "apply_chat_template": True,
        "limit": limit,
    }
    lines = [f"# e2e accuracy config for {card.name}, in vllm-ascend's tests/e2e/models/configs format.",
             f"# hardware is vllm-ascend's series label ({hardware}"
             + (f"; this build ran on {ran_on}" if ran_on else "") + "); num_fewshot and limit are what this",
             f"# build ran (zero-shot with a step-by-step instruction, chat template applied; {limit} problems).",
             f"# The expected value is cited from the original evaluation ({card.reported.source},",
             f"# {card.reported.hardware}; its number of shots is not stated there), not measured by this site;",
             "# vllm-ascend's runner passes a metric within 5 % (relative) of it.",
             ]
    if s.trust_remote_code:
        lines.append(f"# {card.architecture} with remote code needs vLLM <= 0.23.0 and is in no vllm-ascend support "
                     "list or test; the tutorial serves the converted checkpoint.")
    if ran is not None:
        lines.insert(3, f"# This build's own score on {ran.source.split(';')[0]}: {ran.correct}/{ran.total}"
                        + ("" if ran.meaningful_for_model_quality else " (stand-in weights: meaningless)") + ".")
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
