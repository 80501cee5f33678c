"""The methods page's figures: stand-in margins, negative controls and run-to-run repeatability.

The margins are read from this build's results documents; the controls and the
repeatability from scripts that ran the real engine (``scripts/negative_controls.py``,
``scripts/repeatability.py``) and wrote JSON with its provenance under
``results/methods/``.  This module renders them.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..record.results import recorded_dir
from ..core.errors import TutorialError
from ..inputs.cards import load_card
from .controls import check_digest, fault_flags, spec_for_card
from .noise import Noise, NoiseRecordError, limits_for, of_runs, read_noise_record

CHECK_NAMES = {"logits": "last-position logits", "consistency": "every-position consistency",
               "chat_consistency": "every-position consistency over a chat answer",
               "greedy": "greedy agreement", "text": "text consistency"}


def _load(name: str) -> dict | None:
    p = Path(recorded_dir()) / "methods" / name
    return json.loads(p.read_text()) if p.is_file() else None


def _prov(d: dict) -> str:
    p = d["provenance"]
    return (f"Recorded {p['date'][:10]} at commit `{p['git_commit'][:12]}`, {p['backend']} ({p['device']}), "
            f"{p['dtype']}, {p.get('weights', p['model'])}, vLLM {p['versions'].get('vllm')}.")


# -- how decisive the stand-ins are ------------------------------------------------------
def compared_positions(doc) -> list[tuple[float, float]]:
    """(reference top-1/top-2 gap, engine's largest |logit error|) at every position a results document
    compared over the whole vocabulary: last-position logits, every-position consistency, and the
    first generated token of each greedy or text row."""
    r = doc.results
    out = []
    if r.logits_agreement:
        out += [(x.reference_top2_margin, x.max_abs_err) for x in r.logits_agreement.rows]
    if r.forward_consistency:
        out += [(p.reference_top2_margin, p.max_abs_err) for p in r.forward_consistency.per_position]
    for sec in (r.greedy_agreement, r.text_consistency):
        if sec:
            out += [(x.first_token_error.reference_top2_margin, x.first_token_error.max_abs_err)
                    for x in sec.rows if x.first_token_error is not None]
    return out


def margins_markdown(docs: list) -> str:
    """Per model: the distribution of the reference's top-1/top-2 gap over the pages' compared positions,
    in units of the engine's largest logit error at the same position (this build's documents)."""
    rows = []
    for doc in docs:
        pos = compared_positions(doc)
        if not pos:
            continue
        ratios = sorted(g / e if e > 0 else float("inf") for g, e in pos)
        gaps = [g for g, _ in pos]
        errs = [e for _, e in pos]
        w = doc.provenance.weights
        rows.append(f"| {doc.model} | {'real' if w and w.kind == 'real' else 'stand-in'} | "
                    f"{doc.provenance.engine_dtype} | {len(pos)} | {statistics.median(gaps):.3g} | "
                    f"{statistics.median(errs):.3g} | {ratios[0]:.3g} | {statistics.median(ratios):.3g} | "
                    f"{sum(x <= 1 for x in ratios)} |")
    if not rows:
        return "*No tutorial of this build compared logits over the whole vocabulary.*"
    return "\n".join([
        "| model | weights | engine dtype | positions | median gap | median max \\|err\\| | smallest gap / error | "
        "median gap / error | near-ties (gap ≤ error) |", "|---|---|---|---|---|---|---|---|---|", *rows])


# -- bf16 floors (measure.floor) ---------------------------------------------------------
def floors_markdown() -> str:
    """Each recorded bf16 floor (``results/methods/bf16-floor-*.json``): per calibration text the floor, then
    the limits derived from it."""
    d = Path(recorded_dir()) / "methods"
    recs = [json.loads(p.read_text()) for p in sorted(d.glob("bf16-floor-*.json"))] if d.is_dir() else []
    if not recs:
        return "*No bf16 floor is recorded (run `scripts/bf16_floor.py <model>`).*"
    out = []
    for r in recs:
        p, k = r["provenance"], r["derived"]
        out += [f"**{r['model']}** ({p['weights']}; {p['date'][:10]}, commit {p['git_commit'][:10]}, "
                f"transformers {p['versions'].get('transformers')}): {r['method']}.", "",
                "| calibration text | kind | positions | perplexity difference (%) | mean cosine | mean KL (nats) | "
                "largest nMSE (%) | largest pair error (nats) | top-1 flips |", "|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {f['text'].splitlines()[0][:60]} | {'chat answer' if f.get('chat') else 'plain'} | "
                f"{f['positions']} | {f['ppl_rel_diff_pct']:.3f} | {f['mean_cosine']:.6f} | "
                f"{f['mean_kl_nats']:.5f} | {f['max_nmse_pct']:.3f} | {f['max_pair_err']:.3f} | {f['flips']} |"
                for f in r["floor"]]
        flips, positions = sum(f["flips"] for f in r["floor"]), sum(f["positions"] for f in r["floor"])
        out += ["", f"Derived from the plain texts ({r['factor']:g} × the floor): perplexity difference < "
                    f"{k['ppl_rel_diff_pct_max']} %, cosine > {k['cosine_min']}, KL < {k['kl_max']}.  From every "
                    f"text: the split rule, pair error <= {k['split_err_max']} nats (the largest above) and "
                    f"near-tie rate <= {k['split_rate_pct_max']} % (95 % upper bound of {flips} flips in "
                    f"{positions} positions).", ""]
    return "\n".join(out)


# -- negative controls -------------------------------------------------------------------
def _first(v) -> str:
    if v == "above baseline":
        return "not climbed (the check fails on the right one)"
    if isinstance(v, str) and v.startswith("above "):
        return f"not by {v[6:]} (the check had failed; not climbed further)"
    return "never" if v is None else ("already on the right one" if v == "baseline" else f"{v:g}")


def control_records() -> list[dict]:
    """Every recorded negative-control run (one per card), in name order."""
    d = Path(recorded_dir()) / "methods"
    return [json.loads(p.read_text()) for p in sorted(d.glob("negative-controls-*.json"))] if d.is_dir() else []


def stale_controls(records: list[dict] | None = None) -> list[str]:
    """One line per recorded control run whose check code or card thresholds differ from today's."""
    out = []
    for d in control_records() if records is None else records:
        key = d["provenance"]["model"]
        try:
            spec = spec_for_card(load_card(key), d["spec"].get("stop_ids"))
        except TutorialError:
            out.append(f"results/methods/negative-controls-{key}.json: no card {key!r} any more")
            continue
        if d.get("check_digest") != check_digest(spec):
            real = d["provenance"].get("weights_kind") == "real"
            out.append(f"results/methods/negative-controls-{key}{'-real' if real else ''}.json was recorded with "
                       f"other check code or thresholds than today's: re-run scripts/negative_controls.py {key}"
                       + (" --real" if real else ""))
    return out


