"""Stand-in checkpoints: the model's exact config and tokenizer, planted seeded weights.

Where real weights are absent (no model hub here), a tutorial still runs the
real engine on a checkpoint of the right shape.  A stand-in is a Hugging
Face-layout folder with the official ``config.json``, ``generation_config.json``
and ``tokenizer_config.json`` (chat template included), the rebuilt Qwen
tokenizer, and bf16 weights that plant a decisive next-token map in every
layer (:mod:`npu_tutorials.inputs.planted`), deterministic from the seed, saved as
safetensors.  It is made once and cached under a name that hashes everything
that shapes it, so the same seed gives the same bytes (``STANDIN.json``
records the weights' SHA-256 and what was planted).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cards import Card
from .cache import cache_root, file_sha256
from ..core.errors import TutorialError
from . import layouts
from .planted import VERSION as planted

GENERATOR_VERSION = 2  # 2: planted next-token map (npu_tutorials.inputs.planted); 1: plain random
MARKER = "STANDIN.json"


@dataclass(frozen=True)
class StandInInfo:
    path: Path
    seed: int
    sha256: str
    num_parameters: int


def tiny_config(config: dict[str, Any], *, layers: int = 2, hidden: int = 256, heads: int = 4,
                kv_heads: int = 2, intermediate: int = 256, head_dim: int | None = None) -> dict[str, Any]:
    """The same architecture shrunk for tests (head_dim 64, which every vLLM backend accepts; hidden
    256 is about the smallest that holds a planted code of the full vocabulary).  A config with an
    explicit ``head_dim`` (Qwen3: not hidden / heads) keeps one: ``head_dim``, else the official one."""
    explicit = head_dim or config.get("head_dim")
    if (explicit or hidden // heads) < 32:
        raise TutorialError("tiny configs need head_dim >= 32 (the CPU attention rejects 16)")
    cfg = dict(config)
    if explicit:
        cfg["head_dim"] = explicit
    if "kv_channels" in cfg:  # first-generation QWen: no GQA, fused MLP width = intermediate / 2
        cfg.update(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                   kv_channels=hidden // heads, intermediate_size=2 * intermediate)
        return cfg
    cfg.update(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
               num_key_value_heads=kv_heads, intermediate_size=intermediate)
    if "max_window_layers" in cfg:
        cfg["max_window_layers"] = layers
    return cfg


def _spec_hash(config: dict, extra_files: dict[str, bytes], seed: int) -> str:
    h = hashlib.sha256()

    h.update(json.dumps({"config": config, "seed": seed, "gen": GENERATOR_VERSION, "planted": planted},
                        sort_keys=True).encode())
    for name in sorted(extra_files):
        h.update(name.encode() + b"\0" + extra_files[name])
    return h.hexdigest()[:12]


def _copied_files(card: Card) -> dict[str, bytes]:
    src = card.config_path
    return {p.name: p.read_bytes() for p in sorted(src.iterdir()) if p.is_file() and p.name != "config.json"}


def standin_name(card: Card, *, config: dict[str, Any] | None = None, seed: int | None = None,
                 label: str = "") -> str:
    """The stand-in's cache name: it hashes everything that shapes the checkpoint (config, files, seed)."""
    config = config or card.config
    seed = card.stand_in.seed if seed is None else seed
    return f"{card.key}{'-' + label if label else ''}-seed{seed}-{_spec_hash(config, _copied_files(card), seed)}"


def standin_path(card: Card, *, config: dict[str, Any] | None = None, seed: int | None = None,
                 cache_dir: Path | None = None, label: str = "") -> Path:
    """Where :func:`ensure_standin` keeps (or will keep) the stand-in for ``card``."""
    return Path(cache_dir or cache_root()) / "standins" / standin_name(card, config=config, seed=seed, label=label)


def ensure_standin(card: Card, *, config: dict[str, Any] | None = None, seed: int | None = None,
                   cache_dir: Path | None = None, label: str = "", progress=None) -> StandInInfo:
    """Return the cached stand-in for ``card`` (building it once if needed).

    ``config`` replaces the official config (tests pass :func:`tiny_config`).
    """
    config = config or card.config
    seed = card.stand_in.seed if seed is None else seed
    final = standin_path(card, config=config, seed=seed, cache_dir=cache_dir, label=label)
    name, root = final.name, final.parent
    copied = _copied_files(card)
    if (final / MARKER).is_file():
        meta = json.loads((final / MARKER).read_text())
        return StandInInfo(final, meta["seed"], meta["weights_sha256"], meta["num_parameters"])

    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for fname, data in copied.items():
            (tmp / fname).write_bytes(data)
        layout = layouts.for_config(config)
        layout.write_tokenizer(tmp, config)
        if progress is not None:
            progress.say(f"building the stand-in {name} ({config['num_hidden_layers']} layers)")
        tensors, plan = layout.weights(config, seed, progress)
        expected = {n: shape for n, shape, _ in layout.parameters(config)}
        got = {n: tuple(t.shape) for n, t in tensors.items()}
        if got != expected:  # the layout's list is what the engine and the byte counts assume
            raise TutorialError(f"stand-in tensors do not match the {layout.name} layout: "
                                f"{sorted(set(got.items()) ^ set(expected.items()))[:3]}")
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        nparams = sum(t.numel() for t in tensors.values())
        del tensors
        meta = {
            "kind": "stand-in",
            "model": card.key,
            "seed": seed,
            "generator": f"npu_tutorials.standin v{GENERATOR_VERSION}",
            "planted": plan,
            "num_parameters": nparams,
            "weights_sha256": file_sha256(tmp / "model.safetensors"),
        }
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        try:
            tmp.rename(final)
        except OSError:  # another process finished first: keep theirs
            if not (final / MARKER).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return StandInInfo(final, seed, meta["weights_sha256"], nparams)
