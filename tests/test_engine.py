"""The real vLLM engine on a tiny stand-in: server lifecycle, benchmark, logits agreement.

One server is started for the module (engine start-up dominates the time).
"""


import pytest

pytest.importorskip("vllm")

from npu_tutorials import accuracy, reference  # noqa: E402
from npu_tutorials.bench import run_serving_benchmark  # noqa: E402
from npu_tutorials.cards import BenchProfile, LogitsCheck  # noqa: E402
from npu_tutorials.commands import build_env, server_argv  # noqa: E402
from npu_tutorials.errors import TutorialError  # noqa: E402
from npu_tutorials.server import VLLMServer, _group_alive, free_port  # noqa: E402

pytestmark = pytest.mark.engine
HOST = "127.0.0.1"


def _server(card, path, port, tmp, extra=(), **kw):
    argv = server_argv(card, path, "cpu", host=HOST, port=port, extra=list(extra))
    return VLLMServer(argv, host=HOST, port=port, env=build_env(card, "cpu"), log_path=tmp / "server.log", **kw)


@pytest.fixture(scope="module")
def server(card, tiny, tmp_path_factory):
    srv = _server(card, tiny.path, free_port(), tmp_path_factory.mktemp("srv"), accuracy.RAW_LOGITS_FLAGS,
                  startup_timeout=600)
    srv.start()
    yield srv
    pgid = srv.proc.pid if srv.proc else None
    srv.stop()
    assert pgid is None or not _group_alive(pgid)


def test_server_answers(server, card):
    assert server.models() == [card.serve.served_model_name]
    r = server.post("/v1/completions", {"model": card.serve.served_model_name, "prompt": "Hello, what is your name?",
                                        "max_tokens": 5, "temperature": 0})
    assert r["usage"]["prompt_tokens"] == 7 and r["usage"]["completion_tokens"] == 5


def test_busy_port_is_refused_before_starting(server, card, tiny, tmp_path):
    srv = _server(card, tiny.path, server.port, tmp_path)
    with pytest.raises(TutorialError, match=rf"^port {server.port} on 127.0.0.1 is busy"):
        srv.start()
    assert srv.proc is None


def test_serving_benchmark_through_vllm_bench(server, card, tiny, tmp_path):
    prof = BenchProfile(num_prompts=4, input_len=8, output_len=6, request_rate="inf")
    res = run_serving_benchmark(server, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                out_dir=tmp_path, name="b")
    s = res.summary()
    assert s["completed"] == 4 and s["failed"] == 0
    assert s["output_throughput"] > 0 and s["mean_ttft_ms"] > 0 and s["mean_tpot_ms"] > 0
    assert res.data["output_lens"] == [6, 6, 6, 6]  # --ignore-eos
    assert len(res.per_request_tpot_ms()) == 4


def test_logits_agreement_engine_vs_fp32_reference(server, card, tiny):
    check = LogitsCheck(prompts=["The capital of France is", "def fibonacci(n):"],
                        thresholds={"nmse_pct_max": 1.0, "top1_pct_min": 0.0})
    rep = accuracy.logits_agreement(server, card.serve.served_model_name, tiny.path, check, card.vocab_size, False)
    assert len(rep.rows) == 2 and rep.errors.size == 2 * card.vocab_size
    s = rep.summary
    # bf16 engine vs fp32 reference on the same weights: close, but not bit-identical
    assert 0 < s["nmse_pct"] < 1.0
    assert s["cosine"] > 0.999
    assert "stand-in" in rep.verdict().caveat


def test_engine_logits_differ_from_another_model(server, card, tiny):
    """The comparison can fail: a different input gives clearly different logits."""
    ids = reference.tokenize(tiny.path, "The capital of France is")
    eng = accuracy.engine_last_logits(server, card.serve.served_model_name, ids, card.vocab_size)
    other = reference.last_logits(tiny.path, reference.tokenize(tiny.path, "Completely different words here"))
    from npu_tutorials.metrics import normalized_mse_pct

    assert normalized_mse_pct(eng, other) > 1.0


