"""Backend detection, the environment report, dtype per device family, the isolated runner,
device-fact parsers and the bandwidth figures: fast unit tests.

Each test checks what the code *does* with its input (a fake at a boundary: a module in
``sys.modules``, a file, a command's output), never a value the fake itself hands back
unchanged.  The end-to-end NPU / CUDA behaviour is in ``test_ascend_contract.py``.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from npu_tutorials.engine.platform import platform_for

from npu_tutorials.engine import backend, bandwidth, devices, isolated
from npu_tutorials.core.errors import TutorialError

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"


@pytest.fixture
def plain_host(monkeypatch, tmp_path):
    """No npu-smi / nvidia-smi on PATH, no /dev/davinci*, no TUTORIAL_BACKEND."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv(devices.DEV_DIR_ENV, str(tmp_path / "dev"))
    (tmp_path / "dev").mkdir()
    monkeypatch.delenv("TUTORIAL_BACKEND", raising=False)
    _forget_probes()
    yield tmp_path
    _forget_probes()


def _forget_probes():
    if hasattr(backend, "_probe"):
        backend._probe.cache_clear()


@pytest.fixture
def poisoned_torch_npu(monkeypatch):
    """A torch_npu in sys.modules whose every device call fails the test: detection must not call it."""
    def boom(*a, **k):
        raise AssertionError("a device API was called in the build process")

    npu = types.SimpleNamespace(device_count=boom, get_device_name=boom, get_soc_version=boom,
                                get_device_properties=boom, mem_get_info=boom)
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(npu=npu))
    monkeypatch.setitem(sys.modules, "vllm_ascend", types.SimpleNamespace())
    real = backend.importlib.util.find_spec
    monkeypatch.setattr(backend.importlib.util, "find_spec",
                        lambda name, *a: object() if name in ("torch_npu", "vllm_ascend") else real(name, *a))


# -- detection ---------------------------------------------------------------------------------

def test_plain_host_is_cpu(plain_host):
    assert backend.detect_backend() == "cpu"


def test_detection_asks_a_child_process_not_this_one(plain_host, poisoned_torch_npu, monkeypatch):
    """Defect 2: the device count comes from a probe in a child process, never from torch_npu here."""
    calls = []
    monkeypatch.setattr(isolated, "call", lambda target, *a, **k: calls.append(target) or
                        {"count": 2, "devices": [], "soc_version": 223})
    assert backend.detect_backend("auto") == "npu"
    assert calls == ["npu_tutorials.engine.devices:npu_probe"]


def test_npu_requested_but_probe_fails(plain_host, poisoned_torch_npu, monkeypatch):
    def fail(*a, **k):
        raise isolated.IsolatedError("the Ascend NPU probe failed in its own process (exit 1): RuntimeError: x")

    monkeypatch.setattr(isolated, "call", fail)
    with pytest.raises(TutorialError, match="TUTORIAL_BACKEND=npu but no NPU is usable: the Ascend NPU probe"):
        backend.detect_backend("npu")


def test_ascend_host_without_the_stack_stops_loudly(plain_host):
    """Defect 7: /dev/davinci* present but torch_npu missing: one line, not a quiet CPU build."""
    (plain_host / "dev" / "davinci0").touch()
    with pytest.raises(TutorialError) as e:
        backend.detect_backend("auto")
    msg = str(e.value)
    assert "\n" not in msg and "looks like an Ascend host (" in msg and "davinci* present" in msg
    assert "torch_npu and vllm_ascend not importable" in msg and "TUTORIAL_BACKEND=cpu" in msg
    assert backend.detect_backend("cpu") == "cpu"  # the explicit way out


def test_unknown_backend_value(monkeypatch):
    monkeypatch.setenv("TUTORIAL_BACKEND", "tpu")
    with pytest.raises(TutorialError, match="'tpu' is not one of auto, npu, cuda, cpu"):
        backend.detect_backend()


def test_cuda_needs_nvidia_smi(plain_host):
    with pytest.raises(TutorialError, match="TUTORIAL_BACKEND=cuda but nvidia-smi/torch see no CUDA device"):
        backend.detect_backend("cuda")


