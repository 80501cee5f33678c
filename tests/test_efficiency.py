import pytest

from npu_tutorials.measure import efficiency
from conftest import require_vllm  # noqa: E402


def test_roofline_fraction_arithmetic():
    from npu_tutorials.record.headline import roofline_fraction

    # 1 GB a step in 50 ms: 20 GB/s achieved, half of a 40 GB/s device
    assert roofline_fraction(1_000_000_000, 50.0, 40e9) == pytest.approx(0.5)
    assert roofline_fraction(1, 1.0, None) is None and roofline_fraction(1, 1.0, 0.0) is None


def test_scaling_efficiency():
    sc = efficiency.scaling({1: 10.0, 2: 18.0, 16: 140.5})
    assert sc[2] == pytest.approx({"speedup": 1.8, "efficiency": 0.9})
    assert sc[16]["speedup"] == pytest.approx(14.05) and sc[16]["efficiency"] == pytest.approx(0.878125)


def _qwen2(tied: bool) -> dict:
    return {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 256, "vocab_size": 1000,
            "tie_word_embeddings": tied}


def test_decode_bytes_tied_qwen2_by_hand():
    # per layer: q 128x128, k 64x128, v 64x128, o 128x128, gate/up 256x128, down 128x256 = 147,456 weights;
    # biases 128+64+64 and two norms of 128 = 512; final norm 128.  bf16: 2 bytes each.
    d = efficiency.decode_bytes(_qwen2(tied=True), "bfloat16", context_len=100)
    assert d["matrices"] == 2 * 147_456 * 2 == 589_824
    assert d["vectors"] == (2 * 512 + 128) * 2 == 2_304
    assert d["embedding_row"] == 0  # tied: the shared table is read in full as lm_head, counted once
    assert d["lm_head"] == 1000 * 128 * 2 == 256_000
    assert d["kv_cache"] == 2 * 2 * 1 * 64 * 100 * 2 == 51_200
    assert d["weights"] == 848_128 and d["total"] == 899_328 and d["tied"] is True


def test_decode_bytes_untied_qwen2_by_hand():
    d = efficiency.decode_bytes(_qwen2(tied=False), "bfloat16", context_len=0)
    assert d["embedding_row"] == 128 * 2  # one row of the input embedding per decoded token
    assert d["lm_head"] == 256_000 and d["tied"] is False
    assert d["weights"] == d["total"] == 589_824 + 2_304 + 256 + 256_000 == 848_384
    # every parameter (the old count) would add the rest of the embedding table: 999 rows
    assert 2 * (294_912 + 1_152 + 2 * 128_000) - d["weights"] == 999 * 128 * 2


