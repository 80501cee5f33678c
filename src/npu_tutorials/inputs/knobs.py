"""Tuning knobs against what the pinned releases accept, and knobs merged into one server's settings.

``data/pinned/schema.json`` is an extract of vLLM 0.23.0's and vllm-ascend v0.23.0's own source (the
engine flags, the keys of ``--compilation-config`` and ``--additional-config``, the settings vllm-ascend's
performance documents export), written by ``scripts/extract_pinned_schema.py`` with the file each list
comes from.  :func:`knob_problems` checks an NPU knob against it when a card is loaded, so a knob the
pinned release renamed or removed stops every build, on any machine, with one line.

Every other supported vllm-ascend release has its own extract beside it (``data/pinned/vllm-ascend-<tag>.json``,
the same script at that tag with the vLLM release it pairs with: v0.25.1rc1 with vLLM 0.25.1).
:func:`schema_for` picks the extract of a vllm-ascend version (:func:`installed_vllm_ascend`, read from the
package's metadata without importing it; a host without vllm-ascend gets the pinned one, which the copy-paste
commands target); :func:`unsupported` names what a knob sets that such a version lacks, each "not supported
by vllm-ascend <tag>", so an NPU build never passes it to its server silently.

:func:`merge` turns several knobs into one server's flags and environment: the JSON objects of
``--compilation-config`` and ``--additional-config`` are merged key by key; two knobs that set the same
flag, key or variable differently cannot be combined (a :class:`TutorialError` says which).
"""

from __future__ import annotations

import json
from typing import Iterable, Literal, Mapping, Sequence

from pydantic import Field, model_validator

from ..core.errors import TutorialError
from ..core.messages import N_
from ..core.model import FrozenModel
from .releases import (PINNED_DIR, SCHEMA_PATH, installed_vllm_ascend, pinned_label, pinned_schema,  # noqa: F401
                       release_tuple, schema_for, supported_releases, version_key)


JSON_FLAGS = ("--compilation-config", "--additional-config")
# How vllm-ascend's documents write the host's architecture and an existing preload list.
_DOC_FORMS = (('"$(uname -i)"', "{machine}"), ("$(uname -i)", "{machine}"))