# -- the environment report -------------------------------------------------------------------

def test_cpu_environment_report(plain_host):
    import importlib.metadata as md

    env = backend.describe_environment("cpu")
    rows = dict(env.rows())
    assert rows["backend"] == "cpu" and env.devices == [] and env.visible_devices_var is None
    assert env.cpu_cores == len(os.sched_getaffinity(0))
    assert env.versions["python"] == platform.python_version()
    assert env.versions["torch"] == md.version("torch")
    assert env.device_count == 1 and env.device_name == env.cpu_model
    d = env.to_dict()
    json.dumps(d)  # serialisable for the results JSON
    assert not [v for v in _strings(d) if v.startswith("/")], "no machine paths in the report"


def _strings(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


def test_cann_version_reads_the_install_info_not_version_cfg(monkeypatch, tmp_path):
    """Defect 4: version.cfg's '# version: 1.0' is not the CANN version; the install info is."""
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    for layout, version in (("Ascend", "9.1.0"), ("Ascend-cann8", "8.3.RC1")):  # CANN 9: latest -> cann-9.1.0
        tree = tmp_path / layout
        shutil.copytree(FAKES / layout, tree, symlinks=True)
        monkeypatch.setenv(devices.ASCEND_ROOT_ENV, str(tree))
        assert devices.cann_version() == version
    # ASCEND_TOOLKIT_HOME (set by set_env.sh) wins over the default location
    other = tmp_path / "other" / "latest" / f"{platform.machine()}-linux"
    other.mkdir(parents=True)
    (other / "ascend_toolkit_install.info").write_text("package_name=Ascend-cann-toolkit\nversion=9.0.1\n")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(other.parent))
    assert devices.cann_version() == "9.0.1"
    monkeypatch.setenv(devices.ASCEND_ROOT_ENV, str(tmp_path / "nowhere"))
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path / "nowhere"))
    assert devices.cann_version() is None