def test_decode_bytes_first_generation_qwen_by_hand():
    cfg = {"architectures": ["QWenLMHeadModel"], "hidden_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 2, "kv_channels": 64, "intermediate_size": 512, "vocab_size": 1000}
    d = efficiency.decode_bytes(cfg, "float32", context_len=10)
    # per layer: c_attn 384x128, attn c_proj 128x128, w1/w2 256x128, mlp c_proj 128x256 = 163,840;
    # c_attn bias 384, ln_1/ln_2 128 each; ln_f 128.  No GQA: 2 KV heads of 64.  fp32: 4 bytes.
    assert d["matrices"] == 2 * 163_840 * 4 == 1_310_720
    assert d["vectors"] == (2 * 640 + 128) * 4 == 5_632
    assert (d["embedding_row"], d["lm_head"]) == (128 * 4, 1000 * 128 * 4)
    assert d["kv_cache"] == 2 * 2 * 2 * 64 * 10 * 4 == 20_480
    assert d["total"] == 1_310_720 + 5_632 + 512 + 512_000 + 20_480


def test_decode_bytes_of_the_real_configs():
    import json

    from npu_tutorials.inputs.cards import load_card

    pal = efficiency.decode_bytes(load_card("palmyra-mini").config, "bfloat16")
    q05 = efficiency.decode_bytes(load_card("qwen2.5-0.5b").config, "bfloat16", context_len=1)
    # palmyra-mini (untied): 3.55 GB of parameters, of which a decode step reads 3.09 GB
    assert round(pal["weights"] / 1e9, 2) == 3.09 and pal["embedding_row"] == 1536 * 2
    # Qwen2.5-0.5B (tied, 494.0 M parameters): all of them, once; KV 24 layers x 2 heads x 64 x 2 x 2 B per token
    assert q05["weights"] == 2 * 494_032_768 and q05["kv_cache"] == 2 * 24 * 2 * 64 * 2
    assert json.dumps(q05)  # JSON-able


def test_checkpoint_decode_bytes_reads_the_checkpoint_config(tiny):
    """The tied tiny stand-in: a decode step reads every parameter of the file once (counted from the file)."""
    from safetensors import safe_open

    with safe_open(str(tiny.path / "model.safetensors"), "pt") as f:
        n = sum(__import__("math").prod(f.get_slice(k).get_shape()) for k in f.keys())
    assert efficiency.checkpoint_decode_bytes(tiny.path, "bfloat16")["weights"] == 2 * n
    # K and V x 2 layers x 2 KV heads x head_dim 64 x 7 tokens x 4 bytes
    assert efficiency.checkpoint_decode_bytes(tiny.path, "float32", 7)["kv_cache"] == 2 * 2 * 2 * 64 * 7 * 4


def test_mean_decode_context():
    assert efficiency.mean_decode_context(128, 64) == 160


def test_transformers_baseline_states_its_conditions(tiny):
    def one(batch, *, dtype="bfloat16", repeats=3, **point):  # one condition of the baseline
        return efficiency.hf_generate_throughput_points(tiny.path, [dict(batch=batch, **point)], dtype=dtype,
                                                        repeats=repeats)[0]

    r = one(2, input_len=6, output_len=3, dtype="float32", repeats=3)
    c = r["conditions"]
    assert (c["batch"], c["input_len"], c["output_len"], c["dtype"], c["device"], c["repeats"]) == \
        (2, 6, 3, "float32", "cpu", 3)
    assert len(r["seconds"]) == len(r["output_tokens_per_s_runs"]) == 3 and r["summary"]["n"] == 3
    assert r["output_tokens_per_s"] == r["summary"]["median"] > 0
    # given prompts of unequal length: left-padded, each row still generates exactly output_len tokens
    g = one(2, output_len=2, dtype="float32", repeats=1, prompt_ids=[[9707, 11, 1128], [9707, 11]])
    assert g["conditions"]["input_lens"] == [3, 2] and g["conditions"]["prompt_source"] == "given token ids"
    with pytest.raises(ValueError, match="need 3"):
        one(3, output_len=2, prompt_ids=[[1, 2]])
    with pytest.raises(ValueError, match="output_len"):
        one(1, input_len=4)


@pytest.mark.slow  # the quick CPU build shows a recorded baseline; the full profile runs this
def test_transformers_baseline_in_its_own_process_with_the_benchmarks_prompts(tiny):
    """JSON in, JSON out; the prompts are those `vllm bench serve --seed 7` sends."""
    require_vllm()
    from npu_tutorials.engine.bench import random_prompt_ids

    from npu_tutorials.engine import isolated

    (r,) = isolated.call("npu_tutorials.measure.efficiency:hf_generate_throughput_points", str(tiny.path),
                         [dict(batch=2, input_len=16, output_len=2, bench_seed=7, bench_num_prompts=4)], "cpu",
                         "float32", repeats=1, timeout=600)
    assert r["conditions"]["input_lens"] == [16, 16] and "seed 7, 4 prompts" in r["conditions"]["prompt_source"]
    ids = random_prompt_ids(str(tiny.path), num_prompts=4, input_len=16, output_len=2, seed=7)
    assert [len(i) for i in ids] == [16] * 4
    assert r["conditions"]["prompt_sha256"] == efficiency.prompt_sha256(ids[:2])  # the run's first two prompts
    assert ids != random_prompt_ids(str(tiny.path), num_prompts=4, input_len=16, output_len=2, seed=8)


def test_baseline_points_share_one_model_load(tiny, monkeypatch):
    """The page's batch-1 and batch-16 baselines run in one process with one model load."""
    import transformers

    loads = []
    real = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    rs = efficiency.hf_generate_throughput_points(
        tiny.path, [dict(batch=1, input_len=5, output_len=2), dict(batch=2, input_len=5, output_len=2)],
        dtype="float32", repeats=1)
    assert len(loads) == 1
    assert [(r["conditions"]["batch"], r["conditions"]["output_len"]) for r in rs] == [(1, 2), (2, 2)]


def test_the_limit_names_the_largest_part_of_a_token_even_the_unexplained_one():
    from npu_tutorials.record.schema import Stat, Tuning, TuningRow
    from npu_tutorials.tutorial.steps_tuning import TuningSteps

    def limit(tpot, bandwidth_ms, overhead_ms):
        row = TuningRow(name="graph mode", flags=[], startup_s=1.0, tpot_ms=Stat.of([tpot]),
                        throughput_c1=Stat.of([1.0]))
        return TuningSteps._limit_text(None, row, Tuning(rows=[row], fixed_overhead_ms=overhead_ms,
                                                          bandwidth_bound_ms=bandwidth_ms))

    assert "The memory bandwidth dominates" in limit(121.2, 65.7, 5.3)  # this machine's palmyra-mini build
    assert "The fixed overhead dominates" in limit(30.0, 10.0, 15.0)
    assert "The time not explained by either dominates" in limit(150.0, 40.0, 5.0)
