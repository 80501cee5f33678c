"""What a model card makes its tutorial measure, as a digest: a results document records it
(``provenance.card_digest``), and a page this build did not execute is drawn only from a recorded document with
the card's current digest (:func:`npu_tutorials.record.results.page_record`); the re-run digest reads the same
measured sections (:func:`npu_tutorials.site.rerun.inputs_digest`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from .cards import CARDS_DIR, load_card

# The card's sections that only a page shows (the report's cited figures, the summary): a change re-renders
# the page and leaves what was measured, and the documents recorded with this card, current
# What only the page draws: a top-level section, or ``section.key`` (the copy-paste tab's FAQ and W8A8 checkpoint)
DRAWN_CARD_SECTIONS = ("reported", "summary", "deploy.faq", "deploy.w8a8")


def measured_card(path: Path) -> bytes:
    """A card file's sections that shape what its tutorial measures (all but :data:`DRAWN_CARD_SECTIONS`)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = {k: v for k, v in data.items() if k not in DRAWN_CARD_SECTIONS}
    for drawn in DRAWN_CARD_SECTIONS:
        section, _, key = drawn.partition(".")
        if key and isinstance(out.get(section), dict) and key in out[section]:
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return json.dumps(out, sort_keys=True, default=str).encode()


def card_digest(key: str) -> str:
    """The digest of what card ``key`` makes a tutorial measure: its measured sections and its config folder's
    files (``config.json``, tokenizer files).  A results document records it (``provenance.card_digest``); a
    page this build did not execute is drawn only from a recorded document with the current digest."""
    card = load_card(key)
    h = hashlib.sha256(b"card\0" + measured_card(CARDS_DIR / f"{key}.yaml"))
    for p in sorted(f for f in card.config_path.iterdir() if f.is_file()):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]
