"""Which knobs and servers the tuning section runs per backend and profile, and what it concludes.

The servers are fakes that record what would start (argv and environment); the measurements are a fake
device on which some knobs help, some do nothing and some hurt.  The real steps (:class:`TuningSteps`, the
server pool and :meth:`Platform.server_spec`) decide everything else.  An NPU build runs with the environment
vllm-ascend's v0.23.0 image gives it (:data:`IMAGE_ENV`), so it measures, and combines, only what a container of
that image can change; a host set up with pip (:data:`PIP_HOST_ENV`) is the one other NPU host modelled.
"""

import dataclasses
import io
import os
import platform
import shutil

import pytest

from docs import machine, sweep_doc
from npu_tutorials.measure import tuning_plan as plan
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.record.schema import Stat, TuningRow

JEMALLOC = f"/usr/lib/{platform.machine()}-linux-gnu/libjemalloc.so.2"
# The environment a build has in vllm-ascend's image, quay.io/ascend/vllm-ascend:v0.23.0 (vllm-ascend v0.23.0,
# Dockerfile): ENV lines 59-62 (SOC_VERSION from ARG line 57), and the jemalloc preload that Dockerfile:75 appends
# to ~/.bashrc (libjemalloc2 installed at Dockerfile:27), which a CI step's shell never reads but the build's
# bootstrap exports where the library exists (scripts/bootstrap_env.sh, IMAGE_BASHRC).  The CANN base image's own
# variables (ASCEND_TOOLKIT_HOME, LD_LIBRARY_PATH...) set no knob and are left out.
IMAGE_ENV = {"DEBIAN_FRONTEND": "noninteractive", "SOC_VERSION": "ascend910b1", "TASK_QUEUE_ENABLE": "1",
             "OMP_NUM_THREADS": "1", "LD_PRELOAD": JEMALLOC}
# vllm-ascend set up with pip on a host (its docs/source/installation.md, "Set up using Python"): none of the
# image's settings, and libjemalloc2 not installed (where it is, the bootstrap preloads it as in the image).
PIP_HOST_ENV: dict[str, str] = {}
# What the fake device's builds measure in the image: the knobs the image's baseline lacks, in the card's order
# (task queue level 1 and jemalloc: the image sets them; async scheduling and block size 128: vLLM 0.23.0 and
# vllm-ascend v0.23.0 do them by default; HCCL AIV expansion: a server on 2 cards or more).
IN_THE_IMAGE = ["task queue level 2", "CPU affinity", "full decode graph", "weight prefetch", "8192 batched tokens",
                "graph capture sizes 1-16"]
HCCL_SKIP = "a setting for a server on 2 or more cards; this model's server uses 1"


def _names(sel):
    return [k.name for k in sel.run]


# -- the pure selection -------------------------------------------------------------------------------------

def test_npu_knobs_of_a_one_card_server_in_the_image():
    """On an Atlas A2 host (aarch64) in vllm-ascend's v0.23.0 image: what the image's baseline already has is not
    measured, and says so."""
    card = load_card("palmyra-mini")
    lib = "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"
    sel = plan.select_knobs(card, "npu", "full", environ={**IMAGE_ENV, "LD_PRELOAD": lib}, machine="aarch64",
                            exists=lambda p: True, vllm_ascend="0.23.0")
    assert _names(sel) == IN_THE_IMAGE
    skipped = {k: str(v) for k, v in sel.skipped.items()}
    assert skipped == {
        "task queue level 1": "this build's environment already has TASK_QUEUE_ENABLE=1, as vllm-ascend's image sets "
                              "it (vllm-ascend v0.23.0 Dockerfile:61, ENV)",
        "jemalloc": f"this build's environment already has LD_PRELOAD with {lib}, as vllm-ascend's image sets it "
                    "(vllm-ascend v0.23.0 Dockerfile:75, ~/.bashrc; the build's bootstrap exports it)",
        "async scheduling": "already the default: " + next(k.baseline for k in card.tuning.knobs
                                                          if k.name == "async scheduling"),
        "block size 128": "already the default: " + next(k.baseline for k in card.tuning.knobs
                                                        if k.name == "block size 128"),
        "HCCL AIV expansion": HCCL_SKIP}
    assert [k for k, why in sel.skipped.items() if plan.in_baseline(why)] == [
        "task queue level 1", "jemalloc", "async scheduling", "block size 128"]
    assert "vllm/config/vllm.py:957-997" in skipped["async scheduling"]
    assert "refresh_block_size" in skipped["block size 128"]
    assert plan.image_environ("aarch64") == {"TASK_QUEUE_ENABLE": "1", "OMP_NUM_THREADS": "1", "LD_PRELOAD": lib}
    assert plan.image_environ(platform.machine()).items() <= IMAGE_ENV.items()  # the test's image is the plan's