def parse_flags(flags: Sequence[str]) -> dict[str, str | None]:
    """``["--a", "1", "--b", "--c=x"]`` -> ``{"--a": "1", "--b": None, "--c": "x"}``."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(flags):
        tok = flags[i]
        if not tok.startswith("--"):
            raise TutorialError(f"{tok!r} follows no flag")
        name, eq, inline = tok.partition("=")
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            value, i = flags[i + 1], i + 2
        else:
            value, i = None, i + 1
        if name in out:
            raise TutorialError(f"{name} is given twice")
        out[name] = value
    return out


def json_value(flag: str, value: str | None) -> dict:
    try:
        obj = json.loads(value or "")
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise TutorialError(f"{flag} {value!r} is not a JSON object")
    return obj


def _doc_value(value: str) -> str:
    """A value as vllm-ascend's documents write it, in the cards' form (``{machine}``, no ``$VAR`` tail)."""
    for doc, card in _DOC_FORMS:
        value = value.replace(doc, card)
    parts = [p for p in value.split(":") if p and not p.startswith("$")]
    return ":".join(parts)


# why an NPU build does not measure a knob (tuning_plan.select_knobs): the installed vllm-ascend lacks what it sets
SKIP_UNSUPPORTED = N_("the installed vllm-ascend {version} lacks it: {what}")


def _flag_problems(flags: Mapping[str, str | None], s: dict) -> list[str]:
    """What the release of extract ``s`` lacks among parsed ``flags``: an engine flag of its vLLM, a key of
    ``--compilation-config`` or ``--additional-config`` (or of ``weight_prefetch_config``), a ``cudagraph_mode``."""
    v, va = s["vllm"], s["vllm_ascend"]
    problems = []
    for flag, value in flags.items():
        # vLLM's boolean engine flags take a --no- form too (BooleanOptionalAction): --no-enable-prefix-caching
        positive = "--" + flag[len("--no-"):] if flag.startswith("--no-") else flag
        if flag not in v["engine_flags"] and positive not in v["engine_flags"]:
            problems.append(f"{flag} is not a flag of vLLM {v['version']} ({v['files']['engine_flags']}), "
                            f"so not supported by vllm-ascend {va['tag']}")
        if flag not in JSON_FLAGS:
            continue
        try:
            obj = json_value(flag, value)
        except TutorialError as exc:
            problems.append(str(exc))
            continue
        if flag == "--compilation-config":
            problems += [f"--compilation-config key {k!r} is not a field of vLLM {v['version']}'s "
                         f"{v['files']['compilation_config_keys']}, so not supported by vllm-ascend {va['tag']}"
                         for k in obj if k not in v["compilation_config_keys"]]
            mode = obj.get("cudagraph_mode")
            if mode is not None and mode not in v["cudagraph_modes"]:
                problems.append(f"cudagraph_mode {mode!r} is not one of {', '.join(v['cudagraph_modes'])} "
                                f"(vLLM {v['version']}), so not supported by vllm-ascend {va['tag']}")
        else:
            problems += [f"--additional-config key {k!r} is not supported by vllm-ascend {va['tag']}: not read by "
                         f"{va['files']['additional_config_keys']}" for k in obj if k not in va["additional_config_keys"]]
            prefetch = obj.get("weight_prefetch_config")
            if isinstance(prefetch, dict) and "weight_prefetch_config" in va["additional_config_keys"]:
                problems += [f"weight_prefetch_config key {k!r} is not supported by vllm-ascend {va['tag']}: not "
                             f"read by {va['files']['weight_prefetch_config_keys']}"
                             for k in prefetch if k not in va["weight_prefetch_config_keys"]]
    return problems


def flag_problems(flags: Sequence[str], version: str | None = None) -> list[str]:
    """What vllm-ascend ``version`` (its extract, :func:`schema_for`; None: the pinned release) lacks among the
    engine ``flags``, each named "... not supported by vllm-ascend <tag>" (empty: all of it is there): an engine
    flag of its vLLM, a ``--compilation-config`` or ``--additional-config`` key, a ``cudagraph_mode``."""
    try:
        return _flag_problems(parse_flags(flags), schema_for(version))
    except TutorialError as exc:
        return [str(exc)]


def unsupported(knob: "Knob", version: str | None) -> list[str]:
    """What ``knob`` sets that vllm-ascend ``version`` (its extract, :func:`schema_for`) lacks, each named
    "... not supported by vllm-ascend <tag>" (empty: all of it is there).  An NPU build checks its knobs against
    the installed version with this and does not measure one it names (:data:`SKIP_UNSUPPORTED`)."""
    return flag_problems(knob.flags, version)


def knob_problems(knob: "Knob", version: str | None = None) -> list[str]:
    """What vLLM / vllm-ascend ``version`` (None: the pinned release) would not accept in ``knob`` (empty:
    nothing): an unknown engine flag, an unknown ``--compilation-config`` key or ``cudagraph_mode``, an
    ``--additional-config`` key vllm-ascend does not read (or a ``weight_prefetch_config`` key it does not), a
    flag vllm-ascend ignores, an environment variable or value none of the cited performance documents sets."""

    s = schema_for(version)
    va = s["vllm_ascend"]
    try:
        flags = parse_flags(knob.flags)
    except TutorialError as exc:
        return [str(exc)]
    problems = _flag_problems(flags, s)
    problems += ascend_contract_problems(["vllm", "serve", "./m", *knob.flags], {}, version=version)
    documented = va["documented_env"]
    for var, value in knob.env.items():
        docs = documented.get(var)
        if not docs:
            problems.append(f"{var}: none of vllm-ascend {va['tag']}'s performance documents sets it "
                            f"({va['files']['documented_env']})")
        elif _doc_value(value) not in {_doc_value(d["value"]) for d in docs}:
            problems.append(f"{var}={value}: vllm-ascend {va['tag']}'s documents set "
                            f"{' or '.join(sorted({d['value'] for d in docs}))}")
    return problems


def _merge_json(into: dict, obj: dict, where: str, who: str, owners: dict) -> None:
    for key, value in obj.items():
        path = f"{where}.{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge_json(into[key], value, path, who, owners)
        elif key in into and into[key] != value:
            raise TutorialError(f"knobs {owners[path]!r} and {who!r} set {path} differently")
        else:
            into[key] = value
            owners.setdefault(path, who)


def merge(knobs: Iterable["Knob"]) -> tuple[list[str], dict[str, str]]:
    """One server's flags and environment from ``knobs`` (in order); a conflict is a :class:`TutorialError`."""
    flags: dict[str, object] = {}
    env: dict[str, str] = {}
    owners: dict[str, str] = {}
    for k in knobs:
        for flag, value in parse_flags(k.flags).items():
            if flag in JSON_FLAGS:
                _merge_json(flags.setdefault(flag, {}), json_value(flag, value), flag, k.name, owners)
            elif flag in flags and flags[flag] != value:
                raise TutorialError(f"knobs {owners[flag]!r} and {k.name!r} set {flag} differently")
            else:
                flags[flag] = value
                owners.setdefault(flag, k.name)
        for var, value in k.env.items():
            if var in env and env[var] != value:
                raise TutorialError(f"knobs {owners[var]!r} and {k.name!r} set {var} differently")
            env[var] = value
            owners.setdefault(var, k.name)
    argv: list[str] = []
    for flag, value in flags.items():
        argv.append(flag)
        if isinstance(value, dict):
            argv.append(json.dumps(value))
        elif value is not None:
            argv.append(value)
    return argv, env


