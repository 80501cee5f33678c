"""The checkpoints a build makes before its tutorials (npu_tutorials.site.prepare, preflight --prepare)
and the reference loaded while a server starts (reference.loading_meanwhile)."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from npu_tutorials.site import prepare as P
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.inputs.convert import MARKER as CONVERTED, converted_path
from npu_tutorials.inputs.layouts import num_parameters
from npu_tutorials.inputs.standin import MARKER, ensure_standin, standin_path, tiny_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TUTORIAL_WEIGHTS", "stand-in")
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def qwen_tiny():
    """The first-generation QWen layout (converted before serving), 2 layers."""
    card = load_card("qwen-1_8b-chat")
    return ensure_standin(card, config=tiny_config(card.config), label="tiny")


def _plant(src: Path, dst: Path) -> Path:
    """``src``'s files where the build looks for a stand-in (``dst``), as if it had been built there."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst)
    return dst


def test_what_a_build_makes_before_its_tutorials(cache, qwen_tiny):
    palmyra, qwen = load_card("palmyra-mini"), load_card("qwen-1_8b-chat")
    # nothing cached: the stand-in, and for an architecture vLLM no longer has, its conversion too
    assert P.needed(palmyra).work == [P.STANDIN]
    assert P.needed(qwen).work == [P.STANDIN, P.CONVERSION]
    assert P.needed(qwen).parameters == num_parameters(qwen.config) > 1.7e9
    # a cached stand-in needs nothing more; a cached one still unconverted needs its conversion only
    (standin_path(palmyra)).mkdir(parents=True)
    (standin_path(palmyra) / MARKER).write_text("{}")
    assert P.needed(palmyra) is None
    path = _plant(qwen_tiny.path, standin_path(qwen))
    assert P.needed(qwen).work == [P.CONVERSION]
    (converted_path(path)).mkdir(parents=True)
    (converted_path(path) / CONVERTED).write_text("{}")
    assert P.needed(qwen) is None
    # real weights are never fetched or built here
    assert P.needed(load_card("qwen2.5-0.5b"), "real") is None


def test_as_many_at_once_as_cores_and_memory_allow():
    big, small = P.Job("a", 1_800_000_000, [P.STANDIN]), P.Job("b", 500_000_000, [P.STANDIN])
    assert P.workers_for([], cpus=2) == 0
    assert P.workers_for([big], cpus=8) == 1
    assert P.workers_for([big, small, small], cpus=2) == 2
    assert P.workers_for([big, small, small], cpus=16, memory=None) == 3
    # two 8 GB peaks do not fit in 12 GB: one at a time
    assert P.workers_for([big, big], cpus=2, memory=12 * 2**30) == 1
    assert P.workers_for([big, big], cpus=2, memory=24 * 2**30) == 2


def test_the_record_and_its_page(tmp_path, monkeypatch):
    from npu_tutorials.site.pages import costs_markdown, preparation_markdown

    monkeypatch.setenv("TUTORIAL_BUILD_DIR", str(tmp_path))
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "results"))
    assert P.read_record() is None and preparation_markdown() == ""
    P.write_record(P.Preparation(workers=2, wall_s=53.0, built_at="2026-12-01 13:00:00 UTC", jobs=[
        P.Done("qwen-1_8b-chat", 39.1, [P.STANDIN, P.CONVERSION]), P.Done("palmyra-mini", 31.3, [P.STANDIN])]))
    en, zh = preparation_markdown("en"), preparation_markdown("zh_CN")
    assert "4 checkpoint" not in en and "2 checkpoint(s) made 2 at a time in 53 s" in en
    assert "| qwen-1_8b-chat | stand-in + conversion | 39.1 |" in en
    assert "| qwen-1_8b-chat | 替身 + 转换 | 39.1 |" in zh and "教程运行之前" in zh
    assert costs_markdown().startswith(en)
    (tmp_path / P.RECORD).write_text("{not json")
    assert P.read_record() is None