def test_npu_knobs_on_a_host_set_up_with_pip():
    """vllm-ascend installed with pip on a bare host (no image): task queue level 1 is measured; jemalloc is not
    installed there (installed, the bootstrap would preload it, as in the image)."""
    card = load_card("palmyra-mini")
    sel = plan.select_knobs(card, "npu", "full", environ=PIP_HOST_ENV, machine="aarch64", exists=lambda p: False,
                            vllm_ascend="0.23.0")
    assert _names(sel) == ["task queue level 2", "task queue level 1", "CPU affinity", "full decode graph",
                           "weight prefetch", "8192 batched tokens", "graph capture sizes 1-16"]
    assert str(sel.skipped["jemalloc"]) == ("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2 is not installed on this "
                                            "build's host")
    assert [k for k, why in sel.skipped.items() if plan.in_baseline(why)] == ["async scheduling", "block size 128"]


@pytest.mark.parametrize("version, measured", [("0.23.0", True), ("0.23.0.post1", True), ("v0.22.1rc1", True),
                                               ("0.24.0rc1", False), ("0.27.1", False), ("", True)])
def test_a_setting_the_installed_vllm_ascend_no_longer_reads_is_not_measured(version, measured):
    """weight_prefetch_config is read up to v0.23.0 (ascend_config.py:52-53); vllm-ascend #11949 removed it, and a
    later release ignores the key without a word.  "": the version is not checked."""
    card = load_card("palmyra-mini")
    knob = next(k for k in card.tuning.knobs if k.name == "weight prefetch")
    assert (knob.read_until, knob.removed_by) == ("v0.23.0", "vllm-ascend #11949")
    assert "#11949" in knob.source and "#11949" in knob.why
    sel = plan.select_knobs(card, "npu", "full", environ=IMAGE_ENV, exists=lambda p: True, vllm_ascend=version)
    assert ("weight prefetch" in _names(sel)) is measured
    if not measured:
        assert str(sel.skipped["weight prefetch"]) == (
            f"vllm-ascend {version} no longer reads it (read up to v0.23.0, removed by vllm-ascend #11949): its "
            "server would ignore it without a word")
        assert not plan.in_baseline(sel.skipped["weight prefetch"])


def test_a_multi_card_server_runs_the_multi_card_knob():
    card = load_card("palmyra-mini")
    two = card.model_copy(update={"serve": card.serve.model_copy(update={"tensor_parallel_size": 2})})
    sel = plan.select_knobs(two, "npu", "full", environ=IMAGE_ENV, exists=lambda p: True)
    assert "HCCL AIV expansion" in _names(sel)
    assert all(plan.in_baseline(why) for why in sel.skipped.values())  # what remains apart is in the baseline


def test_what_the_host_lacks_or_already_has_is_not_measured_and_says_why():
    card = load_card("palmyra-mini")
    sel = plan.select_knobs(card, "npu", "full", environ={"TASK_QUEUE_ENABLE": "2"}, machine="x86_64",
                            exists=lambda p: False)
    assert "task queue level 2" not in _names(sel) and "task queue level 1" in _names(sel)
    assert str(sel.skipped["task queue level 2"]) == "this build's environment already has TASK_QUEUE_ENABLE=2"
    assert plan.in_baseline(sel.skipped["task queue level 2"])  # not the image's value, in the baseline all the same
    assert str(sel.skipped["jemalloc"]) == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 is not installed on this build's host"
    lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    sel = plan.select_knobs(card, "npu", "full", environ={"LD_PRELOAD": f"/x.so:{lib}"}, machine="x86_64",
                            exists=lambda p: False)
    assert str(sel.skipped["jemalloc"]).startswith(f"this build's environment already has LD_PRELOAD with {lib}, as "
                                                   "vllm-ascend's image sets it (")
    # the message documents written before the image's reason store: it reads as the baseline's
    assert plan.SKIP_ALREADY == "this build's environment already has {variables}"