def overlay(base: Sequence[str], over: Sequence[str]) -> list[str]:
    """``base`` flags with ``over`` on top: ``over``'s ``--compilation-config`` or ``--additional-config`` merged
    into ``base``'s key by key (``over``'s value where both set a key), its other flags after ``base``'s (vLLM's
    parser keeps the last of a flag given twice).  A tuning configuration on top of a device family's flags."""
    if not base:
        return list(over)
    mine, theirs = parse_flags(base), parse_flags(over)
    for flag in JSON_FLAGS:
        if flag in mine and flag in theirs:
            mine[flag] = json.dumps({**json_value(flag, mine[flag]), **json_value(flag, theirs.pop(flag))})
    argv: list[str] = []
    for flag, value in [*mine.items(), *theirs.items()]:
        argv += [flag] if value is None else [flag, value]
    return argv


def combinable(knobs: Iterable["Knob"]) -> bool:
    try:
        merge(knobs)
    except TutorialError:
        return False
    return True


def preloaded(env: Mapping[str, str]) -> list[str]:
    """The libraries an environment preloads (``LD_PRELOAD``, colon- or space-separated)."""
    return [p for p in env.get("LD_PRELOAD", "").replace(" ", ":").split(":") if p]


def resolve_env(env: Mapping[str, str], machine: str, environ: Mapping[str, str]) -> dict[str, str]:
    """A knob's environment on this host: ``{machine}`` filled in; a preload goes in front of the libraries
    the build's environment already preloads (as the guide's ``LD_PRELOAD=...:$LD_PRELOAD``)."""
    out = {k: v.replace("{machine}", machine) for k, v in env.items()}
    if "LD_PRELOAD" in out and environ.get("LD_PRELOAD"):
        out["LD_PRELOAD"] = ":".join(dict.fromkeys(preloaded(out) + preloaded(environ)))
    return out


def in_effect(env: Mapping[str, str], environ: Mapping[str, str]) -> list[str]:
    """The settings of a resolved knob environment that the build's environment already has."""
    have = set(preloaded(environ))
    out = []
    for var, value in env.items():
        if var == "LD_PRELOAD":
            if set(preloaded(env)) <= have:
                out.append(f"{var} with {', '.join(preloaded(env))}")
        elif environ.get(var) == value:
            out.append(f"{var}={value}")
    return out


