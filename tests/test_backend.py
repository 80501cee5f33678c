import sys
import types

import pytest

from npu_tutorials import backend
from npu_tutorials.errors import TutorialError


@pytest.fixture
def fake_npu(monkeypatch):
    """Pretend torch_npu and vllm_ascend are installed with ``count`` NPUs."""
    def install(count):
        npu = types.SimpleNamespace(device_count=lambda: count, get_device_name=lambda i: "Ascend910B3",
                                    get_soc_version=lambda: 222)
        monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(npu=npu, __version__="2.14.0"))
        monkeypatch.setitem(sys.modules, "vllm_ascend", types.SimpleNamespace())
        real = backend.importlib.util.find_spec
        monkeypatch.setattr(backend.importlib.util, "find_spec",
                            lambda name, *a: object() if name in ("torch_npu", "vllm_ascend") else real(name, *a))
    return install


def test_auto_prefers_npu(fake_npu, monkeypatch):
    monkeypatch.delenv("TUTORIAL_BACKEND", raising=False)
    fake_npu(2)
    assert backend.detect_backend() == "npu"
    env = backend.describe_environment("npu")
    assert env.device_count == 2 and env.device_name.startswith("Ascend910B3")


def test_auto_without_devices_is_cpu(fake_npu, monkeypatch):
    fake_npu(0)
    monkeypatch.setattr(backend, "_cuda_count", lambda: 0)
    assert backend.detect_backend("auto") == "cpu"


def test_auto_falls_back_to_cuda(fake_npu, monkeypatch):
    fake_npu(0)
    monkeypatch.setattr(backend, "_cuda_count", lambda: 1)
    assert backend.detect_backend("auto") == "cuda"


def test_npu_requested_but_absent(monkeypatch):
    monkeypatch.setattr(backend, "_npu_count", lambda: 0)
    with pytest.raises(TutorialError, match="TUTORIAL_BACKEND=npu but"):
        backend.detect_backend("npu")


def test_unknown_backend_value(monkeypatch):
    monkeypatch.setenv("TUTORIAL_BACKEND", "tpu")
    with pytest.raises(TutorialError, match="'tpu' is not one of auto, npu, cuda, cpu"):
        backend.detect_backend()


def test_cpu_environment_report():
    env = backend.describe_environment("cpu")
    rows = dict(env.rows())
    assert rows["backend"] == "cpu"
    assert rows["torch"] and "vllm" in rows
    assert env.cpu_count >= 1


def test_engine_dtype_on_cpus_without_native_bf16(monkeypatch):
    monkeypatch.setattr(backend, "cpu_has_native_bf16", lambda: False)
    dtype, why = backend.engine_dtype("bfloat16", "cpu")
    assert dtype == "float32" and "AVX512-BF16" in why
    assert backend.engine_dtype("bfloat16", "npu") == ("bfloat16", "")
    monkeypatch.setattr(backend, "cpu_has_native_bf16", lambda: True)
    assert backend.engine_dtype("bfloat16", "cpu") == ("bfloat16", "")
