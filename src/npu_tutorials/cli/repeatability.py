"""Between-run noise of a model's gated headline figures, measured with the tutorial's own steps.

  python scripts/repeatability.py qwen2.5-0.5b [--runs 5] [--out-dir results/methods]
  python scripts/repeatability.py qwen2.5-0.5b --tiny --runs 2 --out-dir /tmp/x    # the test stand-in

Each run is an independent build of the page's headline figures
(:func:`npu_tutorials.record.headline.headline_figures`): a fresh ``Tutorial`` of the
card, its weights, its own server, then the steps its page runs for those
figures (:func:`npu_tutorials.record.headline.gated_steps`: the benchmark at the
report's conditions with the card's repeats, or the concurrency sweep and the
roofline), in a scratch build folder (:func:`npu_tutorials.tutorial.remeasure.measure_gated`,
which each side of the paired gate runs too).  Writes
``repeatability-<model>-<machine slug>.json``: every run's headline figures
(it prints, and the methods page shows, how far apart they are and the noise
limit for one run they support, :func:`npu_tutorials.checks.noise.limits_for`,
which ``scripts/vs_site.py`` widens a reader's ordinary band by).  A record is
used only with at least ``noise.MIN_RUNS`` runs.
"""

import argparse
import json
import time
from pathlib import Path

from . import ROOT, command, serve_tiny
from ..checks import noise
from ..core.errors import TutorialError
from ..inputs.cards import load_card
from ..record.headline import gated_steps, headline_figures
from ..record.results import git_commit, now_utc, write_record
from ..tutorial.remeasure import measure_gated


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a card key")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tiny", action="store_true", help="the card's 2-layer test stand-in instead of its own")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "methods")
    ap.add_argument("--append", action="store_true",
                    help="add these runs to the record already there for the same machine kind, model, profile and "
                         "dtype (runs of another day or host: the spread between sessions joins the noise)")
    a = ap.parse_args()

    if a.runs < (1 if a.append else 2):
        raise TutorialError("--runs must be at least 2, or 1 with --append (noise is a difference between runs)")
    card = load_card(a.model)
    if a.tiny:
        serve_tiny(card)

    steps = gated_steps(card)
    runs, first = [], None
    for i in range(a.runs):
        t0 = time.monotonic()
        doc = measure_gated(card.key)
        figs = headline_figures(doc)
        first = first or doc.provenance
        runs.append({"headline": {k: {**f.stat.model_dump(), "over": f.over} for k, f in figs.items()},
                     "date": doc.provenance.built_at,
                     "commit": doc.provenance.git_commit, "cpu_id": doc.provenance.machine.cpu_id,
                     "wall_s": round(time.monotonic() - t0, 1)})
        print(f"run {i + 1}/{a.runs}: " + "; ".join(f.short() for f in figs.values()), flush=True)
    out = a.out_dir / f"repeatability-{card.key}-{first.machine.record_stem}.json"
    if a.append and out.is_file():
        try:
            earlier = noise.earlier_runs(json.loads(out.read_text()), slug=first.machine.slug, model=card.key,
                                        profile=first.profile, dtype=first.engine_dtype, steps=steps, name=out.name)
        except (noise.NoiseRecordError, ValueError) as exc:
            raise TutorialError(str(exc)) from None
        runs = earlier + runs
        print(f"appended to the {len(earlier)} runs of {out.name}", flush=True)
    keys = sorted(set.intersection(*(set(r["headline"]) for r in runs)))
    values = {k: [r["headline"][k]["median"] for r in runs] for k in keys}
    limits = noise.limits_for(card, noise.Noise(len(runs), values, "these runs")) if len(runs) > 1 else {}
    p = first
    w = p.weights
    doc = {
        "schema": 2,
        "provenance": {"date": now_utc(), "git_commit": git_commit(), "backend": p.backend, "device": p.device,
                       "dtype": p.engine_dtype, "machine_slug": p.machine.slug, "model": card.key,
                       "profile": p.profile, "versions": p.machine.versions,
                       "weights": w.label if w else "–", "tiny": a.tiny},
        "steps": steps,
        "runs": runs,
        "headline_runs": values,  # the data; the methods page and vs_site derive the limits from it
    }
    a.out_dir.mkdir(parents=True, exist_ok=True)
    write_record(doc, out)
    for k in keys if limits else []:
        v = values[k]
        print(f"{k:20s} runs {min(v):.4g}..{max(v):.4g} ({100 * (max(v) / min(v) - 1):.1f} % apart): noise limit for "
              f"one run {limits[k]} (card {noise.limits_for(card)[k]})")
    print(f"wrote {out}")
    return 0


main = command(run)  # scripts/repeatability.py and npu-tutorials-repeatability