# -- what vllm-ascend adds to vLLM's command line, and what it ignores or refuses ---------------------
# Read from vllm-project/vllm-ascend at tag v0.23.0 (commit 5cb98caaadeff42b5b62b996e34bb2aaa29d20fd), the
# release of the image above.  tests/test_commands.py checks every NPU command of the site against these lists.
VLLM_ASCEND_SOURCE = "vllm-project/vllm-ascend v0.23.0 (commit 5cb98caa)"

# vllm_ascend/ascend_config.py (AscendConfig, init_ascend_config): the top-level keys of --additional-config it
# reads (additional_config.get(...), additional_config[...], _get_config_value(...)); any other key is unused.
# Read from its source by scripts/extract_pinned_schema.py into data/pinned/schema.json (npu_tutorials.inputs.knobs).
VLLM_ASCEND_ADDITIONAL_CONFIG_KEYS = frozenset(pinned_schema()["vllm_ascend"]["additional_config_keys"])

# vllm_ascend/platform.py, NPUPlatform.pre_register_and_update: the --quantization choice it adds.
VLLM_ASCEND_QUANTIZATION = "ascend"

# vllm_ascend/platform.py, NPUPlatform._fix_incompatible_config: vLLM flags it resets with a warning
# (GPU/ROCm-specific or unsupported on Ascend), and what happens to them.  It also resets
# calculate_kv_scales and max_num_partial_prefills, which vLLM 0.32's parser has no flags for, and settings
# inside --attention-config, --compilation-config, --speculative-config and --kv-transfer-config.
VLLM_ASCEND_IGNORED_FLAGS = {
    "--disable-cascade-attn": "GPU-specific: reset to False",
    "--mm-encoder-attn-backend": "Ascend uses its own mechanism: reset to None",
    "--enable-layerwise-nvtx-tracing": "NVIDIA-specific: reset to False",
    "--attention-backend": "Ascend uses its registered backend: reset (unless FLASH_ATTN)",
    "--ray-workers-use-nsight": "NVIDIA-specific: reset to False",
    "--numa-bind": "replaced by --additional-config '{\"enable_cpu_binding\": true}'",
    "--numa-bind-nodes": "ignored (Ascend binds CPU cores itself)",
    "--numa-bind-cpus": "ignored (Ascend binds CPU cores itself)",
    "--enable-dbo": "ignored: reset to False",
    "--ubatch-size": "ignored: reset to 0",
    # vllm_ascend/worker/model_runner_v1.py builds AscendSampler() without the model config's logprobs mode
    # (vllm_ascend/sample/sampler.py: "TODO: support logprobs_mode in vllm-ascend").
    "--logprobs-mode": "accepted and ignored: the engine returns raw log-probabilities",
}
# The same function resets cache_config.cpu_kvcache_space_bytes, which vLLM sets from this variable.
VLLM_ASCEND_IGNORED_ENV = {"VLLM_CPU_KVCACHE_SPACE": "a CPU-backend setting: reset to None on Ascend"}
# vllm_ascend/platform.py, NPUPlatform.check_and_update_config: refuses to start (ValueError) with graph mode on.
VLLM_ASCEND_REFUSED_ENV = {"ASCEND_LAUNCH_BLOCKING": ("1", "ACL graph is incompatible with ASCEND_LAUNCH_BLOCKING=1")}