@pytest.mark.parametrize("backend, profile, run", [
    ("cpu", "full", ["no thread binding", "one reserved core", "8 GiB KV cache"]),
    ("cpu", "quick", []),
    ("cuda", "full", ["graph capture sizes 1-16"]),
    ("npu", "quick", []),
])
def test_knobs_per_backend_and_profile(backend, profile, run):
    sel = plan.select_knobs(load_card("palmyra-mini"), backend, profile, environ={}, exists=lambda p: True)
    assert _names(sel) == run
    if profile == "quick":  # what the baseline has says so in every profile
        assert sel.skipped and all("measured in the full profile only" in str(why) or plan.in_baseline(why)
                                   for why in sel.skipped.values())
        assert [k for k, why in sel.skipped.items() if plan.in_baseline(why)] == (
            ["async scheduling", "block size 128"] if backend == "npu" else [])


@pytest.mark.parametrize("key", known_models())
def test_cards_without_a_tuning_section_start_no_tuning_server(key):
    card = load_card(key)
    starts = plan.starts(card, "npu", "full", environ=IMAGE_ENV, exists=lambda p: True)
    if card.tuning is None:
        assert starts == {"configurations": 0, "combination": 0, "overhead": 0, "rounds": 1}
    else:
        # eager once; graph and 6 knobs in each of 6 paired rounds; the combination paired with graph likewise
        assert starts == {"configurations": 1 + 6 * 7, "combination": 2 * 6, "overhead": 1, "rounds": 6}
        # paired rounds measure graph mode in every round: the sweep's graph server stands for none of them
        assert plan.starts(card, "npu", "full", sweep_mode="graph", environ=IMAGE_ENV, exists=lambda p: True) == starts
        # a build that measures no knob (the quick profile) starts each configuration once, as before
        assert plan.starts(card, "npu", "quick", sweep_mode="graph", environ=IMAGE_ENV,
                           exists=lambda p: True)["rounds"] == 1


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
    "weight_prefetch_config": (1.1, 1.0), "--max-num-batched-tokens 8192": (1.0, 1.1),
}  # async scheduling and block size 128: what vLLM 0.23.0 / vllm-ascend v0.23.0 already do (no setting to find)
# What the fake engine logs: vllm-ascend's CPU binding on an ARM host (vllm_ascend/cpu_binding.py:626, 641)
BOUND = ("(EngineCore_DP0 pid=812) INFO 12-01 08:00:01 [cpu_binding.py:626] The CPU allocation plan is as follows:\n"
         "(EngineCore_DP0 pid=812) INFO 12-01 08:00:01 [cpu_binding.py:641] NPU0: main=[2 3 4 5 6 7 8 9 10 11 12 13 "
         "14 15 16 17 18 19 20 21]  acl=[22]  release=[23]\n")


def env_text(env) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())


class FakeServer:
    started: list = []
    refuse = ""  # a setting this fake engine refuses to start with
    log = ""  # what it writes to its log when it starts

    def __init__(self, argv, *, host, port, env, log_path, on_wait, stream, backend="cpu", on_stop=None):
        self.argv, self.env, self.base_url, self.proc, self.startup_s = argv, env, f"http://{host}:{port}", None, 42.0
        self.log_path, self.backend, self.sampler = log_path, backend, None  # VLLMServer's; no process to sample

    def memory_peak(self):
        from npu_tutorials.engine.memory import MemoryPeak

        return MemoryPeak()

    def start(self):
        FakeServer.started.append(self)
        if self.log_path is not None:
            self.log_path.write_text(FakeServer.log)
        if FakeServer.refuse and FakeServer.refuse in " ".join(self.argv):
            raise TutorialError("the vLLM server exited with code 1 before it was ready; last lines of its log:\n"
                                "ValueError: no such thing")

    def stop(self):
        pass