def test_npu_smi_parser_on_real_captures():
    a2 = devices.parse_npu_smi_info((FAKES / "npu_smi" / "info_a2_910b3.txt").read_text())
    assert a2.version == "24.1.0.3"
    assert [(c.npu, c.chip) for c in a2.chips] == [(i, 0) for i in range(8)]
    assert {c.name for c in a2.chips} == {"910B3"} and {c.memory_total_mib for c in a2.chips} == {65536}
    assert a2.chips[6].bus_id == "0000:41:00.0" and a2.chips[6].memory_used_mib == 3397
    a3 = devices.parse_npu_smi_info((FAKES / "npu_smi" / "info_a3.txt").read_text())
    assert a3.version == "25.2.1" and len(a3.chips) == 16
    assert [(c.npu, c.chip) for c in a3.chips[:4]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert a3.chips[-1].memory_used_mib == 2876
    assert devices.parse_npu_smi_info("dcmi model initialized failed, because the device is used.").chips == []


def test_nvidia_smi_parser():
    text = "NVIDIA H100 80GB HBM3, 81559 MiB, 580.126.20\nNVIDIA H200, 143771 MiB, 580.126.09\n\n"
    gpus = devices.parse_nvidia_smi_query(text)
    assert [(g.name, g.memory_total_mib, g.driver) for g in gpus] == [
        ("NVIDIA H100 80GB HBM3", 81559, "580.126.20"), ("NVIDIA H200", 143771, "580.126.09")]


def test_looks_like_ascend_host(plain_host, monkeypatch):
    assert devices.looks_like_ascend_host() is None
    (plain_host / "dev" / "davinci_manager").touch()
    assert devices.looks_like_ascend_host() is None  # a control device alone is not a chip
    (plain_host / "dev" / "davinci3").touch()
    assert "davinci* present" in devices.looks_like_ascend_host()
    monkeypatch.setenv("PATH", f"{FAKES / 'bin-npu'}{os.pathsep}{os.environ['PATH']}")
    assert devices.looks_like_ascend_host() == "npu-smi on PATH"


# -- threads ----------------------------------------------------------------------------------

def test_host_threads_follows_the_affinity_not_omp(monkeypatch):
    """Defect 8: vllm-ascend images set OMP_NUM_THREADS=1; host_threads counts the usable cores."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5})
    assert backend.host_threads() == 3


@pytest.mark.skipif(not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 2, reason="needs taskset, 2 cores")
def test_host_threads_in_a_pinned_process():
    code = "from npu_tutorials.engine.backend import host_threads; print(host_threads())"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    first = min(os.sched_getaffinity(0))
    out = subprocess.run(["taskset", "-c", str(first), sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert int(out) == len(os.sched_getaffinity(0)) > 1


# -- dtype per device family ------------------------------------------------------------------

# SoC numbers of torch_npu's table (Ascend/pytorch v2.10.0 torch_npu/csrc/core/npu/NpuVariables.h); the family is
# the SoC number's, by vllm-ascend's ranges (vllm_ascend/utils.py check_ascend_device_type), not the name's.
SOC = {"Ascend910PremiumA": 100, "Ascend910ProA": 101, "Ascend910A": 102, "Ascend910ProB": 103, "Ascend910B": 104,
       "Ascend310P1": 200, "Ascend310P3": 202, "Ascend910B1": 220, "Ascend910B2": 221, "Ascend910B2C": 222,
       "Ascend910B3": 223, "Ascend910B4": 224, "Ascend910B4-1": 225, "Ascend310B1": 240, "Ascend910_9391": 250,
       "Ascend910_9392": 251, "Ascend910_9362": 255, "Ascend910_9363": 256, "Ascend950DT_9582": 260}


@pytest.mark.parametrize("name", ["Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4",
                                  "Ascend910B4-1", "Ascend910_9391", "Ascend910_9392", "Ascend910_9362",
                                  "Ascend950DT_9582"])
def test_a2_a3_a5_serve_the_card_dtype(name):
    assert platform_for("npu").engine_dtype("bfloat16", name, SOC[name]) == ("bfloat16", False, "")


@pytest.mark.parametrize("name", ["Ascend310P1", "Ascend310P3"])
def test_310p_serves_float16_in_graph_mode(name):
    dtype, eager, why = platform_for("npu").engine_dtype("bfloat16", name, SOC[name])
    assert (dtype, eager) == ("float16", False) and "eager" not in why and name in why


@pytest.mark.parametrize("name", ["Ascend910PremiumA", "Ascend910ProA", "Ascend910A", "Ascend910ProB", "Ascend910B"])
def test_first_generation_910_is_refused_in_one_line(name):
    with pytest.raises(TutorialError) as e:
        platform_for("npu").engine_dtype("bfloat16", name, SOC[name])
    assert "\n" not in str(e.value) and "first-generation Ascend 910" in str(e.value)


@pytest.mark.parametrize("name", ["Ascend910_9363", "Ascend310B1"])
def test_chips_vllm_ascend_refuses_are_refused_in_one_line(name):
    """Ascend910_9363 has an A3-like name, but SoC 256 is outside vllm-ascend's A3 range 250-255."""
    with pytest.raises(TutorialError) as e:
        platform_for("npu").engine_dtype("bfloat16", name, SOC[name])
    assert "\n" not in str(e.value) and f"SoC {SOC[name]}" in str(e.value) and "not a chip vllm-ascend supports" \
        in str(e.value)


def test_cpu_rule_unchanged(monkeypatch):
    monkeypatch.setattr(backend, "cpu_has_native_bf16", lambda: False)
    dtype, eager, why = platform_for("cpu").engine_dtype("bfloat16")
    assert (dtype, eager) == ("float32", False) and "AVX512-BF16" in why
    assert platform_for("cpu").engine_dtype("float16") == ("float16", False, "")
    monkeypatch.setattr(backend, "cpu_has_native_bf16", lambda: True)
    assert platform_for("cpu").engine_dtype("bfloat16") == ("bfloat16", False, "")
    assert platform_for("cuda").engine_dtype("bfloat16", "NVIDIA H100 80GB HBM3") == ("bfloat16", False, "")


# -- the isolated runner (defects 2 and 10) ---------------------------------------------------

def chatty(x, y=1):  # called in a child process by the tests below
    print("library chatter on stdout")
    return {"sum": x + y, "pid": os.getpid()}


def failing():
    print("some progress", file=sys.stderr)
    raise RuntimeError("Free memory on device (1.2/61.0 GiB) on startup is less than desired")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    st = Path(f"/proc/{pid}/stat")
    return st.exists() and st.read_text().split()[2] != "Z"


@pytest.fixture
def tests_importable(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))