def _engine_faults(faults: dict) -> list[str]:
    """The engine-only faults of a real-weights control run: each check's verdict, and the lines that failed; a
    fault the engine would not start with, its one line."""
    judged, refused = [f for f in faults.values() if "results" in f], []
    if not faults:
        return []
    checks = list(judged[0]["results"]) if judged else []
    out = ["Engine-only faults (the right weights, served with one flag that makes vLLM misread a config value, "
           "`--hf-overrides`, or keep fewer bits, `--kv-cache-dtype`; the fp32 reference keeps the true config and "
           "precision):", "", "| fault | server flags | " + " | ".join(CHECK_NAMES.get(c, c) for c in checks)
           + " |", "|---|---|" + "---|" * len(checks)]
    for name, f in faults.items():
        flags = " ".join(fault_flags(f))
        if "refused" in f:
            out.append(f"| {name} | `{flags}` | " + " | ".join(["not offered here"] * len(checks)) + " |")
            refused.append(f"*{name}*: the engine refused to start with it on the recording host: `{f['refused']}`.")
            continue
        if "died" in f:
            out.append(f"| {name} | `{flags}` | " + " | ".join(["FAIL: the engine failed a request"] * len(checks))
                       + " |")
            refused.append(f"*{name}*: the engine started, then failed while judged: `{f['died']}`.")
            continue
        cells = []
        for c in checks:
            r = f["results"].get(c)
            failed = [m["metric"] for m in r["checks"] if not m["passed"]] if r else []
            cells.append("–" if r is None else ("PASS" if r["passed"] else "FAIL: " + "; ".join(failed)))
        out.append(f"| {name} | `{flags}` | " + " | ".join(cells) + " |")
    return out + [""] + [r + "\n" for r in refused]


def _held_out(h: dict | None) -> list[str]:
    """The right engine's false alarms on prompts no card judges (checks.held_out)."""
    if not h:
        return []
    k, (lo, hi) = h["kinds"], h["interval_pct"]
    return [f"False alarms: the right checkpoint's greedy check on {h['prompts']} prompts that no card judges "
            f"(`npu_tutorials.checks.held_out`, plain and chat): {h['false_alarms']} row(s) whose split the rule "
            f"calls a fault, 95 % interval {lo:.1f}–{hi:.1f} % of rows; {k['near_tie_splits']} near-tie split(s) "
            f"excused; the verdict over all of them: {'PASS' if h['verdict']['passed'] else 'FAIL'} ("
            + "; ".join(f"{m['metric']} {m['measured']}" for m in h["verdict"]["checks"]) + ").", ""]


