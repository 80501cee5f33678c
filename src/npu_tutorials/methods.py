"""The methods page's recorded figures: negative controls and run-to-run repeatability.

Both come from scripts that ran the real engine (``scripts/negative_controls.py``,
``scripts/repeatability.py``) and wrote JSON with its provenance; the files
under ``results/methods/`` are those outputs, and this module renders them.
"""

from __future__ import annotations

import json
from pathlib import Path

from .results import recorded_dir

CHECK_NAMES = {"logits": "last-position logits", "consistency": "every-position consistency",
               "greedy": "greedy agreement", "text": "text consistency"}
THRESHOLDS = {"logits": "logits_thresholds", "consistency": "consistency_thresholds", "greedy": "greedy_thresholds",
              "text": "text_exact_min"}


def _load(name: str) -> dict | None:
    p = Path(recorded_dir()) / "methods" / name
    return json.loads(p.read_text()) if p.is_file() else None


def _prov(d: dict) -> str:
    p = d["provenance"]
    return (f"Recorded {p['date'][:10]} at commit `{p['git_commit'][:12]}`, {p['backend']} ({p['device']}), "
            f"{p['dtype']}, {p['model']}, vLLM {p['versions'].get('vllm')}.")


def negative_controls_markdown() -> str:
    d = _load("negative-controls-tiny.json")
    if d is None:
        return "*No negative-control run is recorded (run `scripts/negative_controls.py`).*"
    pert = d["perturbation"]
    out = [_prov(d), "",
           f"Perturbation: `{pert['tensor']}` becomes {pert['definition'].replace('*', '×')}; "
           f"ladder of rel: {', '.join(f'{x:g}' for x in pert['ladder'])}.  Each rung is served by its own "
           "engine and compared with the fp32 reference of the unperturbed checkpoint, on the prompts and "
           "thresholds in the table (the tutorials' cards' thresholds, except every-position top-1, at 80 % "
           "where Qwen-1_8B-Chat's card asks 99 %: near-ties flip a 2-layer random model's top tokens).", "",
           "| check | its thresholds here | on the right checkpoint | smallest rel that says FAIL | "
           "which metric fails first |", "|---|---|---|---|---|"]
    base = d["baseline"]
    for check, rel in d["first_fail"].items():
        by_metric = {m: r for m, r in d["first_fail_by_metric"][check].items() if r is not None}
        first = min(by_metric.values()) if by_metric else None
        metrics = ", ".join(m for m, r in by_metric.items() if r == first) or "–"
        ok = base.get(check, {}).get("passed")
        t = d["spec"].get(THRESHOLDS.get(check, ""), "–")
        t = ", ".join(f"{k} {v:g}" for k, v in t.items()) if isinstance(t, dict) else f"at least {t} identical"
        out.append(f"| {CHECK_NAMES.get(check, check)} | {t} | {'PASS' if ok else 'FAIL'} | "
                   f"{'never' if rel is None else f'{rel:g}'} | {metrics} |")
    for check, rel in d["first_fail"].items():
        again = [r["rel"] for r in d["rungs"] if rel is not None and r["rel"] > rel
                 and r["results"].get(check, {}).get("passed")]
        if again:
            out += ["", f"{CHECK_NAMES.get(check, check).capitalize()} passes again at rel "
                        f"{', '.join(f'{x:g}' for x in again)}: on random weights its verdict is decided at "
                        "near-ties, so it is not monotone in the size of the fault."]
    out += ["", "Realized perturbations are smaller than asked for at the bottom of the ladder: the tensor is "
                "bfloat16, which rounds small noise away (rel 1e-4 became "
                f"{d['rungs'][0]['perturbation']['realized_rel']:.1e})."]
    return "\n".join(out)


def repeatability_markdown() -> str:
    d = _load("repeatability-qwen2.5-0.5b.json")
    if d is None:
        return "*No repeatability run is recorded (run `scripts/repeatability.py`).*"
    out = [_prov(d), "", f"Two runs of the same measurements against freshly started servers; tolerance "
           f"{100 * d['tolerance']:.0f} %: {'met' if d['within_tolerance'] else 'not met'}.", "",
           "| figure | run-to-run difference |", "|---|---|"]
    out += [f"| {k} | {100 * v:.1f} % |" for k, v in d["relative_differences"].items()]
    return "\n".join(out)