def fake_point(n, name):
    """The fake device: the server's flags and the environment its process has (the build's, with its own over)."""
    srv = FakeServer.started[-1]
    return measure(" ".join(srv.argv) + " " + env_text({**os.environ, **srv.env}), n)


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
    """A tutorial object on an NPU build (no device, no vLLM): fake servers and measurements.  ``host``: "image",
    a build in vllm-ascend's v0.23.0 image (:data:`IMAGE_ENV`, libjemalloc2 installed: the NPU default); "pip",
    vllm-ascend installed with pip on a bare host (:data:`PIP_HOST_ENV`, no libjemalloc2: the CPU and CUDA default)."""
    from npu_tutorials.tutorial import servers
    from npu_tutorials.measure import tuning_plan
    from npu_tutorials.core.progress import Progress
    from npu_tutorials.record.schema import Efficiency
    from npu_tutorials.tutorial import Tutorial

    FakeServer.started = []
    monkeypatch.setattr(servers, "VLLMServer", FakeServer)
    for var in ("ASCEND_RT_VISIBLE_DEVICES", "CPU_AFFINITY_CONF"):  # the image sets neither
        monkeypatch.delenv(var, raising=False)
    tiny = tmp_path / "tiny"
    monkeypatch.setattr("npu_tutorials.tutorial.steps_tuning.ensure_standin", lambda card, **kw: type("W", (), {"path": tiny}))

    made = []
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "results"))

    def make(key, backend="npu", host=None):
        from npu_tutorials.engine.platform import EngineDtype, platform_for
        from npu_tutorials.tutorial import TutorialState

        for old in made:  # stopped, not abandoned: nothing of a fake run is written
            old.stop()
        FakeServer.started, FakeServer.refuse, FakeServer.log = [], "", BOUND if backend == "npu" else ""
        host = host or ("image" if backend == "npu" else "pip")
        for var, value in IMAGE_ENV.items():
            if host == "image":
                monkeypatch.setenv(var, value)
            else:
                monkeypatch.delenv(var, raising=False)
        monkeypatch.setattr(tuning_plan, "host_file_exists", lambda p: host == "image" and p == JEMALLOC)
        card = load_card(key)
        doc = sweep_doc(key, mach=machine(backend, "Ascend910B3"), profile="full", built_at="2026-12-01T08:00:00+00:00")
        doc.results.efficiency = Efficiency.model_construct(measured_bandwidth=1.0e12)
        for p in doc.results.concurrency_sweep:  # the sweep's server: graph mode with the card's defaults
            p.output_throughput, p.tpot_ms, p.ttft_ms = measure(env_text(os.environ), p.concurrency)
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
        tut.start_server()
        FakeServer.started = []  # the page's server: the tuning section stops it and starts its own
        tut._performance.point = fake_point  # the fake device
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
    """In vllm-ascend's v0.23.0 image: only the knobs its baseline lacks, and a best combination a container can
    produce (no task queue level 1, jemalloc, async scheduling or block size 128: the baseline has them)."""
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
        knobs = [
            ([], {"TASK_QUEUE_ENABLE": "2"}),  # over the image's level 1
            ([], {"CPU_AFFINITY_CONF": "1"}),
            ([cc, '{"cudagraph_mode": "FULL_DECODE_ONLY"}'], {}),
            (["--additional-config", '{"weight_prefetch_config": {"enabled": true}}'], {}),
            (["--max-num-batched-tokens", "8192"], {}),
            ([cc, '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'], {}),
        ]
        graph = ([], {})  # measured in every paired round: the sweep's own server stands for none of them
        combo = ([cc, '{"cudagraph_mode": "FULL_DECODE_ONLY"}', "--max-num-batched-tokens", "8192"], {})
        rounds = [[graph, *knobs] if i % 2 == 0 else [*knobs[::-1], graph] for i in range(plan.PAIRED_ROUNDS)]
        assert started == [
            (["--enforce-eager"], {}),  # the report's conditions, in the first round only
            *[srv for r in rounds for srv in r],
            # the knobs that helped, largest gain first (task queue level 2 is worse than the image's level 1),
            # combined, paired with graph mode in rounds of their own
            *[srv for i in range(plan.PAIRED_ROUNDS) for srv in ([graph, combo] if i % 2 == 0 else [combo, graph])],
            # the tiny model of the fixed overhead, served in the best configuration
            combo,
        ]
        assert out.rounds == plan.PAIRED_ROUNDS
        for srv in FakeServer.started:
            assert srv.env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"  # the build's own settings
            assert srv.env["ASCEND_RT_VISIBLE_DEVICES"] == "0" and "--enforce-eager" not in srv.argv[:-1]
            assert "--async-scheduling" not in srv.argv and "--block-size" not in srv.argv
        assert FakeServer.started[-1].argv[FakeServer.started[-1].argv.index("--model") + 1] == str(tut.state.serve_path.parent / "tiny")
        combo = "graph mode + best combination (full decode graph + 8192 batched tokens)"
        assert [r.name for r in out.rows][:2] == [plan.EAGER, plan.GRAPH] and out.rows[-1].name == combo
        assert out.best == combo and out.rows[-1].knobs == ["full decode graph", "8192 batched tokens"]
        assert {k: str(v).split(" (")[0].split(":")[0] for k, v in out.skipped.items()} == {
            "task queue level 1": "this build's environment already has TASK_QUEUE_ENABLE=1, as vllm-ascend's image "
                                  "sets it",
            "jemalloc": f"this build's environment already has LD_PRELOAD with {JEMALLOC}, as vllm-ascend's image "
                        "sets it",
            "async scheduling": "already the default", "block size 128": "already the default",
            "HCCL AIV expansion": HCCL_SKIP}
        assert out.build_env == {"TASK_QUEUE_ENABLE": "1", "CPU_AFFINITY_CONF": ""}  # the image's level 1, measured
        # a row's figures: the medians over its rounds (the report's conditions: one round, 3 runs)
        assert all(r.fraction and r.tpot_ms.n > 1 and r.throughput_high.n == (3 if r.name == plan.EAGER else
                                                                              plan.PAIRED_ROUNDS) for r in out.rows)
        assert out.rows[1].startup_s == 42.0 and not out.rows[1].vs_graph  # graph mode's own servers
        # the latency beside the throughput at the highest concurrency: TPOT and TTFT there, medians over the rounds
        assert all(r.tpot_high_ms.n == (4 if r.name == plan.EAGER else plan.PAIRED_ROUNDS)  # requests; rounds
                   and r.ttft_high_ms.median == 100.0 for r in out.rows)
        assert out.rows[1].tpot_high_ms.median == pytest.approx(20.0 * 0.9)  # the image's task queue level 1
        vs = {r.name.removeprefix("graph mode + "): plan.verdict(r, out.rows[1]) for r in out.rows[2:]}
        assert vs["full decode graph"] == "better" and vs["task queue level 2"] == "worse"
        assert vs["CPU affinity"] == "no measurable change"  # the fake device: no effect
        assert all(len(r.vs_graph) == 2 and r.vs_graph[0].k == plan.PAIRED_ROUNDS for r in out.rows[2:])
        assert "--max-num-batched-tokens 8192" in out.command and "FULL_DECODE_ONLY" in out.command
        assert "TASK_QUEUE_ENABLE" not in out.command and "--async-scheduling" not in out.command
        assert "vllm serve ./palmyra-mini" in out.command and "--enforce-eager" not in out.command