def test_call_returns_the_result_from_a_process_that_has_exited(tests_importable):
    out = isolated.call("test_backend:chatty", 2, y=40, timeout=120)
    assert out["sum"] == 42 and out["pid"] != os.getpid()
    assert not _alive(out["pid"])


def test_call_failure_is_one_line_with_the_stderr_tail(tests_importable):
    with pytest.raises(isolated.IsolatedError) as e:
        isolated.call("test_backend:failing", timeout=120, what="the probe")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("the probe failed in its own process (exit 1): RuntimeError: Free memory")
    assert "some progress" in e.value.stderr_tail and "Traceback" in e.value.stderr_tail


def test_call_timeout_kills_the_whole_process_group(tests_importable, tmp_path):
    pidfile = tmp_path / "pids"
    # 20 s: the child's interpreter and the isolated runner start within it on a loaded host, then it hangs
    with pytest.raises(isolated.IsolatedError, match="did not finish in 20 s; its process group was killed"):
        isolated.call("hang_helper:spawn_and_hang", str(pidfile), timeout=20)
    leader, grandchild = map(int, pidfile.read_text().split())
    assert not _alive(leader) and not _alive(grandchild)


def test_run_group_returns_exit_codes_and_kills_groups_on_timeout(tmp_path):
    p = isolated.run_group(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (p.returncode, p.stdout, p.stderr) == (3, "out\n", "err\n")
    pidfile = tmp_path / "pid"
    with pytest.raises(isolated.IsolatedError, match="sh did not finish in 2 s"):
        isolated.run_group(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], timeout=2)
    assert not _alive(int(pidfile.read_text()))
    with pytest.raises(isolated.IsolatedError, match="could not start"):
        isolated.run_group([str(tmp_path / "no-such-program")], timeout=2)


# -- bandwidth (defect 5) ---------------------------------------------------------------------

def test_nominal_figures_only_for_exact_names():
    assert bandwidth.nominal("NVIDIA H100 80GB HBM3")[0] == 3.35e12
    assert bandwidth.nominal("NVIDIA H200")[0] == 4.8e12
    assert bandwidth.nominal("NVIDIA H100 PCIe")[0] == 2.0e12
    for name in ("NVIDIA H100", "NVIDIA H100 80GB HBM3 (MIG 1g.10gb)", "Ascend910B3", "Ascend910B1",
                 "Ascend910_9391", "Ascend910B3 (SoC 223)", "NVIDIA GeForce RTX 4090"):
        assert bandwidth.nominal(name) is None, name
    assert bandwidth.NOMINAL_BANDWIDTH_ASCEND == {}  # no citable per-variant figure (facts.md)
    for bw, source in bandwidth.NOMINAL_BANDWIDTH.values():
        assert "datasheet" in source


def test_bandwidth_text_labels_the_vendor_figure():
    known = bandwidth.Bandwidth(3.0e12, "torch sum", *bandwidth.nominal("NVIDIA H100 80GB HBM3"))
    assert known.text().startswith("3000.0 GB/s measured (torch sum); nominal (vendor figure): 3350.0 GB/s, H100 SXM")
    unknown = bandwidth.Bandwidth(1.1e12, "torch sum")
    assert unknown.text() == "1100.0 GB/s measured (torch sum)"


def test_cpu_bandwidth_is_measured_here():
    bw = bandwidth.measure("cpu", "AMD EPYC", gib=0.05, repeats=2)
    assert bw.measured_bytes_per_s > 1e8 and bw.nominal_bytes_per_s is None and "in this build" in bw.how


def test_npu_without_a_soc_number_keeps_the_card_dtype_and_says_so():
    dtype, eager, why = platform_for("npu").engine_dtype("bfloat16", "Ascend910B3")
    assert (dtype, eager) == ("bfloat16", False) and "no SoC version" in why