def ascend_contract_problems(argv: Sequence[str], env: Mapping[str, str] | None = None, *,
                             version: str | None = None) -> list[str]:
    """What vllm-ascend would ignore or refuse in the serve command ``argv`` with ``env`` (empty: nothing).
    ``--additional-config`` must be JSON whose keys vllm-ascend ``version`` reads (its extract, :func:`schema_for`;
    None: the pinned release): another key is named, "not supported by vllm-ascend <tag>".  The ignored flags,
    ignored and refused variables are those read from v0.23.0's source (above), for every version."""
    s = schema_for(version)
    tag = s["vllm_ascend"]["tag"]
    read = frozenset(s["vllm_ascend"]["additional_config_keys"])
    problems = []
    for i, tok in enumerate(argv):
        flag, _, inline = tok.partition("=")
        if flag in VLLM_ASCEND_IGNORED_FLAGS:
            problems.append(f"{flag}: {VLLM_ASCEND_IGNORED_FLAGS[flag]}")
        if flag == "--additional-config":
            value = inline or (argv[i + 1] if i + 1 < len(argv) else "")
            try:
                keys = set(json.loads(value))
            except (ValueError, TypeError):
                problems.append(f"--additional-config {value!r} is not a JSON object")
                continue
            problems += [f"--additional-config key {k!r}: not supported by vllm-ascend {tag} (it does not read it)"
                         for k in sorted(keys - read)]
        if flag == "--quantization":
            value = inline or (argv[i + 1] if i + 1 < len(argv) else "")
            if value != VLLM_ASCEND_QUANTIZATION:
                problems.append(f"--quantization {value}: vllm-ascend's quantized checkpoints use 'ascend'")
    eager = "--enforce-eager" in argv
    for var, value in (env or {}).items():
        if var in VLLM_ASCEND_IGNORED_ENV:
            problems.append(f"{var}: {VLLM_ASCEND_IGNORED_ENV[var]}")
        refused = VLLM_ASCEND_REFUSED_ENV.get(var)
        if refused and value == refused[0] and not eager:
            problems.append(f"{var}={value}: {refused[1]}")
    return problems


class Knob(FrozenModel):
    """A backend's own tuning knob, measured on top of graph mode where this build runs that backend.

    An NPU knob names its ``source`` (a file and section of vllm-ascend at the pinned release, or an issue
    number) and is checked against what that release accepts (:func:`npu_tutorials.inputs.knobs.knob_problems`).
    ``{machine}`` in an environment value is the build host's architecture (``uname -m``).  ``baseline``: the
    pinned release already does it by default (a no-op there: listed, not measured); ``read_until`` /
    ``removed_by``: a setting a later release no longer reads (and would ignore without a word)."""

    name: str
    backends: list[Literal["npu", "cuda", "cpu"]]
    flags: list[str] = []
    env: dict[str, str] = {}
    why: str = ""
    source: str = ""
    min_devices: int = Field(default=1, ge=1, description="a setting for servers that span several cards: "
                                                          "measured only where the card's server uses this many")
    baseline: str = Field("", description="what the pinned release already does by default that this knob "
                                          "sets, with its source (file:line): the knob is a no-op there, so it "
                                          "is not measured and the page says the baseline has it")
    read_until: str = Field("", description="the last vllm-ascend release that reads this knob's setting "
                                            "(a tag, 'v0.23.0'): a build on a later release does not measure it")
    removed_by: str = Field("", description="the change that removed the setting after read_until "
                                            "('vllm-ascend #11949')")

    @model_validator(mode="after")
    def _npu_knobs_hold_against_the_pinned_release(self) -> "Knob":
        if self.read_until and release_tuple(self.read_until) is None:
            raise ValueError(f"knob {self.name!r}: read_until {self.read_until!r} is not a release (vX.Y.Z)")
        if bool(self.read_until) != bool(self.removed_by):
            raise ValueError(f"knob {self.name!r}: read_until and removed_by go together (the last release that "
                             "reads it, and the change that removed it)")
        if "npu" in self.backends:
            if not self.source.strip():
                raise ValueError(f"knob {self.name!r}: an NPU knob names its source (file and section, or issue)")
            problems = knob_problems(self)
            if problems:
                raise ValueError(f"knob {self.name!r}: {problems[0]}"
                                 + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        return self


class TuningSpec(FrozenModel):
    """The report's conditions beside a tuned deployment, both measured in the same build."""

    knobs: list[Knob] = []
    knob_profiles: list[Literal["full", "quick"]] = ["full"]
    profiles: list[Literal["full", "quick"]] = Field(default=["full", "quick"], description="the profiles that "
                                                     "measure tuning; the others show a recorded one with its "
                                                     "provenance")
    overhead_model: bool = Field(default=True, description="measure the fixed per-token overhead on a tiny "
                                                           "model of the same architecture")
