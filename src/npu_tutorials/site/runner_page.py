"""Generated parts of the runner guide (``docs/source/runner.md``): which image and which chips per device
family.  Everything comes from :data:`npu_tutorials.engine.devices.NPU_FAMILIES` and :mod:`npu_tutorials.engine.commands`,
the same facts the CI workflow, the preflight image check and the copy-paste set use."""

from __future__ import annotations

from ..engine import commands as C
from ..engine.devices import NPU_FAMILIES


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
