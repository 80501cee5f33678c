"""Is B faster than A on this host?  Two configurations of a model's page, measured alternately.

  make compare MODEL=qwen3-0.6b A="--max-num-seqs 16" B="--max-num-seqs 4"
  make compare MODEL=qwen3-0.6b A="" B="VLLM_CPU_OMP_THREADS_BIND=0" K=8 SERVERS=shared
  make compare MODEL=smollm2-135m-instruct A="" B="--max-num-seqs 8" K=12 CONTROL=1
  make compare MODEL=qwen3-0.6b A="" B="python:/opt/vllm-next/bin/python"   (an upgrade: another venv's vLLM)
  make compare MODEL=qwen3-0.6b A="image:quay.io/ascend/vllm-ascend:v0.23.0" B="image:quay.io/ascend/vllm-ascend:v0.25.1rc1"
  python scripts/compare.py qwen3-0.6b --a="" --b="--max-num-seqs 4" [--k 6] [--control] [--tiny] [--out FILE]

A side is what ``A=`` / ``B=`` hold: ``NAME=value`` words set its server's environment, a ``python:PATH``
word runs its server under another interpreter (another virtualenv: another vLLM or vllm-ascend), an
``image:REF`` word in another container image (:mod:`npu_tutorials.engine.container`; this build's client
measures both sides alike), the other words are vLLM flags added after the page's serve command (empty: the page's
server as it is).  ``k`` rounds each run
the page's gated steps (its benchmark at the report's conditions, or its concurrency sweep and roofline) once
per side, the side going first alternating, on a fresh server per side and round (``--servers shared``: one
server per side, both started first, for every round; cheaper, but the difference between those two starts
then counts as the sides'), and judge each headline
figure by its ratio B/A within the rounds: the median, an exact 95 % interval, and "B better", "B worse" or
"no measurable change" (:mod:`npu_tutorials.measure.paired`).  ``--control`` runs A a second time per
round and judges that copy against A as well: this host's false alarms, in this session.  Prints the table
and writes the document (``_build/compare/<model>-<time>.json`` by default; the rounds so far go to
``<document>.partial.json`` after each round, so a long comparison cut short keeps them; a round that fails
after 2 or more ends it with the document of the rounds before, its ``stopped`` saying why, and exit 1), which the methods
page explains and ``npu_tutorials.views.paired`` draws.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sys
from pathlib import Path

from . import ROOT, command, serve_tiny
from ..core.errors import TutorialError
from ..inputs.cards import load_card
from ..measure.paired import ROUNDS_95, ROUNDS_DEFAULT
from ..record.results import now_utc, scrub, write_record
from ..record.schema_paired import Side
from ..tutorial.remeasure import SERVERS, measure_paired
from ..views.paired import paired_table

ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PYTHON_WORD = "python:"
IMAGE_WORD = "image:"


def parse_side(label: str, text: str) -> tuple[Side, str | None]:
    """``"python:/opt/vllm-next/bin/python VLLM_X=1 --max-num-seqs 4"`` as a side and the interpreter that runs
    its server (None: this build's): a ``python:PATH`` or an ``image:REF`` word (where its server runs),
    environment words anywhere, flags the rest."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        raise TutorialError(f"side {label}: {text!r} is not a shell word list: {exc}") from None
    pythons = [w[len(PYTHON_WORD):] for w in words if w.startswith(PYTHON_WORD)]
    images = [w[len(IMAGE_WORD):] for w in words if w.startswith(IMAGE_WORD)]
    words = [w for w in words if not w.startswith((PYTHON_WORD, IMAGE_WORD))]
    if len(pythons) + len(images) > 1:
        raise TutorialError(f"side {label}: one python:PATH or image:REF word at most (where its server runs)")
    if images and not images[0]:
        raise TutorialError(f"side {label}: image: names no image (image:quay.io/ascend/vllm-ascend:<tag>)")
    python = pythons[0] if pythons else None
    if python is not None:
        found = shutil.which(python)
        if found is None:
            raise TutorialError(f"side {label}: python:{python} is not an interpreter this host can run "
                                "(give the path of another virtualenv's bin/python)")
        python = str(Path(found).absolute())  # a virtualenv's python is a link: keep its path, not the target
    env = dict(w.split("=", 1) for w in words if ENV_WORD.match(w))
    flags = [w for w in words if not ENV_WORD.match(w)]
    if flags and not flags[0].startswith("-"):
        raise TutorialError(f"side {label}: {flags[0]!r} is neither NAME=value, python:PATH, image:REF nor a "
                            "vLLM flag (--...)")
    return Side(label=label, flags=flags, env=env, python=scrub(python) if python else None,
                image=images[0] if images else None), python


def run() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a card key")
    ap.add_argument("--a", default="", help="side A: NAME=value words and vLLM flags (default: the page's server)")
    ap.add_argument("--b", default="", help="side B, likewise")
    ap.add_argument("--k", type=int, default=ROUNDS_DEFAULT,
                    help=f"rounds ({ROUNDS_95} or more for a 95 %% interval; default {ROUNDS_DEFAULT}, which "
                         "resolved a 10 %% change on a 2-core CPU host: see the methods page)")
    ap.add_argument("--servers", choices=SERVERS, default="fresh",
                    help="fresh (default): a server per side and round, one at a time; shared: one per side for "
                         "every round, both running (cheaper; the two starts' difference counts as the sides')")
    ap.add_argument("--control", action="store_true",
                    help="run side A a second time in every round (C) and report C/A too: what this host's noise "
                         "alone calls a change, in the same session (rounds cost half as much again)")
    ap.add_argument("--tiny", action="store_true", help="the card's 2-layer test stand-in instead of its own")
    ap.add_argument("--out", type=Path, default=None, help="the document (default _build/compare/<model>-<time>.json)")
    a = ap.parse_args()
    if a.k < 2:
        raise TutorialError("--k must be at least 2 (a comparison is judged over rounds; 6 for a 95 % interval)")
    card = load_card(a.model)
    if a.k < ROUNDS_95:  # said before the rounds are spent, not found in the table after
        print(f"make compare: {a.k} rounds cannot call a change: an interval for the median needs {ROUNDS_95} rounds "
              f"or more to cover 95 %; this run shows the ratios and calls none", file=sys.stderr, flush=True)
    (side_a, py_a), (side_b, py_b) = parse_side("A", a.a), parse_side("B", a.b)
    pythons = {name: py for name, py in (("A", py_a), ("B", py_b)) if py}
    if a.tiny:
        serve_tiny(card)
    out = a.out or ROOT / "_build" / "compare" / f"{card.key}-{now_utc()[:19].replace(':', '')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.json")

    def keep(order: list[str], rounds: dict) -> None:  # a long comparison cut short keeps its rounds
        write_record({"model": card.key, "a": side_a.model_dump(), "b": side_b.model_dump(), "order": order,
                      **{f"rounds_{s.lower()}": r for s, r in rounds.items()}}, partial)

    doc = measure_paired(card.key, side_a, side_b, a.k, a.servers, control=a.control, after_round=keep,
                         pythons=pythons)
    write_record(doc.model_dump(mode="json"), out)
    partial.unlink(missing_ok=True)
    print(repr(paired_table(doc)))
    print(f"wrote {out}")
    if doc.stopped:  # the document holds the rounds before the failure; the command still failed
        print(f"make compare: stopped {doc.stopped} (the document holds the rounds completed before)",
              file=sys.stderr)
        return 1
    return 0


main = command(run)  # scripts/compare.py and npu-tutorials-compare