def test_server_exits_at_start_with_log_tail(card, tiny, tmp_path):
    """A server that exits during start-up: a clear error with the log's tail, nothing left running."""
    srv = _server(card, tiny.path, free_port(), tmp_path, ["--logprobs-mode", "no-such-mode"])
    with pytest.raises(TutorialError, match=r"the vLLM server exited with code \d+ before it was ready") as exc:
        srv.start()
    assert "no-such-mode" in str(exc.value)  # the log's tail says why
    assert srv.proc is None


def test_server_dies_at_start_on_missing_weights(card, tmp_path):
    srv = _server(card, tmp_path / "no-weights", free_port(), tmp_path)
    with pytest.raises(TutorialError, match="exited with code"):
        srv.start()


def test_short_sweeps_through_the_real_engine(server, card, tiny, tmp_path):
    from npu_tutorials.cards import Sweep
    from npu_tutorials.efficiency import scaling
    from npu_tutorials.sweeps import concurrency_sweep, input_length_sweep

    sw = Sweep(input_lens=[16, 48], sweep_output_len=3, requests_per_point=2, concurrency=[1, 2],
               baseline_new_tokens=2)
    rows = input_length_sweep(server, sw, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                              out_dir=tmp_path)
    assert [r["input_len"] for r in rows] == [16, 48]
    assert all(r["prefill_ms"] > 0 and r["tpot_ms"] > 0 and r["ttft_concurrent_ms"] > 0 for r in rows)
    conc = concurrency_sweep(server, sw, BenchProfile(num_prompts=2, input_len=16, output_len=4),
                             model=card.serve.served_model_name, tokenizer=str(tiny.path), out_dir=tmp_path)
    assert [r["concurrency"] for r in conc] == [1, 2] and all(r["completed"] == 2 * r["concurrency"] for r in conc)
    sc = scaling({r["concurrency"]: r["output_throughput"] for r in conc})
    assert sc[1] == {"speedup": 1.0, "efficiency": 1.0} and sc[2]["speedup"] > 0


def test_greedy_agreement_on_the_engine(server, card, tiny):
    from npu_tutorials.consistency import text_consistency

    rows = text_consistency(server, card.serve.served_model_name, tiny.path, ["The capital of France is"], 6,
                            chat=False)
    r = rows[0].to_dict()
    assert len(rows[0].engine_ids) == len(rows[0].reference_ids) == 6
    assert 0 <= r["match_rate"] <= 1 and (r["first_divergence"] is None) == (r["match_rate"] == 1.0)


def test_forward_consistency_every_position(server, card, tiny):
    from npu_tutorials.cards import ConsistencyCheck
    from npu_tutorials.consistency import forward_consistency

    check = ConsistencyCheck(text="The capital of France is Paris.", thresholds={
        "top1_pct_min": 0, "ppl_rel_diff_pct_max": 5, "cosine_min": 0.99, "kl_max": 0.01})
    rep = forward_consistency(server, card.serve.served_model_name, tiny.path, check, card.vocab_size, False)
    assert rep.num_tokens == 7 and len(rep.positions) == 6
    # random weights: perplexity near the vocabulary size on both sides, and close to each other
    assert rep.ppl_reference > 1000 and rep.ppl_rel_diff_pct < 5
    assert rep.cosine > 0.99 and rep.kl_nats < 0.01


def test_failed_requests_fail_the_benchmark(server, card, tiny, tmp_path):
    """A run whose requests fail must raise, not report the survivors' figures."""
    prof = BenchProfile(num_prompts=2, input_len=9000, output_len=2)  # longer than --max-model-len 8192
    with pytest.raises(TutorialError, match=r"2 of 2 requests failed"):
        run_serving_benchmark(server, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                              out_dir=tmp_path, name="toolong")


def test_benchmark_runs_draw_different_prompts(server, card, tiny, tmp_path):
    """Distinct runs must not share prompts (the prefix cache would flatter later TTFTs)."""
    prof = BenchProfile(num_prompts=2, input_len=32, output_len=2)
    a = run_serving_benchmark(server, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                              out_dir=tmp_path, name="first")
    b = run_serving_benchmark(server, prof, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                              out_dir=tmp_path, name="second")
    assert "--seed" in a.command and a.command[a.command.index("--seed") + 1] != b.command[b.command.index("--seed") + 1]