def negative_controls_markdown() -> str:
    records = control_records()
    if not records:
        return "*No negative-control run is recorded (run `scripts/negative_controls.py`).*"
    stale = set(stale_controls(records))
    out = []
    for d in records:
        key, fams = d["provenance"]["model"], d["families"]
        real = d["provenance"].get("weights_kind") == "real"
        name = f"negative-controls-{key}{'-real' if real else ''}.json"
        out += [f"### {key} ({d['provenance'].get('architecture', '')}{', real weights' if real else ''})", "",
                _prov(d), ""]
        mine = [s for s in stale if name in s]
        if mine:
            out += [f"**Stale:** {mine[0]}.", ""]
        out += ["| check | metric | threshold(s) | right checkpoint | "
                + " | ".join(f"{f}: first FAIL at rel" for f in fams) + " |",
                "|---|---|---|---|" + "---|" * len(fams)]
        blind = []
        for check, res in d["baseline"].items():
            for m in res["checks"]:
                firsts = [fams[f]["first_fail_by_metric"].get(check, {}).get(m["metric"]) for f in fams]
                out.append(f"| {CHECK_NAMES.get(check, check)} | {m['metric']} | {m['threshold']} | "
                           f"{'PASS' if m['passed'] else 'FAIL'} ({m['measured']}) | "
                           + " | ".join(_first(v) for v in firsts) + " |")
            blind += [f"{CHECK_NAMES.get(check, check)}: {f}" for f in fams if fams[f]["first_fail"].get(check) is None]
        out.append("")
        top = max(d["perturbation"]["ladder"])
        out.append(f"Faults no rung up to rel {top:g} made a check fail: {'; '.join(blind)}." if blind else
                   f"Every check fails under a fault of every family, at the rel shown (ladder up to {top:g}).")
        out.append("")
        out += _engine_faults(d.get("engine_faults") or {})
        out += _held_out(d.get("held_out"))
    return "\n".join(out)


def within_run_spread(runs: list[dict], figure: str) -> str:
    """Each run's interquartile range over its median for ``figure`` (over what the run's median is over):
    wide within a run, the median of a few samples jumps between runs; narrow, the runs themselves differ."""
    parts = []
    for run in runs:
        s = run.get("headline", {}).get(figure)
        if s and s.get("median") and s.get("q1") is not None and s.get("q3") is not None:
            parts.append(f"{100 * (s['q3'] - s['q1']) / s['median']:.0f} %")
    return ", ".join(parts) or "–"


def _sessions(runs: list[dict]) -> str:
    """``", over 2 days (2026-11-30: 5 runs, 2026-12-01: 5 runs)"`` where the runs carry dates from
    more than one day (``scripts/repeatability.py --append``), else ``""``."""
    days: dict[str, int] = {}
    for r in runs:
        if r.get("date"):
            days[r["date"][:10]] = days.get(r["date"][:10], 0) + 1
    if len(days) < 2:
        return ""
    return f", over {len(days)} days ({', '.join(f'{d}: {n} runs' for d, n in sorted(days.items()))})"


def repeatability_markdown() -> str:
    """Per repeatability record: each gated figure over the runs, how far apart and how wide within a run, and the
    limit for one run they support (what ``scripts/vs_site.py`` widens a reader's ordinary band by)."""
    d = Path(recorded_dir()) / "methods"
    paths = sorted(d.glob("repeatability-*.json")) if d.is_dir() else []
    if not paths:
        return "*No repeatability run is recorded (run `scripts/repeatability.py`).*"
    out = []
    for path in paths:
        try:
            rec = read_noise_record(path)
        except NoiseRecordError as exc:
            out += [f"*{exc}*", ""]
            continue
        p = rec["provenance"]
        gens, unrecorded = of_runs(rec["runs"])
        cpus = f" ({', '.join(sorted(gens))}{', some runs unrecorded' if unrecorded else ''})" if gens else ""
        out += [f"### {p['model']} on {p['machine_slug']}{cpus}, {p['profile']} profile, {p['dtype']}", "",
                f"Recorded {p['date'][:10]} at commit `{p['git_commit'][:12]}`, {p['backend']} ({p['device']}), "
                f"{p['weights']}; steps: {', '.join(rec['steps'])}; {len(rec['runs'])} independent runs"
                + _sessions(rec["runs"]) + ".", "",
                "| figure | each run's median | apart (max / min - 1) | within each run (IQR / median) | "
                "noise limit for one run | card's limit |", "|---|---|---|---|---|---|"]
        card = load_card(p["model"])
        limits, floors = limits_for(card, Noise(len(rec["runs"]), rec["headline_runs"], path.name)), limits_for(card)
        for k, v in rec["headline_runs"].items():
            out.append(f"| {k} | {', '.join(f'{x:.4g}' for x in v)} | {100 * (max(v) / min(v) - 1):.1f} % | "
                       f"{within_run_spread(rec['runs'], k)} | {limits[k]} | {floors[k]} |")
        out.append("")
    return "\n".join(out)
