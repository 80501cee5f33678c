"""Steps that find the weights and decide how the engine loads them."""

from __future__ import annotations

import json
from pathlib import Path

from ..record import steps
from ..record.schema_base import Message
from ..core.errors import TutorialError
from ..engine.commands import CONVERSION_WHY, CONVERTED_ARCHS
from ..inputs.weights import Weights, resolve_weights
from ..record.results import scrub
from ..record.schema import ServingCheckpoint, WeightsInfo
from .state import TutorialState
from ..core.memory import trim_memory
from ..inputs.convert import ensure_converted

CONFIG_SHOWN = ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "max_position_embeddings", "tie_word_embeddings", "rope_theta",
                "torch_dtype")


class WeightsSteps:
    """The checkpoint: real weights or a planted stand-in, and the layout the engine serves."""

    def __init__(self, state: TutorialState):
        self.s = state

    def prepare_weights(self) -> Weights:
        """Find the real weights, or build the planted stand-in, and record which (``TUTORIAL_WEIGHTS``)."""
        s = self.s
        with s.step(Message.of(steps.WEIGHTS)):
            s.weights = w = resolve_weights(s.card, s.mode, progress=s.progress)
        cfg = json.loads((w.path / "config.json").read_text())
        s.doc.provenance.weights = WeightsInfo(kind=w.kind, source=w.source, label=scrub(w.label()),
                                               hub_id=w.hub_id, revision=w.revision, seed=w.seed, sha256=w.sha256,
                                               packaging=w.packaging, config={k: cfg[k] for k in CONFIG_SHOWN if k in cfg})
        return w

    def prepare_serving_checkpoint(self) -> ServingCheckpoint:
        """How the engine loads the weights: as they are, or converted to a layout current vLLM serves."""
        s = self.s
        w = s.need_weights()
        arch = s.card.architecture
        if arch in CONVERTED_ARCHS:
            with s.step(Message.of(steps.CONVERT, arch=arch, target=CONVERTED_ARCHS[arch])):
                s.serve_path = ensure_converted(w.path)
                trim_memory()
            sc = ServingCheckpoint(route=f"converted to {CONVERTED_ARCHS[arch]}", why=CONVERSION_WHY.format(arch=arch))
        else:
            s.serve_path = w.path
            sc = ServingCheckpoint(route="as is")
        return sc

    def serving_path(self) -> Path:
        """The checkpoint the engine serves (:meth:`prepare_serving_checkpoint`).  The fp32 CPU reference loads the
        same one (tests/test_convert.py proves transformers' Qwen2 on converted weights equals an independent
        forward of the original)."""
        if self.s.serve_path is None:
            self.s.need_weights()
            raise TutorialError("call prepare_serving_checkpoint() first")
        return self.s.serve_path
