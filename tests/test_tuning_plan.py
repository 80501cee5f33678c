"""Which knobs and servers the tuning section runs per backend and profile, and what it concludes.

The servers are fakes that record what would start (argv and environment); the measurements are a fake
device on which some knobs help, some do nothing and one hurts.  The real steps (:class:`TuningSteps`, the
server pool and :meth:`Platform.server_spec`) decide everything else.
"""

import dataclasses
import io
import platform
import shutil

import pytest

from docs import machine, sweep_doc
from npu_tutorials.measure import tuning_plan as plan
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.record.schema import Stat, TuningRow

JEMALLOC = f"/usr/lib/{platform.machine()}-linux-gnu/libjemalloc.so.2"


def _names(sel):
    return [k.name for k in sel.run]


# -- the pure selection -------------------------------------------------------------------------------------

def test_npu_knobs_of_a_one_card_server_in_the_full_profile():
    card = load_card("palmyra-mini")
    sel = plan.select_knobs(card, "npu", "full", environ={}, machine="aarch64", exists=lambda p: True)
    assert _names(sel) == ["task queue level 2", "task queue level 1", "CPU affinity", "jemalloc",
                           "full decode graph", "async scheduling", "weight prefetch", "8192 batched tokens",
                           "block size 128", "graph capture sizes 1-16"]
    assert next(k for k in sel.run if k.name == "jemalloc").env == {
        "LD_PRELOAD": "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"}
    assert {k: str(v) for k, v in sel.skipped.items()} == {"HCCL AIV expansion": "a setting for a server on 2 or more cards; this model's server "
                                                 "uses 1"}


def test_a_multi_card_server_runs_the_multi_card_knob():
    card = load_card("palmyra-mini")
    two = card.model_copy(update={"serve": card.serve.model_copy(update={"tensor_parallel_size": 2})})
    sel = plan.select_knobs(two, "npu", "full", environ={}, exists=lambda p: True)
    assert "HCCL AIV expansion" in _names(sel) and sel.skipped == {}


def test_what_the_host_lacks_or_already_has_is_not_measured_and_says_why():
    card = load_card("palmyra-mini")
    sel = plan.select_knobs(card, "npu", "full", environ={"TASK_QUEUE_ENABLE": "2"}, machine="x86_64",
                            exists=lambda p: False)
    assert "task queue level 2" not in _names(sel) and "task queue level 1" in _names(sel)
    assert str(sel.skipped["task queue level 2"]) == "this build's environment already has TASK_QUEUE_ENABLE=2"
    assert str(sel.skipped["jemalloc"]) == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 is not installed on this build's host"
    lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    sel = plan.select_knobs(card, "npu", "full", environ={"LD_PRELOAD": lib}, machine="x86_64", exists=lambda p: False)
    assert str(sel.skipped["jemalloc"]) == f"this build's environment already has LD_PRELOAD with {lib}"


@pytest.mark.parametrize("backend, profile, run", [
    ("cpu", "full", ["no thread binding", "one reserved core", "8 GiB KV cache"]),
    ("cpu", "quick", []),
    ("cuda", "full", ["graph capture sizes 1-16"]),
    ("npu", "quick", []),
])
def test_knobs_per_backend_and_profile(backend, profile, run):
    sel = plan.select_knobs(load_card("palmyra-mini"), backend, profile, environ={}, exists=lambda p: True)
    assert _names(sel) == run
    if profile == "quick":
        assert sel.skipped and all("measured in the full profile only" in str(why) for why in sel.skipped.values())


@pytest.mark.parametrize("key", known_models())
def test_cards_without_a_tuning_section_start_no_tuning_server(key):
    card = load_card(key)
    starts = plan.starts(card, "npu", "full", environ={}, exists=lambda p: True)
    if card.tuning is None:
        assert starts == {"configurations": 0, "combination": 0, "overhead": 0}
    else:
        assert starts == {"configurations": 12, "combination": 1, "overhead": 1}  # eager, graph, 10 knobs
        assert plan.starts(card, "npu", "full", sweep_mode="graph", environ={}, exists=lambda p: True)[
                   "configurations"] == 11


