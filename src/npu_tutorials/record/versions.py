"""The results document's schema versions, and how a document of an older one is read.

A version that removes a field bumps :data:`SCHEMA_VERSION` and adds a step here that removes it from a
document of the version before, as the document is read (:class:`~.schema.ResultsDoc` runs :func:`upgrade`
before it validates): every reader sees one shape, and a recorded file stays as it was written (its
``schema`` keeps the version it was written in; :func:`~.results.write_doc` writes this one).

* 3: ``benchmark.summary`` stores no ``median_tpot_ms`` (the median of the runs' own medians): the median
  TPOT is the headline figure (:func:`~.headline.headline_figures`), the median of every request of the
  runs (``benchmark.tpot_ms``), one definition.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 3
OLDEST_READ = 2  # the oldest version this code reads


def readable(version: Any) -> bool:
    """Whether a document of ``version`` (its ``schema``) reads: this version or one that upgrades to it."""
    return isinstance(version, int) and not isinstance(version, bool) and OLDEST_READ <= version <= SCHEMA_VERSION


def _v2_to_v3(data: dict) -> dict:
    """Schema 3: ``benchmark.summary`` without ``median_tpot_ms``, a second definition of the median TPOT."""
    results = data.get("results")
    bench = results.get("benchmark") if isinstance(results, dict) else None
    if isinstance(bench, dict) and isinstance(bench.get("summary"), dict) and "median_tpot_ms" in bench["summary"]:
        summary = {k: v for k, v in bench["summary"].items() if k != "median_tpot_ms"}
        data = {**data, "results": {**results, "benchmark": {**bench, "summary": summary}}}
    return data


# version -> the step from it to the next
STEPS = {2: _v2_to_v3}


def upgrade(data: Any) -> Any:
    """``data`` (a document as read, or as built) in this version's shape: each step from its ``schema`` on, in
    turn; ``schema`` itself is left as it was.  Anything else (another version, not a mapping) is left as it
    is, for validation (and :func:`~.results.read_doc`) to refuse.  The input is never changed in place."""
    if not isinstance(data, dict):
        return data
    version = data.get("schema", data.get("schema_", SCHEMA_VERSION))
    if not readable(version):
        return data
    for v in range(version, SCHEMA_VERSION):
        data = STEPS[v](data)
    return data
