"""Hold a reader's own benchmark run against the page: the result file of the page's benchmark command
(``vllm bench serve ... --save-result --save-detailed``, "Deploy it yourself"), as the reader ran it on their host,
beside the document the page shows for the nearest machine kind.

* The file must be ``vllm bench serve``'s: every declared vLLM (0.23.0, 0.25.1, 0.27.1, 0.32.0) writes the same
  keys read here (``vllm/benchmarks/serve.py``: ``num_prompts``, ``request_rate``, ``max_concurrency`` in ``main``;
  ``input_lens``, ``output_lens``, ``ttfts``, ``itls`` with ``--save-detailed``); anything else is one line.
* The conditions must be the document's (``results.benchmark.conditions``): prompts, input and output lengths,
  rate, concurrency, and the dtype the reader names; any difference is one line naming each.
* The figures are the headline's definitions (:mod:`npu_tutorials.record.headline`) on one run: output throughput,
  the median TTFT and the median of the per-request TPOT (from ``itls``, as :class:`~npu_tutorials.engine.bench
  .BenchResult` reads every declared version's file).  Each is judged against what the document's own repeated
  runs make ordinary (:func:`ordinary_band`), widened by the between-run noise limit for that machine kind
  (:func:`~npu_tutorials.checks.noise.limits_for`: the card's, or the recorded between-run noise where there is a
  record of it), mirrored for "faster".
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..core.errors import TutorialError
from ..engine.bench import BenchResult
from ..inputs.cards import Card
from ..record.headline import METRICS, headline_figures
from ..record.results import document_id, read_doc, recorded_dir, results_dir
from ..record.schema import ResultsDoc
from .noise import limits_for, measured_noise

KEYS = ("num_prompts", "request_rate", "max_concurrency", "input_lens", "output_lens", "ttfts", "itls",
        "output_throughput", "median_ttft_ms", "completed")
FIGURES = ("output_throughput", "median_ttft_ms", "median_tpot_ms")


def read_result(path: str | Path) -> dict:
    """The reader's result file, or one line saying why it is not one of ``vllm bench serve --save-detailed``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TutorialError(f"{path.name}: not a readable JSON file ({exc})") from None
    missing = [k for k in KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise TutorialError(f"{path.name}: not a result file of the page's benchmark command (vllm bench serve "
                            f"--save-result --save-detailed): no {', '.join(missing)}")
    return data


def reader_figures(data: dict) -> dict[str, float]:
    """The headline figures of one run of the reader's: output throughput, median TTFT, median per-request TPOT."""
    tpot = BenchResult(None, data, Path("result.json"), []).per_request_tpot_ms()
    if not tpot:
        raise TutorialError("the result file has no request with more than one output token: no TPOT")
    return {"output_throughput": float(data["output_throughput"]), "median_ttft_ms": float(data["median_ttft_ms"]),
            "median_tpot_ms": statistics.median(tpot)}


def condition_differences(data: dict, doc: ResultsDoc, dtype: str | None) -> list[str]:
    """Each condition in which the reader's run differs from the document's (empty: like for like)."""
    bench = doc.results.benchmark
    if bench is None:
        raise TutorialError(f"the document of {doc.model} holds no benchmark at the report's conditions")
    c, out = bench.conditions, []
    rate = data["request_rate"]
    pairs = [("prompts", data["num_prompts"], c.num_prompts),
             ("request rate", "inf" if rate in ("inf", float("inf")) else float(rate),
              "inf" if c.request_rate in ("inf", float("inf")) else float(c.request_rate)),
             ("max concurrency", data["max_concurrency"], c.max_concurrency),
             ("input length", sorted(set(data["input_lens"])), [c.input_len]),
             ("output length", sorted(set(data["output_lens"])), [c.output_len])]
    if dtype is not None:
        pairs.append(("dtype", dtype, doc.provenance.engine_dtype))
    for name, mine, page in pairs:
        if mine != page:
            out.append(f"{name} {mine} (the page's {page})")
    return out


def pick_document(model: str, backend: str, device: str = "") -> tuple[Path, ResultsDoc]:
    """The document to hold a run against: the newest complete one of ``model`` on ``backend`` whose device
    contains ``device`` (this build's, then the recorded ones); else the newest complete one of any backend."""
    paths = [p for p in [results_dir() / f"{model}.json"] if p.is_file()]
    paths += sorted((recorded_dir() / model).glob("*.json"))
    docs = []
    for p in paths:
        try:
            d = read_doc(p)
        except TutorialError:
            continue
        if d.provenance.status == "complete" and d.results.benchmark is not None:
            docs.append((p, d))
    if not docs:
        raise TutorialError(f"no complete document of {model} with a benchmark to hold a run against")
    fits = [(p, d) for p, d in docs if d.provenance.backend == backend and device.lower() in d.provenance.device.lower()]
    return max(fits or docs, key=lambda pd: pd[1].provenance.built_at)


def ordinary_band(key: str, stat, limit: float, better: str) -> tuple[float, float]:
    """What the page's repeated runs make ordinary for one run of the reader's: for throughput (a median over the
    benchmark's runs) the range of those runs, for TTFT and TPOT (medians over every request) the requests'
    interquartile range, where one run's median falls; either widened by the noise limit on the slower side and
    its mirror on the faster side."""
    lo, hi = (stat.min, stat.max) if key == "output_throughput" else (stat.q1, stat.q3)
    return (lo * limit, hi / limit) if better == "higher" else (lo / limit, hi * limit)


def verdicts(mine: dict[str, float], doc: ResultsDoc, card: Card) -> list[dict]:
    """Per figure: the reader's value, the document's median and spread, the ratio, the ordinary band
    (:func:`ordinary_band`) and the verdict."""
    heads, limits = headline_figures(doc), limits_for(card, measured_noise(doc))
    better = {key: b for key, _label, _unit, b in METRICS}
    out = []
    for key in FIGURES:
        if key not in heads:
            continue
        f = heads[key]
        lo, hi = ordinary_band(key, f.stat, limits[key], better[key])
        below, above = mine[key] < lo, mine[key] > hi
        slower = below if better[key] == "higher" else above
        verdict = "ordinary" if not (below or above) else "slower than ordinary" if slower else "faster than ordinary"
        out.append({"key": key, "label": f.label, "unit": f.unit, "yours": mine[key], "page": f.text(),
                    "ratio": mine[key] / f.stat.median, "band": (lo, hi), "verdict": verdict})
    return out


def hold(result: str | Path, model: str, card: Card, backend: str, device: str = "",
         dtype: str | None = None) -> tuple[Path, ResultsDoc, list[dict]]:
    """The whole comparison: (the document's path, the document, :func:`verdicts`), or one line why not."""
    data = read_result(result)
    path, doc = pick_document(model, backend, device)
    differ = condition_differences(data, doc, dtype)
    if differ:
        raise TutorialError(f"{Path(result).name} was not run at the conditions of document {document_id(path)}: "
                            + "; ".join(differ) + " (run the page's benchmark command as it stands)")
    return path, doc, verdicts(reader_figures(data), doc, card)