def _row(name, tpot, thr, knobs=()):
    return TuningRow(name=name, flags=[], knobs=list(knobs), startup_s=1.0,
                     tpot_ms=Stat.of([tpot * f for f in (0.99, 1.0, 1.0, 1.01)]), throughput_c1=Stat.of([1.0]),
                     throughput_high=Stat.of([thr * f for f in (0.99, 1.0, 1.01)]), high_concurrency=16)


@pytest.mark.parametrize("tpot, thr, expected", [(8.0, 100.0, "better"), (10.0, 130.0, "better"),
                                                 (12.0, 100.0, "worse"), (10.05, 100.5, "no clear change"),
                                                 (8.0, 70.0, "mixed")])
def test_verdict_against_graph_mode_is_beyond_the_spread_of_both(tpot, thr, expected):
    assert plan.verdict(_row("x", tpot, thr), _row(plan.GRAPH, 10.0, 100.0)) == expected


# -- the servers an NPU build starts: fakes for the server and the device ------------------------------------

FAKE_NPU = {  # what each setting does to TPOT (factor) and to throughput at 16 (factor) on the fake device
    "FULL_DECODE_ONLY": (0.8, 1.0), "TASK_QUEUE_ENABLE=1": (0.9, 1.0), "TASK_QUEUE_ENABLE=2": (0.93, 1.0),
    "--async-scheduling": (1.0, 1.2), "weight_prefetch_config": (1.1, 1.0),
}


class FakeServer:
    started: list = []
    refuse = ""  # a setting this fake engine refuses to start with

    def __init__(self, argv, *, host, port, env, log_path, on_wait, stream, backend="cpu"):
        self.argv, self.env, self.base_url, self.proc, self.startup_s = argv, env, f"http://{host}:{port}", None, 42.0
        self.log_path, self.backend, self.sampler = log_path, backend, None  # VLLMServer's; no process to sample

    def memory_peak(self):
        from npu_tutorials.engine.memory import MemoryPeak

        return MemoryPeak()

    def start(self):
        FakeServer.started.append(self)
        if FakeServer.refuse and FakeServer.refuse in " ".join(self.argv):
            raise TutorialError("the vLLM server exited with code 1 before it was ready; last lines of its log:\n"
                                "ValueError: no such thing")

    def stop(self):
        pass


def fake_point(n, name):
    srv = FakeServer.started[-1]
    return measure(" ".join(srv.argv + [f"{k}={v}" for k, v in srv.env.items()]), n)


def measure(text, n):
    """(throughput, TPOT, TTFT) at concurrency ``n`` of a server with the settings in ``text``."""
    tpot = thr = 1.0
    for setting, (t, h) in FAKE_NPU.items():
        if setting in text:
            tpot, thr = tpot * t, thr * h
    tpots = [20.0 * tpot * f for f in (0.99, 1.0, 1.0, 1.01)]
    return Stat.of([n * 1000 / t * thr for t in tpots[:3]]), Stat.of(tpots), Stat.of([100.0])