def test_a_null_knob_on_a_drifting_host_is_no_measurable_change_not_a_gain(npu_build, monkeypatch):
    """Issue 42: the host slows down by 1.5 % with every server start (and each measurement is 2 % noisy), so a
    knob measured after graph mode looks slower, before it faster.  Paired rounds with the order reversed every
    other round cancel that: the knob without effect (CPU affinity on the fake device) is "no measurable
    change" and joins no combination; the knob that helps (full decode graph, -20 % TPOT) is still called
    better.  Measured once each, one after another, the same host calls the null knob worse."""
    import random

    rng = random.Random(7)

    def drifting_point(n, name):
        thr, tpot, ttft = fake_point(n, name)
        slow = (1 + 0.015 * len(FakeServer.started)) * (1 + rng.gauss(0, 0.02))
        return (Stat.of([x / slow for x in (thr.min, thr.median, thr.max)]),
                Stat.of([x * slow for x in (tpot.min, tpot.q1, tpot.median, tpot.q3, tpot.max)]), ttft)

    tut = npu_build("palmyra-mini")
    tut._performance.point = drifting_point
    out = tut.tuning()
    base = plan.graph_row(out.rows)
    row = {r.name.removeprefix("graph mode + "): r for r in out.rows}
    assert plan.verdict(row["CPU affinity"], base) == "no measurable change"
    assert row["CPU affinity"].vs_graph[0].low < 1 < row["CPU affinity"].vs_graph[0].high
    assert plan.verdict(row["full decode graph"], base) == "better"
    assert "CPU affinity" not in out.best and "CPU affinity" not in out.command
    text = repr(tut.show.tuning.tuning_table().value)
    assert "no measurable change: TPOT" in text and "6 paired rounds" in text
    # the same knob measured once, right after graph mode, on the same drifting host: called worse
    once = [r.model_copy(update={"vs_graph": []}) for r in (base, row["CPU affinity"])]
    first = {k: v for k, v in zip(("graph", "knob"), once)}
    first["knob"] = first["knob"].model_copy(update={"tpot_ms": Stat.of([x * 1.03 for x in (19.8, 20.0, 20.2)])})
    first["graph"] = first["graph"].model_copy(update={"tpot_ms": Stat.of([19.8, 20.0, 20.2])})
    assert plan.verdict(first["knob"], first["graph"]) == "worse"


