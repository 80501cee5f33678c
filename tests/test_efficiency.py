import pytest

from npu_tutorials import efficiency


def test_roofline_arithmetic():
    r = efficiency.roofline(weight_bytes_=1_000_000_000, tpot_ms=50.0, bandwidth=40e9)
    assert r["achieved_bytes_per_s"] == pytest.approx(20e9)
    assert r["fraction"] == pytest.approx(0.5)
    assert r["roofline_tokens_per_s"] == pytest.approx(40.0)
    assert efficiency.roofline(1, 1.0, None)["fraction"] is None


def test_scaling_efficiency():
    sc = efficiency.scaling({1: 10.0, 2: 18.0, 16: 140.5})
    assert sc[2] == pytest.approx({"speedup": 1.8, "efficiency": 0.9})
    assert sc[16]["speedup"] == pytest.approx(14.05) and sc[16]["efficiency"] == pytest.approx(0.878125)


def test_datasheet_lookup():
    bw, src = efficiency.device_bandwidth("npu", "Ascend910B3 (SoC 222)")
    assert bw == 1.6e12 and "datasheet" in src
    assert efficiency.device_bandwidth("cuda", "Mystery GPU")[0] is None


def test_weight_bytes_of_a_standin(tiny):
    import json
    import math

    from npu_tutorials.standin import qwen2_parameters

    cfg = json.loads((tiny.path / "config.json").read_text())
    n = sum(math.prod(s) for _, s, _ in qwen2_parameters(cfg))
    assert efficiency.weight_bytes(tiny.path, "bfloat16") == 2 * n
    assert efficiency.weight_bytes(tiny.path, "float32") == 4 * n


def test_cpu_bandwidth_probe_is_positive():
    assert efficiency.probe_cpu_bandwidth(gib=0.05, repeats=2) > 1e8