@pytest.fixture
def npu_build(monkeypatch, tmp_path):
    """A tutorial object on an NPU build (no device, no vLLM): fake servers and measurements."""
    from npu_tutorials.tutorial import servers
    from npu_tutorials.measure import tuning_plan
    from npu_tutorials.core.progress import Progress
    from npu_tutorials.record.schema import Efficiency
    from npu_tutorials.tutorial import Tutorial

    FakeServer.started = []
    monkeypatch.setattr(servers, "VLLMServer", FakeServer)
    monkeypatch.setattr(tuning_plan, "host_file_exists", lambda p: p == JEMALLOC)
    for var in ("ASCEND_RT_VISIBLE_DEVICES", "LD_PRELOAD", "TASK_QUEUE_ENABLE", "CPU_AFFINITY_CONF"):
        monkeypatch.delenv(var, raising=False)
    tiny = tmp_path / "tiny"
    monkeypatch.setattr("npu_tutorials.inputs.standin.ensure_standin", lambda card, **kw: type("W", (), {"path": tiny}))

    made = []
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "results"))

    def make(key, backend="npu"):
        from npu_tutorials.engine.platform import EngineDtype, platform_for
        from npu_tutorials.tutorial import TutorialState

        for old in made:  # stopped, not abandoned: nothing of a fake run is written
            old.stop()
        FakeServer.started, FakeServer.refuse = [], ""
        card = load_card(key)
        doc = sweep_doc(key, mach=machine(backend, "Ascend910B3"), profile="full", built_at="2026-12-01T08:00:00+00:00")
        doc.results.efficiency = Efficiency.model_construct(measured_bandwidth=1.0e12)
        for p in doc.results.concurrency_sweep:  # the sweep's server: graph mode with the card's defaults
            p.output_throughput, p.tpot_ms, p.ttft_ms = measure("", p.concurrency)
        plat = platform_for(backend)
        plan = dataclasses.replace(plat.plan(card, "full"), dtype=EngineDtype("bfloat16", False, ""),
                                   accuracy_dtype="bfloat16")
        state = TutorialState(card=card, platform=plat, env=None, progress=Progress(key, io.StringIO()),
                              profile_name="full", plan=plan, threads=1, mode="standin", doc=doc,
                              artifacts=tmp_path, t0=0.0, serve_path=tmp_path / "weights",
                              device_env={"ASCEND_RT_VISIBLE_DEVICES": "0"} if backend == "npu" else {})
        shutil.copytree(card.config_path, state.serve_path, dirs_exist_ok=True)
        state.port = lambda: 8123
        state.bench_worker = lambda: None
        tut = Tutorial(key, state)
        tut.start_server()  # starts nothing: the tuning section starts its own servers
        tut.performance.point = fake_point
        made.append(tut)
        return tut

    yield make
    for tut in made:
        tut.stop()


def _added(tut, srv):
    """What a started server adds to the build's graph-mode command and environment."""
    base = list(tut.state.servers.spec_for("performance", port=8123, graphs=True).argv)
    argv = list(srv.argv)
    argv[argv.index("--model") + 1] = str(tut.state.serve_path)  # the tiny model's server: the same otherwise
    assert argv[:len(base)] == base
    env = {k: v for k, v in srv.env.items() if tut.state.run_env.get(k) != v}
    return argv[len(base):], env


