"""Hooks for conf.py: teardown between examples and pages generated from the cards."""

from __future__ import annotations

from pathlib import Path

from .cards import known_models, load_card
from .commands import deploy_rst


def stop_servers(gallery_conf, fname, when) -> None:
    """sphinx-gallery ``reset_modules`` hook: no server outlives the example that started it."""
    from .server import stop_all

    stop_all()


def write_generated(srcdir: str | Path) -> list[Path]:
    """Write ``_generated/<model>/deploy.rst`` (NPU / GPU / CPU tabs) for every card."""
    out = []
    for key in known_models():
        card = load_card(key)
        d = Path(srcdir) / "_generated" / key
        d.mkdir(parents=True, exist_ok=True)
        p = d / "deploy.rst"
        text = deploy_rst(card)
        if not p.is_file() or p.read_text() != text:  # unchanged files keep Sphinx's cache valid
            p.write_text(text)
        out.append(p)
    return out
