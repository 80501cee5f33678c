"""The results document's performance sections: the benchmark, sweeps, efficiency, tuning (see :mod:`.schema`)."""

from __future__ import annotations

from pydantic import Field, field_validator

from ..core.model import StrictModel
from ..engine.bench import NOT_STORED
from .schema_base import Message, PairedRatio, Stat


class BenchConditions(StrictModel):
    num_prompts: int
    input_len: int
    output_len: int
    request_rate: float | str
    max_concurrency: int | None = None


class Benchmark(StrictModel):
    name: str
    conditions: BenchConditions
    command: str = Field(description="vllm bench serve, as a reader would run it")
    summary: dict[str, float] = Field(description="vLLM's own metric names (output_throughput, mean_ttft_ms, ...), "
                                                  "each the median of the runs' own values; no median_tpot_ms "
                                                  "(schema 3 on): the median TPOT is that of tpot_ms")
    ttft_ms: list[float] = []
    tpot_ms: list[float] = []
    itl_ms: list[float] = []
    repeats: int = 1
    output_throughput: Stat | None = Field(None, description="over repeats, where the run was repeated")

    @field_validator("summary")
    @classmethod
    def _one_definition(cls, summary: dict[str, float]) -> dict[str, float]:
        """A headline figure's key (engine.bench.NOT_STORED) is refused: the headline has its own definition."""
        twice = sorted(NOT_STORED & summary.keys())
        if twice:
            raise ValueError(f"{', '.join(twice)} is not stored (schema 3 on): the headline figure "
                             "(record.headline) is the median of every request's, from the samples")
        return summary


class LengthPoint(StrictModel):
    input_len: int
    prefill_ms: Stat
    tpot_ms: Stat
    ttft_concurrent_ms: Stat
    concurrent_requests: int


class ConcurrencyPoint(StrictModel):
    concurrency: int
    output_throughput: Stat
    tpot_ms: Stat
    ttft_ms: Stat
    speedup: float
    efficiency: float


class DecodeBytes(StrictModel):
    """Bytes one decode step of one sequence reads."""

    matrices: float
    vectors: float = Field(0, description="biases and norms")
    embedding_row: float = Field(description="one row of an untied input embedding")
    lm_head: float = Field(description="the output projection (the tied table, in full, where tied)")
    weights: float = 0
    kv_cache: float = Field(description="the KV cache at context_len tokens")
    total: float
    context_len: float
    dtype: str
    tied: bool = False


class Baseline(StrictModel):
    """Plain transformers generate on the same conditions as the vLLM figure beside it."""

    batch: int
    input_len: int
    output_len: int
    dtype: str
    device: str
    output_tokens_per_s: Stat
    vllm_output_tokens_per_s: Stat
    speedup: float


class Efficiency(StrictModel):
    decode_bytes: DecodeBytes
    tpot_ms: Stat
    achieved_bytes_per_s: float
    measured_bandwidth: float | None
    bandwidth_method: str
    nominal_bandwidth: float | None = None
    nominal_source: str | None = None
    fraction: float | None
    baselines: list[Baseline] = []


class TuningRow(StrictModel):
    name: str
    flags: list[str]
    env: dict[str, str] = {}
    knobs: list[str] = Field([], description="the card's knobs this configuration adds to graph mode")
    startup_s: float
    tpot_ms: Stat
    throughput_c1: Stat
    throughput_high: Stat | None = None
    tpot_high_ms: Stat | None = Field(None, description="TPOT at the highest concurrency, over its requests (the "
                                                        "latency beside the throughput there); None: not recorded")
    ttft_high_ms: Stat | None = Field(None, description="TTFT at the highest concurrency, over its requests")
    high_concurrency: int | None = None
    fraction: float | None = None
    vs_graph: list[PairedRatio] = Field([], description="this row against graph mode, paired over the section's "
                                                        "rounds (TPOT at 1, throughput at the highest concurrency); "
                                                        "empty: measured once (one round), or graph mode itself")


class Tuning(StrictModel):
    rows: list[TuningRow]
    rounds: int = Field(1, description="rounds of the paired comparison against graph mode: each round starts "
                                       "every measured configuration once, the order reversed every other round; "
                                       "a row's figures are medians over its rounds")
    best: str = ""
    skipped: dict[str, Message] = Field({}, description="knobs of this backend not measured in this build, and why")
    build_env: dict[str, str] = Field({}, description="the variables the knobs set, as this build's environment "
                                                      "had them before any knob (every row has them)")
    fixed_overhead_ms: float | None = Field(None, description="TPOT of a tiny model of the same architecture")
    bandwidth_bound_ms: float | None = Field(None, description="bytes a decode step reads / measured bandwidth")
    limit: str = ""
    command: str = Field("", description="the copy-paste command of the best configuration")
    cpu_binding: str | None = Field(None, description="vllm-ascend's own CPU binding as the first tuning server's "
                                                      "log reported it (measure.tuning_plan.cpu_binding); None: "
                                                      "no such line, or a document that predates it")


class Memory(StrictModel):
    """The memory the served engine held while it was measured (engine.memory: sampled from outside it)."""

    host_peak_rss_mib: float | None = Field(None, description="peak resident memory of the server's whole process "
                                                              "group (API server, engine core, workers)")
    device_peak_mib: float | None = Field(None, description="peak device memory of its processes, as "
                                                            "device_source lists it (None on a CPU, or unread)")
    device_source: str = Field("", description="the command that listed it: npu-smi info, nvidia-smi ...")
    kv_cache_tokens: int | None = Field(None, description="the KV cache's size in tokens, as vLLM logged it")
    kv_cache_gib: float | None = Field(None, description="the memory vLLM gave the KV cache, as it logged it")
    samples: int = Field(0, description="host samples taken (one every half second)")
    device_samples: int = 0