def test_the_servers_an_npu_build_of_each_card_starts_for_tuning(npu_build):
    for key in known_models():
        tut = npu_build(key)
        if tut.card.tuning is None:
            with pytest.raises(TutorialError, match="has no tuning section"):
                tut.tuning()
            assert FakeServer.started == []
            continue
        out = tut.tuning()
        started = [_added(tut, s) for s in FakeServer.started]
        cc = "--compilation-config"
        assert started == [
            (["--enforce-eager"], {}),  # the report's conditions; graph mode is the sweep's own server
            ([], {"TASK_QUEUE_ENABLE": "2"}),
            ([], {"TASK_QUEUE_ENABLE": "1"}),
            ([], {"CPU_AFFINITY_CONF": "1"}),
            ([], {"LD_PRELOAD": JEMALLOC}),
            ([cc, '{"cudagraph_mode": "FULL_DECODE_ONLY"}'], {}),
            (["--async-scheduling"], {}),
            (["--additional-config", '{"weight_prefetch_config": {"enabled": true}}'], {}),
            (["--max-num-batched-tokens", "8192"], {}),
            (["--block-size", "128"], {}),
            ([cc, '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'], {}),
            # the knobs that helped, largest gain first; task queue level 2 conflicts with level 1, which gained more
            ([cc, '{"cudagraph_mode": "FULL_DECODE_ONLY"}', "--async-scheduling"], {"TASK_QUEUE_ENABLE": "1"}),
            # the tiny model of the fixed overhead, served in the best configuration
            ([cc, '{"cudagraph_mode": "FULL_DECODE_ONLY"}', "--async-scheduling"], {"TASK_QUEUE_ENABLE": "1"}),
        ]
        for srv in FakeServer.started:
            assert srv.env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"  # the build's own settings
            assert srv.env["ASCEND_RT_VISIBLE_DEVICES"] == "0" and "--enforce-eager" not in srv.argv[:-1]
        assert FakeServer.started[-1].argv[FakeServer.started[-1].argv.index("--model") + 1] == str(tut.state.serve_path.parent / "tiny")
        combo = "graph mode + best combination (full decode graph + task queue level 1 + async scheduling)"
        assert [r.name for r in out.rows][:2] == [plan.EAGER, plan.GRAPH] and out.rows[-1].name == combo
        assert out.best == combo and out.rows[-1].knobs == ["full decode graph", "task queue level 1", "async scheduling"]
        assert {k: str(v) for k, v in out.skipped.items()} == {"HCCL AIV expansion": "a setting for a server on 2 or more cards; this model's server uses 1"}
        assert out.build_env["TASK_QUEUE_ENABLE"] == "" and out.build_env["LD_PRELOAD"] == ""
        assert all(r.fraction and r.tpot_ms.n > 1 and r.throughput_high.n == 3 for r in out.rows)
        assert out.rows[1].startup_s == 30.0  # the sweep's server, not a new one
        assert "export TASK_QUEUE_ENABLE=1" in out.command and "--async-scheduling" in out.command
        assert "vllm serve ./palmyra-mini" in out.command and "--enforce-eager" not in out.command


@pytest.mark.parametrize("backend, added", [
    ("cpu", [([], {}), ([], {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}), ([], {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}),
             ([], {"VLLM_CPU_KVCACHE_SPACE": "8"}), ([], {})]),
    ("cuda", [(["--enforce-eager"], {}), (["--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'],
                                          {}), ([], {})]),
])
def test_cpu_and_cuda_builds_start_their_own_knobs(npu_build, backend, added):
    tut = npu_build("palmyra-mini", backend)
    out = tut.tuning()
    assert [_added(tut, s) for s in FakeServer.started] == added  # no knob helps on the fake: no combination
    assert out.best == plan.GRAPH and out.skipped == {}


# -- the page: the table, the knobs, the NPU tab ---------------------------------------------------------------

def test_the_tuning_views_name_each_verdict_the_skipped_knobs_and_the_sources(npu_build):
    from npu_tutorials.views import Views

    tut = npu_build("palmyra-mini")
    tut.tuning()
    show = Views(tut.doc, tut.card)
    table = repr(show.tuning.tuning_table())
    assert "task queue level 2" in table and "weight prefetch" in table and "HCCL AIV expansion: a setting" in table
    verdicts = {r[0]: r[-1] for r in show.tuning.tuning_table().rows}
    assert verdicts["graph mode + full decode graph"] == "better" and verdicts["graph mode + weight prefetch"] == "worse"
    assert verdicts["graph mode + block size 128"] == "no clear change" and verdicts[plan.GRAPH] == "–"
    knobs = show.tuning.tuning_knobs_table()
    measured = {r[0]: r[-1] for r in knobs.rows}
    assert measured["jemalloc"] == "yes" and measured["HCCL AIV expansion"].startswith("a setting for a server on 2")
    assert all("vllm-ascend" in r[2] for r in knobs.rows)


def test_the_npu_tab_offers_the_measured_best_marked_with_card_and_date(npu_build, monkeypatch, tmp_path):
    from npu_tutorials.site import deploy_page
    from npu_tutorials.site.deploy_page import deploy_rst
    from npu_tutorials.record.results import write_doc

    card = load_card("palmyra-mini")
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "recorded"))
    npu = deploy_rst(card).split(".. tab-item:: Ascend NPU")[1].split(".. tab-item::")[0]
    assert "**Tuned (measured).** Nothing is measured yet" in npu and "full decode graph" in npu
    assert "Tuned (measured)" not in deploy_rst(load_card("qwen2.5-0.5b"))  # no tuning section, nothing to say
    tut = npu_build("palmyra-mini")
    tut.tuning()
    tut.doc.results.efficiency = None  # the fake's stand-in section; the tab reads the tuning section only
    write_doc(tut.doc, tmp_path / "recorded" / "palmyra-mini" / "npu.json")
    npu = deploy_rst(card).split(".. tab-item:: Ascend NPU")[1].split(".. tab-item::")[0]
    assert ("The best combination this page measured, full decode graph + task queue level 1 + async scheduling, "
            "on Ascend910B3 x 1 on 2026-12-01 (full profile") in npu
    assert "export TASK_QUEUE_ENABLE=1" in npu and "--async-scheduling" in npu and "in place of step 4" in npu
    tuned = deploy_page.tuned_npu(card)[0]  # parsed with vLLM's parser by tests/test_commands.py
    assert tuned[:3] == ["vllm", "serve", "./palmyra-mini"] and "--async-scheduling" in tuned


