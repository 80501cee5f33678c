"""``vllm collect-env`` on each "Deploy it yourself" tab (issue 39): the build captures its own backend's report
in the background (vLLM's on the CPU, for real here; vllm-ascend's ``collect_env.py`` on an NPU, against the
fake of ``tests/fakes/site-npu/collect_env.py``), stores it in the document's machine, and each tab shows the
newest capture of its backend, or says that none is captured yet and how to make one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from docs import machine, make_doc
from npu_tutorials.core.messages import language
from npu_tutorials.engine import collect_env as ce
from npu_tutorials.engine.deploy import LABELS
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.record.results import read_doc, write_doc
from npu_tutorials.record.schema import CollectEnv
from npu_tutorials.site import render
from npu_tutorials.site.deploy_page import deploy_rst
from npu_tutorials.views.deploy import collect_env_block

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"


def _tabs(rst: str) -> dict[str, str]:
    return {b: rst.split(f".. tab-item:: {label}")[1].split(".. tab-item::")[0] for b, label in LABELS.items()}


def test_the_cpu_build_captures_vllms_own_report():
    """The real thing on this machine: vLLM's collect_env, its first line dropped, its sections kept."""
    argv = ce.collect_env_argv(ascend=False)
    assert argv == [sys.executable, "-m", "vllm.collect_env"] and ce.shown_command(argv) == "vllm collect-env"
    cap = ce.Capture(argv)
    try:
        text = cap.text()
    finally:
        cap.stop()
    assert ce.HEADER not in text
    assert "vLLM Version" in text and "PyTorch version" in text, text[:500]


def test_on_an_ascend_host_it_is_vllm_ascends_script_beside_the_editable_checkout(monkeypatch, tmp_path):
    """The image installs vllm-ascend editable from /vllm-workspace/vllm-ascend, whose root holds collect_env.py:
    found from the package's location; its NPU section is npu-smi's output, its CANN section the install record."""
    site = FAKES / "site-npu"
    monkeypatch.syspath_prepend(str(site))
    argv = ce.collect_env_argv(ascend=True)
    assert argv == [sys.executable, str((site / "collect_env.py").resolve())]
    assert ce.shown_command(argv) == f"python {(site / 'collect_env.py').resolve()}"
    monkeypatch.setenv("PATH", f"{FAKES / 'bin-npu'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TUTORIAL_ASCEND_ROOT", str(FAKES / "Ascend"))
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("HF_TOKEN", "do-not-show")
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # the build's own; the report runs as a deployer's
    cap = ce.Capture(argv)
    text = cap.text()
    cap.stop()
    assert text.startswith("PyTorch version") and "vLLM Ascend Version: 0.23.0" in text
    npu = text.split("NPU:\n")[1].split("\n\nCANN:")[0]
    assert "npu-smi" in npu and "910B" in npu, npu
    assert "ASCEND_RT_VISIBLE_DEVICES=0" in text and "do-not-show" not in text
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" not in text


def test_a_wheel_install_without_the_checkout_falls_back_to_vllms_report(tmp_path):
    pkg = tmp_path / "site-packages" / "vllm_ascend"
    pkg.mkdir(parents=True)
    assert ce.ascend_script(pkg) is None
    assert ce.collect_env_argv(True, package_dir=pkg)[1:] == ["-m", "vllm.collect_env"]
    (tmp_path / "site-packages" / "collect_env.py").write_text("print('x')\n")
    assert ce.collect_env_argv(True, package_dir=pkg)[1] == str(tmp_path / "site-packages" / "collect_env.py")


def test_a_failing_or_hanging_report_is_one_line_and_leaves_nothing(monkeypatch):
    script = str(FAKES / "site-npu" / "collect_env.py")
    monkeypatch.setenv("FAKE_COLLECT_ENV", "fail")
    cap = ce.Capture([sys.executable, script])
    text = cap.text()
    cap.stop()
    assert text.startswith(f"python {script} failed (exit status 1):") and "torch_npu" in text
    monkeypatch.setenv("FAKE_COLLECT_ENV", "sleep")
    cap = ce.Capture([sys.executable, script])
    assert cap.text(timeout=2) == f"python {script} did not finish within 2 s"
    assert not _running_in_group(cap.proc.pid)  # the script and its child
    cap.stop()
    cap = ce.Capture([sys.executable, script])  # a run stopped part-way: stop() alone
    cap.stop()
    assert not _running_in_group(cap.proc.pid)
    missing = ce.Capture(["/nonexistent/python", "x"])
    assert missing.text().startswith("could not start python x:")