def test_a_host_set_up_with_pip_measures_what_the_image_would_have(npu_build):
    """vllm-ascend installed with pip on a bare host (installation.md, "Set up using Python"): no TASK_QUEUE_ENABLE,
    so task queue level 1 is measured and can join the best combination; no libjemalloc2, so no preload."""
    tut = npu_build("palmyra-mini", host="pip")
    out = tut.tuning()
    assert [_added(tut, s) for s in FakeServer.started][1:4] == [([], {}), ([], {"TASK_QUEUE_ENABLE": "2"}),
                                                                 ([], {"TASK_QUEUE_ENABLE": "1"})]
    assert str(out.skipped["jemalloc"]) == f"{JEMALLOC} is not installed on this build's host"
    assert [k for k, why in out.skipped.items() if plan.in_baseline(why)] == ["async scheduling", "block size 128"]
    # largest gain first: full decode graph, task queue level 1, 8192 batched tokens; level 2 conflicts with level 1
    assert out.best == ("graph mode + best combination (full decode graph + task queue level 1 + 8192 batched "
                        "tokens)")
    assert out.build_env["TASK_QUEUE_ENABLE"] == "" and "export TASK_QUEUE_ENABLE=1" in out.command


@pytest.mark.parametrize("log, line", [
    (BOUND, "INFO [cpu_binding.py:641] NPU0: main=[2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21]  acl=[22]  "
            "release=[23]"),
    # the plan is logged, then binding the threads fails: the failure is what happened (worker/worker.py:783)
    (BOUND + "(EngineCore_DP0 pid=812) WARNING 12-01 08:00:02 [worker.py:783] Bind cpus failed in rank0: Failed to "
             "bind 812 to CPU 2,3. Skip binding cpu.\n",
     "WARNING [worker.py:783] Bind cpus failed in rank0: Failed to bind 812 to CPU 2,3. Skip binding cpu."),
    ("\x1b[36m(EngineCore_DP0 pid=9)\x1b[0m INFO 12-01 08:00:01 [cpu_binding.py:803] CPU binding skipped: non-ARM CPU "
     "detected.\n", "INFO [cpu_binding.py:803] CPU binding skipped: non-ARM CPU detected."),
    ("WARNING 12-01 08:00:01 [cpu_binding.py:40] Unknown CPU architecture. arch=riscv64, action: disabling CPU "
     "binding.", "WARNING [cpu_binding.py:40] Unknown CPU architecture. arch=riscv64, action: disabling CPU binding."),
    ("INFO 12-01 08:00:01 [cpu_binding.py:635] Ascend 950 NPU3: worker=[8 9 10]",
     "INFO [cpu_binding.py:635] Ascend 950 NPU3: worker=[8 9 10]"),
    ("INFO 12-01 08:00:01 [vllm.py:1000] Asynchronous scheduling is enabled.\n", None),  # no binding line
    ("", None),
])
def test_vllm_ascends_cpu_binding_line_is_read_from_a_servers_log(log, line):
    assert plan.cpu_binding(log) == line