def test_the_runner_guides_estimate_includes_the_tuning_servers(tmp_path, monkeypatch):
    from pathlib import Path

    from npu_tutorials.site.generated import write_generated

    md = (Path(__file__).resolve().parents[1] / "docs" / "source" / "runner.md").read_text()
    estimate = md.split("**What it costs.**")[1].split("## ")[0]
    assert "```{include} _generated/runner_tuning.md\n```" in estimate and "tuning knobs alone" in estimate
    monkeypatch.setenv("TUTORIAL_RECORDED_DIR", str(tmp_path / "none"))
    gen = tmp_path / "_generated" / "runner_tuning.md"
    assert gen in write_generated(tmp_path)
    text = gen.read_text()
    n = plan.starts(load_card("palmyra-mini"), "npu", "full", sweep_mode="graph", environ={}, exists=lambda p: True)
    assert n == {"configurations": 11, "combination": 1, "overhead": 1}  # eager + 10 knobs; graph mode is the sweep's
    assert ("| palmyra-mini | up to 13: 11 configurations (the report's conditions and each knob alone), at most 1 "
            "combination of the knobs that helped, 1 tiny model for the fixed overhead | a server start, then 3 "
            "benchmark runs at concurrency 1 (2 requests) and 3 at 16 (32 requests) | none recorded |") in text
    assert "| qwen2.5-0.5b | none (its card has no tuning section) | | |" in text
    monkeypatch.delenv("TUTORIAL_RECORDED_DIR")  # the repository's recorded builds: their tuning steps' time
    assert " s for 2 servers on AMD EPYC (2 cores) (quick profile, " in plan.runner_tuning_md()


def test_a_preload_reaches_the_server_in_front_of_the_builds_own_and_the_row_keeps_the_readers_form(npu_build,
                                                                                                 monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/usr/local/lib/libx.so")
    tut = npu_build("palmyra-mini")
    out = tut.tuning()
    [srv] = [s for s in FakeServer.started if JEMALLOC in s.env.get("LD_PRELOAD", "")]
    assert srv.env["LD_PRELOAD"] == f"{JEMALLOC}:/usr/local/lib/libx.so"
    assert plan.row_named(out.rows, "graph mode + jemalloc").env == {"LD_PRELOAD": JEMALLOC}
    assert out.build_env["LD_PRELOAD"] == "/usr/local/lib/libx.so"


def test_a_knob_whose_server_fails_is_not_measured_and_the_section_goes_on(npu_build):
    tut = npu_build("palmyra-mini")
    FakeServer.refuse = "FULL_DECODE_ONLY"
    out = tut.tuning()
    assert str(out.skipped["full decode graph"]) == ("its server failed: the vLLM server exited with code 1 before it "
                                                "was ready; last lines of its log:")
    assert plan.row_named(out.rows, "graph mode + full decode graph") is None
    assert out.best == "graph mode + best combination (task queue level 1 + async scheduling)"