def _script_env(tmp_path, monkeypatch) -> dict:
    """preflight's environment for one tutorial (qwen_1_8b_chat) whose cached stand-in is the tiny one,
    planted where the build looks (a full-size one takes half a minute to build)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORIAL_")}
    env.update(TUTORIAL_CACHE=str(tmp_path / "cache"), TUTORIAL_BUILD_DIR=str(tmp_path / "build"),
               TUTORIAL_WEIGHTS="stand-in", TUTORIAL_ONLY="qwen_1_8b_chat", TUTORIAL_FORCE="1")
    monkeypatch.setenv("TUTORIAL_CACHE", env["TUTORIAL_CACHE"])
    return env


def test_preflight_prepare_converts_in_a_worker_and_records_it(tmp_path, qwen_tiny, monkeypatch):
    """The script as make html runs it: the selected tutorial's stand-in is cached, its conversion is made by a
    worker process, and the record says so."""
    env = _script_env(tmp_path, monkeypatch)
    path = _plant(qwen_tiny.path, standin_path(load_card("qwen-1_8b-chat")))
    want = converted_path(path)
    p = subprocess.run([sys.executable, "scripts/preflight.py", "--prepare"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "preparing 1 checkpoint(s) before the tutorials, 1 at a time: qwen-1_8b-chat (conversion)" in p.stdout
    assert (want / CONVERTED).is_file()
    rec = json.loads((tmp_path / "build" / P.RECORD).read_text())
    assert rec["workers"] == 1 and [j["model"] for j in rec["jobs"]] == ["qwen-1_8b-chat"]
    assert rec["jobs"][0]["work"] == ["conversion"] and rec["jobs"][0]["seconds"] > 0
    # made: the next build finds nothing to do and leaves the record as it was
    again = subprocess.run([sys.executable, "scripts/preflight.py", "--prepare"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "preparing" not in again.stdout
    assert json.loads((tmp_path / "build" / P.RECORD).read_text()) == rec


def test_a_failing_worker_is_one_line(tmp_path, qwen_tiny, monkeypatch):
    env = _script_env(tmp_path, monkeypatch)
    path = _plant(qwen_tiny.path, standin_path(load_card("qwen-1_8b-chat")))
    (path / "config.json").write_text("{}")  # the converter refuses it
    p = subprocess.run([sys.executable, "scripts/preflight.py", "--prepare"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip() and "Triton" not in l]
    assert len(lines) == 1 and lines[0].startswith("error: preparing qwen-1_8b-chat (conversion) failed (exit 2): "), p.stderr
    assert "architectures is None" in lines[0], lines[0]  # the converter's own reason
    assert "Traceback" not in p.stderr


# -- the reference, loaded while the server starts ----------------------------------------------
@pytest.fixture
def fake_load(monkeypatch):
    """reference._load_model replaced by a slow stand-in that counts its loads (and can fail)."""
    from npu_tutorials.measure import reference

    calls = []

    def load(path):
        if path in reference._MODEL:
            return reference._MODEL[path]
        calls.append((path, threading.current_thread().name))
        time.sleep(0.3)
        if path == "broken":
            raise OSError("no such checkpoint")
        reference._MODEL.clear()
        reference._MODEL[path] = f"model of {path}"
        return reference._MODEL[path]

    monkeypatch.setattr(reference, "_load_model", load)
    monkeypatch.setattr(reference, "_MODEL", {})
    return calls


def test_the_reference_loads_while_the_body_runs_and_once(fake_load):
    from npu_tutorials.measure import reference

    with reference.loading_meanwhile("ckpt"):
        assert reference.load_model("ckpt") == "model of ckpt"  # waits for the load under way
    assert fake_load == [("ckpt", "reference-preload")]
    t = time.monotonic()
    with reference.loading_meanwhile("other"):
        pass
    assert time.monotonic() - t >= 0.3  # the body's end waits for the load: it never overlaps a later step
    assert reference._MODEL == {"other": "model of other"}


def test_a_failed_preload_is_reported_by_the_load_that_needs_it(fake_load):
    from npu_tutorials.measure import reference

    with reference.loading_meanwhile("broken"):
        pass
    with pytest.raises(OSError, match="no such checkpoint"):
        reference.load_model("broken")


def test_a_failing_body_still_waits_for_the_load(fake_load):
    from npu_tutorials.measure import reference

    with pytest.raises(RuntimeError, match="server died"):
        with reference.loading_meanwhile("ckpt"):
            raise RuntimeError("server died")
    assert not [t for t in threading.enumerate() if t.name == "reference-preload"]


def test_only_the_tutorials_this_build_executes_get_their_checkpoints(tmp_path, monkeypatch):
    """preflight asks sphinx-gallery's question before Sphinx starts: a page whose script and inputs are unchanged
    since its last run is not executed, so its stand-in is not made."""
    from sphinx_gallery.utils import get_md5sum

    from npu_tutorials.inputs.gallery_index import gallery_dir
    from npu_tutorials.site.rerun import inputs_digest, will_execute

    monkeypatch.delenv("TUTORIAL_FORCE", raising=False)
    stem, key = "qwen2_5_0_5b", "qwen2.5-0.5b"
    assert will_execute(stem, key, tmp_path)  # never ran
    (tmp_path / f"{stem}.py.md5").write_text(get_md5sum(gallery_dir() / f"{stem}.py", mode="t"))
    (tmp_path / f"{stem}.inputs").write_text(inputs_digest(key) + "\n")
    assert not will_execute(stem, key, tmp_path)
    monkeypatch.setenv("TUTORIAL_FORCE", "1")
    assert will_execute(stem, key, tmp_path)
    monkeypatch.delenv("TUTORIAL_FORCE")
    (tmp_path / f"{stem}.inputs").write_text("another digest\n")  # its card, the package or its weights changed
    assert will_execute(stem, key, tmp_path)
    (tmp_path / f"{stem}.inputs").write_text(inputs_digest(key) + "\n")
    (tmp_path / f"{stem}.py.md5").write_text("0" * 32)  # its script changed
    assert will_execute(stem, key, tmp_path)