def test_the_tuning_section_records_vllm_ascends_cpu_binding(npu_build):
    from npu_tutorials.views import Views

    tut = npu_build("palmyra-mini")
    out = tut.tuning()
    assert out.cpu_binding == plan.cpu_binding(BOUND) and out.cpu_binding.startswith("INFO [cpu_binding.py:641] NPU0:")
    note = Views(tut.doc, tut.card).tuning.tuning_table().note
    assert f'as the server\'s log reported it: "{out.cpu_binding}".' in note


@pytest.mark.parametrize("backend, eager, knobs", [
    ("cpu", [], [([], {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}), ([], {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}),
                         ([], {"VLLM_CPU_KVCACHE_SPACE": "8"})]),
    ("cuda", [(["--enforce-eager"], {})], [(["--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}'],
                                            {})]),
])
def test_cpu_and_cuda_builds_start_their_own_knobs(npu_build, backend, eager, knobs):
    tut = npu_build("palmyra-mini", backend)
    out = tut.tuning()
    graph = ([], {})
    rounds = [[graph, *knobs] if i % 2 == 0 else [*knobs[::-1], graph] for i in range(plan.PAIRED_ROUNDS)]
    # the report's conditions once (the CPU's are eager already: the sweep's server), then the paired rounds and
    # the tiny model; no knob helps on the fake: no combination
    assert [_added(tut, s) for s in FakeServer.started] == [*eager, *[x for r in rounds for x in r], graph]
    assert out.best == plan.GRAPH and out.skipped == {} and out.cpu_binding is None


# -- the page: the table, the knobs, the NPU tab ---------------------------------------------------------------

def test_the_tuning_views_name_each_verdict_the_skipped_knobs_and_the_sources(npu_build):
    from npu_tutorials.views import Views

    tut = npu_build("palmyra-mini")
    tut.tuning()
    show = Views(tut.doc, tut.card)
    table = show.tuning.tuning_table()
    assert "task queue level 2" in repr(table) and "weight prefetch" in repr(table)
    # the page says which knobs the baseline already has, and why, apart from those not measured for another reason
    assert ("Already in the baseline (graph mode, and so every row), not measured: task queue level 1: this build's "
            "environment already has TASK_QUEUE_ENABLE=1, as vllm-ascend's image sets it (vllm-ascend v0.23.0 "
            "Dockerfile:61, ENV); jemalloc: ") in table.note
    assert "; async scheduling: already the default: vLLM 0.23.0 turns asynchronous scheduling on" in table.note
    assert "; block size 128: already the default: vllm-ascend v0.23.0 sets a 128-token block" in table.note
    assert f"Not measured in this build: HCCL AIV expansion: {HCCL_SKIP}." in table.note
    assert "This build's environment before any knob: TASK_QUEUE_ENABLE=1, CPU_AFFINITY_CONF=(unset)." in table.note
    verdicts = {r[0]: r[-1].split(":")[0] for r in table.rows}
    assert verdicts["graph mode + full decode graph"] == "better" and verdicts["graph mode + weight prefetch"] == "worse"
    assert verdicts["graph mode + task queue level 2"] == "worse"  # against the image's level 1
    assert verdicts["graph mode + CPU affinity"] == "no measurable change" and verdicts[plan.GRAPH] == "–"
    # a throughput gain at 16 has its latency there beside it, in the same row (issue 56)
    at16 = {r[0]: r[table.columns.index("TPOT at 16 (ms)")] for r in table.rows}
    assert at16["graph mode + full decode graph"].startswith("14.4 (")  # 20 ms x 0.8 x 0.9 (the image's level 1) and "TTFT at 16 (ms)" in table.columns
    full = {r[0]: r[-1] for r in table.rows}["graph mode + full decode graph"]
    assert full == "better: TPOT -20.0 % [-20.0, -20.0]; tok/s +25.0 % [+25.0, +25.0]"  # the fake device: exact
    assert "graph mode + block size 128" not in verdicts and "graph mode + async scheduling" not in verdicts
    knobs = show.tuning.tuning_knobs_table()
    measured = {r[0]: r[-1] for r in knobs.rows}
    assert measured["jemalloc"].startswith("no, in the baseline: this build's environment already has LD_PRELOAD")
    assert measured["async scheduling"].startswith("no, in the baseline: already the default: vLLM 0.23.0")
    assert measured["CPU affinity"] == "yes" and measured["HCCL AIV expansion"] == HCCL_SKIP
    assert all("vllm-ascend" in r[2] for r in knobs.rows)
    why = {r[0]: r[3] for r in knobs.rows}
    assert "FULL_AND_PIECEWISE already replays uniform decode batches as full ACL graphs" in why["full decode graph"]
    assert "never reports its cards' memory" in why["8192 batched tokens"]
    assert "enable_cpu_binding" in why["CPU affinity"] and "ascend_config.py:162" in why["CPU affinity"]


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
    assert ("The best combination this page measured, full decode graph + 8192 batched tokens, "
            "on Ascend910B3 x 1 on 2026-12-01 (full profile") in npu
    assert "--max-num-batched-tokens 8192" in npu and "FULL_DECODE_ONLY" in npu and "in place of step 4" in npu
    tuned = deploy_page.tuned_npu(card)[0]  # parsed with vLLM's parser by tests/test_commands.py
    assert tuned[:3] == ["vllm", "serve", "./palmyra-mini"] and "--max-num-batched-tokens" in tuned


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
    n = plan.starts(load_card("palmyra-mini"), "npu", "full", sweep_mode="graph", environ=IMAGE_ENV,
                    exists=lambda p: True)
    assert n == {"configurations": 43, "combination": 12, "overhead": 1, "rounds": 6}  # eager + 6 x (graph, 6 knobs)
    assert ("| palmyra-mini | up to 56: 43 starts of the report's conditions, graph mode and each knob the image's "
            "baseline lacks, alone (6 paired rounds: each round starts graph mode and every knob once); at most 12 "
            "for the combination of the knobs that helped (with graph mode, paired); 1 tiny model for the fixed "
            "overhead | a server start, then 3 benchmark runs at concurrency 1 (2 requests) and 3 at 16 (32 "
            "requests) | none recorded |") in text
    assert "| qwen2.5-0.5b | none (its card has no tuning section) | | |" in text
    monkeypatch.delenv("TUTORIAL_RECORDED_DIR")  # the repository's recorded builds: their tuning steps' time
    assert " s for 2 servers on AMD EPYC (2 cores) (quick profile, " in plan.runner_tuning_md()


def test_a_knob_whose_server_fails_is_not_measured_and_the_section_goes_on(npu_build):
    tut = npu_build("palmyra-mini")
    FakeServer.refuse = "FULL_DECODE_ONLY"
    out = tut.tuning()
    assert str(out.skipped["full decode graph"]) == ("its server failed: the vLLM server exited with code 1 before it "
                                                "was ready; last lines of its log:")
    assert plan.row_named(out.rows, "graph mode + full decode graph") is None
    assert out.best == "graph mode + 8192 batched tokens"  # the one other knob that helped: no combination


def test_a_knob_the_installed_vllm_ascend_lacks_is_reported_by_name():
    """The NPU build checks each knob against the schema of the vllm-ascend it runs (data/pinned/): a key the
    release lacks is not measured, and the reason names the release and the key."""
    card = load_card("palmyra-mini")
    knob = next(k for k in card.tuning.knobs if any("weight_prefetch_config" in f for f in k.flags))
    plain = knob.model_copy(update={"read_until": None, "removed_by": None})  # no hand-written removal
    card = card.model_copy(update={"tuning": card.tuning.model_copy(update={"knobs": [plain]})})
    sel = plan.select_knobs(card, "npu", "full", environ={}, exists=lambda p: True, vllm_ascend="0.25.1rc1")
    why = str(sel.skipped[plain.name])
    assert "not supported by vllm-ascend v0.25.1rc1" in why and "weight_prefetch_config" in why
    sel = plan.select_knobs(card, "npu", "full", environ={}, exists=lambda p: True, vllm_ascend="0.23.0")
    assert [k.name for k in sel.run] == [plain.name]