def _running_in_group(pgid: int, settle: float = 5.0) -> list[int]:
    """Processes of group ``pgid`` that still run (a zombie waiting for init to reap it does not), once the
    SIGKILL sent to the group has had up to ``settle`` seconds to land (it is delivered asynchronously)."""
    deadline = time.monotonic() + settle
    while True:
        left = _members(pgid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _members(pgid: int) -> list[int]:
    out = []
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(st.parent.name))
    return out


def _captured(backend: str, built_at: str, text: str):
    m = machine(backend, device="Ascend910B3" if backend == "npu" else "AMD EPYC")
    m.collect_env = CollectEnv(command="vllm collect-env", text=text)
    return make_doc(built_at=built_at, mach=m)


def test_each_tab_shows_the_newest_capture_of_its_own_backend():
    docs = [_captured("cpu", "2026-12-01T10:00:00+00:00", "old cpu report"),
            _captured("cpu", "2026-12-04T10:00:00+00:00", "new cpu <report>"),
            make_doc(built_at="2026-12-05T10:00:00+00:00"),  # newer, but it captured none
            _captured("npu", "2026-11-30T10:00:00+00:00", "npu report")]
    cpu = collect_env_block(docs, "cpu", LABELS["cpu"])
    html = cpu._repr_html_()
    assert "new cpu &lt;report&gt;" in html and "old cpu" not in html and "2026-12-04" in html
    assert "npu report" in collect_env_block(docs, "npu", LABELS["npu"])._repr_html_()
    none = collect_env_block(docs, "cuda", LABELS["cuda"])
    assert isinstance(none, str) and "not captured yet" in none and "<code>vllm collect-env</code>" in none
    npu_none = collect_env_block(docs[:3], "npu", LABELS["npu"])
    assert "<code>python /vllm-workspace/vllm-ascend/collect_env.py</code>" in npu_none
    with language("zh_CN"):
        zh = collect_env_block(docs[:3], "npu", LABELS["npu"])
    assert "not captured" not in zh and "<code>python /vllm-workspace/vllm-ascend/collect_env.py</code>" in zh


def test_the_deploy_section_draws_every_tab_from_this_builds_and_the_recorded_documents(monkeypatch, tmp_path):
    """``_generated/<model>/deploy.rst`` carries one marker per tab; the include hook draws it (this build's CPU
    document here, no recorded NPU or GPU one), inside the tab's raw HTML block."""
    monkeypatch.setenv("TUTORIAL_BUILD_DIR", str(tmp_path / "_build"))
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "_build" / "results"))  # not the checkout's _build
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "recorded"))
    rst = deploy_rst(load_card("qwen2.5-0.5b"))
    for backend, tab in _tabs(rst).items():
        assert tab.count(render.collect_env_marker(backend)) == 1
    write_doc(_captured("cpu", "2026-12-04T10:00:00+00:00", "line one\n\nline three"))

    class App:
        config = type("C", (), {"language": "en"})()
        builder = type("B", (), {"name": "html"})()

    content = [rst]
    monkeypatch.setattr(render, "page_lang", lambda app: "en")
    monkeypatch.setattr(render, "extracting", lambda app: False)
    render.render_included(App(), Path("_generated/qwen2.5-0.5b/deploy.rst"), "tutorials/models/x", content)
    tabs = _tabs(content[0])
    assert "line one" in tabs["cpu"] and "tut-collect-env" not in content[0]
    assert "not captured yet" in tabs["npu"] and "not captured yet" in tabs["cuda"]
    block = tabs["cpu"].split(".. raw:: html\n\n")[1]
    body = block.split("\n\n      **1.")[0]
    assert all(line.startswith("         ") or not line.strip() for line in body.splitlines()), body


def test_the_tutorial_keeps_its_report_in_the_document(monkeypatch, tmp_path):
    """``finish()`` waits for the background run and stores it, its machine paths scrubbed."""
    from npu_tutorials.tutorial.state import TutorialState

    doc = make_doc()
    fake = type("Cap", (), {"command": "vllm collect-env", "stopped": False,
                            "text": lambda self: f"TORCHINDUCTOR_CACHE_DIR={ROOT}/.cache/inductor",
                            "stop": lambda self: setattr(self, "stopped", True)})()
    state = TutorialState.__new__(TutorialState)
    state.doc, state.collect_env = doc, fake
    TutorialState.keep_collect_env(state)
    kept = doc.provenance.machine.collect_env
    assert kept.command == "vllm collect-env" and str(ROOT) not in kept.text and "inductor" in kept.text
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "_build" / "results"))  # not the checkout's _build
    assert read_doc(write_doc(doc)).provenance.machine.collect_env == kept
