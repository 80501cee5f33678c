"""Pages generated from code: each card's "Deploy it yourself" section, the runner page's pieces and the
results schema."""

from __future__ import annotations

from pathlib import Path

from ..inputs.cards import known_models, load_card
from ..engine.commands import runner_docker_md
from .deploy_page import deploy_rst
from .runner_page import engines_md, families_md, hubs_md
from ..measure.tuning_plan import runner_tuning_md
from ..record.schema_doc import schema_markdown


def write_if_changed(p: Path, text: str) -> Path:
    """Write ``text`` to ``p`` unless it already holds it (unchanged files keep Sphinx's cache valid)."""
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.is_file() or p.read_text() != text:  # unchanged files keep Sphinx's cache valid
        p.write_text(text)
    return p


def write_generated(srcdir: str | Path) -> list[Path]:
    """Write the pages generated from code: ``_generated/<model>/deploy.rst`` for every card (the "Deploy
    it yourself" section: the copy-paste set in NPU / GPU / CPU tabs, :func:`npu_tutorials.site.deploy_page.deploy_rst`),
    ``_generated/runner_docker.md`` and ``runner_families.md`` (the runner page's ``docker run`` line and
    its image and chips per device family), ``_generated/runner_tuning.md`` (the tuning servers of its
    build-time estimate) and
    ``_generated/results_schema.md`` from the results document's models."""
    gen = Path(srcdir) / "_generated"
    out = [write_if_changed(gen / key / "deploy.rst", deploy_rst(load_card(key))) for key in known_models()]
    out.append(write_if_changed(gen / "runner_docker.md", runner_docker_md()))
    out.append(write_if_changed(gen / "runner_families.md", families_md()))
    out.append(write_if_changed(gen / "runner_engines.md", engines_md()))
    out.append(write_if_changed(gen / "runner_hubs.md", hubs_md()))

    out.append(write_if_changed(gen / "runner_tuning.md", runner_tuning_md()))
    out.append(write_if_changed(gen / "results_schema.md", schema_markdown()))
    return out
