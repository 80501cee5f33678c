"""How close decoding gets to the memory-bandwidth roofline, and the plain-transformers baseline.

Decoding one token at concurrency 1 reads every weight once, so
``weight_bytes / TPOT`` is the bandwidth the engine achieved; over the
device's bandwidth it is the roofline fraction.  The CPU's bandwidth is
measured by a probe in this build; an accelerator's is its datasheet figure.
"""

from __future__ import annotations

import time
from pathlib import Path

# Peak memory bandwidth in bytes/s, as stated by the vendors' datasheets.
DATASHEET_BANDWIDTH = {
    "Ascend910B": 1.6e12,
    "Ascend910": 1.2e12,
    "H200": 4.8e12,
    "H100": 3.35e12,
    "A100": 2.0e12,
    "L40S": 0.864e12,
}


def probe_cpu_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """Read bandwidth (bytes/s): best of ``repeats`` sums over a ``gib`` GiB fp32 tensor."""
    import torch

    x = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    x.sum()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * 4 / best


def device_bandwidth(backend: str, device_name: str) -> tuple[float | None, str]:
    """(bytes/s, where the figure comes from) for the device this build ran on."""
    if backend == "cpu":
        return probe_cpu_bandwidth(), "measured in this build (torch sum over 1 GiB, best of 5)"
    for key, bw in DATASHEET_BANDWIDTH.items():
        if key.lower() in device_name.replace(" ", "").lower():
            return bw, f"datasheet figure for {key}"
    return None, f"no datasheet figure known for {device_name!r}"


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def weight_bytes(path: str | Path, dtype: str) -> int:
    """Bytes of weights one decoding step reads: every parameter of the checkpoint, in the
    dtype the engine computes in (a bf16 checkpoint served in float32 reads 4 bytes each)."""
    from safetensors import safe_open

    params = 0
    for f in sorted(Path(path).glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                n = 1
                for d in st.get_slice(k).get_shape():
                    n *= d
                params += n
    return params * DTYPE_BYTES[dtype]


def roofline(weight_bytes_: int, tpot_ms: float, bandwidth: float | None) -> dict:
    achieved = weight_bytes_ / (tpot_ms / 1000.0)
    out = {"weight_bytes": weight_bytes_, "tpot_ms": tpot_ms, "achieved_bytes_per_s": achieved,
           "bandwidth_bytes_per_s": bandwidth, "roofline_tokens_per_s": None, "fraction": None}
    if bandwidth:
        out["roofline_tokens_per_s"] = bandwidth / weight_bytes_
        out["fraction"] = achieved / bandwidth
    return out


def hf_generate_throughput(path: str | Path, batch: int, input_len: int, new_tokens: int,
                           device: str = "cpu", dtype: str = "bfloat16") -> dict:
    """Output tokens/s of plain transformers ``generate`` (the engine's dtype, greedy, fixed lengths)."""
    import torch
    from transformers import AutoModelForCausalLM

    from .reference import quiet_transformers

    quiet_transformers()
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype)).to(device).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 20000, (batch, input_len), generator=gen).to(device)
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
              attention_mask=torch.ones_like(ids))
    with torch.inference_mode():
        model.generate(ids[:, :8], max_new_tokens=2, min_new_tokens=2, do_sample=False, pad_token_id=0,
                       attention_mask=torch.ones_like(ids[:, :8]))  # warm-up
        t = time.perf_counter()
        model.generate(ids, **kw)
        dt = time.perf_counter() - t
    del model
    return {"batch": batch, "input_len": input_len, "new_tokens": new_tokens, "seconds": dt,
            "output_tokens_per_s": batch * new_tokens / dt}


def scaling(throughputs: dict[int, float]) -> dict[int, dict]:
    """Speedup and efficiency relative to concurrency 1: thr(n) / (n * thr(1))."""
    base = throughputs[1]
    return {n: {"speedup": t / base, "efficiency": t / (n * base)} for n, t in throughputs.items()}
