import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SHARED = ROOT.parent / "shared" / "reference"
os.environ.setdefault("TUTORIAL_CACHE", str(ROOT / ".cache"))


@pytest.fixture
def shared_ref() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} (the golden reference files) is not beside this checkout")
    return SHARED


@pytest.fixture(scope="session")
def card():
    from npu_tutorials.cards import load_card

    return load_card("qwen2.5-0.5b")


@pytest.fixture(scope="session")
def tiny(card):
    """A tiny stand-in of the Qwen2 architecture (2 layers, head_dim 64, the real tokenizer)."""
    from npu_tutorials.standin import ensure_standin, tiny_config

    return ensure_standin(card, config=tiny_config(card.config), label="tiny")
