import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SHARED = ROOT.parent / "shared" / "reference"
os.environ.setdefault("TUTORIAL_CACHE", str(ROOT / ".cache"))


def require_vllm() -> None:
    """The real engine.  Under ``make test`` (TUTORIAL_REQUIRE_ENGINE=1) a missing vLLM fails the test, so
    an engine test can never pass by skipping; run by hand without vLLM, it skips."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        if os.environ.get("TUTORIAL_REQUIRE_ENGINE") == "1":
            pytest.fail(f"the vLLM engine is required under make test and does not import: {exc}", pytrace=False)
        pytest.skip(f"vLLM does not import ({exc})", allow_module_level=True)


@pytest.fixture
def shared_ref() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} (the golden reference files) is not beside this checkout")
    return SHARED


TINY_MODEL = "qwen2.5-0.5b"  # the card whose tiny stand-in the engine tests serve (card, tiny, the early engines)


@pytest.fixture(scope="session")
def card():
    from npu_tutorials.inputs.cards import load_card

    return load_card(TINY_MODEL)


@pytest.fixture(scope="session")
def tiny(card):
    """A tiny stand-in of the Qwen2 architecture (2 layers, head_dim 64, the real tokenizer)."""
    return _tiny_card()[1]


# -- the real vLLM engine on the tiny stand-in, shared by the engine test modules -------------
ENGINE_HOST = "127.0.0.1"


def tiny_server(card, path, tmp: Path, extra=(), **kw):
    """A VLLMServer (not started) for ``path`` on the CPU, as the tests run it."""
    from npu_tutorials.engine.platform import platform_for
    from npu_tutorials.engine.server import VLLMServer, free_port

    cpu = platform_for("cpu")
    port = kw.pop("port", None) or free_port()
    spec = cpu.server_spec(card, cpu.plan(card, "quick"), "accuracy", model=path, host=ENGINE_HOST, port=port,
                           extra=tuple(extra), in_process=True)
    return VLLMServer(list(spec.argv), host=ENGINE_HOST, port=port, env=spec.environ, log_path=tmp / "server.log",
                      **kw)


# -- engines spawned as soon as the collected tests are known to need them ------------------------
# An engine start is tens of seconds of mostly one core (vLLM imported in two processes): spawned when collection
# ends, it overlaps the fast tests that run before its first user, and the fixture that serves it waits for it.
_EARLY: dict[str, object] = {}
_EARLY_TMP: list[Path] = []


def _tiny_card():
    """The card the engine tests serve and its tiny stand-in (the ``card`` and ``tiny`` fixtures, outside them)."""
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.inputs.standin import ensure_standin, tiny_config

    card = load_card(TINY_MODEL)
    return card, ensure_standin(card, config=tiny_config(card.config), label="tiny")


def _raw_logits_server(path: Path, tmp: Path):
    from npu_tutorials.measure import accuracy

    return tiny_server(_tiny_card()[0], path, tmp, accuracy.RAW_LOGITS_FLAGS, startup_timeout=600)


def wrong_server(tmp: Path, family: str, rel: float):
    """The tiny stand-in with ``family``'s tensors perturbed by ``rel`` (test_negative_controls' wrong
    checkpoint), and its server (not started)."""
    from npu_tutorials.checks import controls

    meta = controls.perturb_checkpoint(_tiny_card()[1].path, tmp / "ckpt", rel=rel, family=family)
    return _raw_logits_server(tmp / "ckpt", tmp), meta


# The wrong checkpoint: every MLP tensor of the tiny planted stand-in perturbed by rel x its RMS.  The
# recorded ladders (results/methods/negative-controls-*.json, scripts/negative_controls.py) give each
# check's first failing level per tensor family; at rel 3 of the MLP family every check of every card
# says FAIL, while on the right checkpoint every one says PASS.
WRONG_FAMILY, WRONG_REL = "mlp", 3.0


def _served_cpu_set(tmp: Path):
    """test_deploy's default route, pasted as a reader would; its server step starts the graph-mode engine."""
    from npu_tutorials.inputs.cards import load_card
    from test_deploy import DEFAULT_ROUTE, CpuSetRun

    return CpuSetRun(load_card(DEFAULT_ROUTE), tmp, "served"), None


EARLY_ENGINES = {  # fixture -> how to make its server (and what comes with it) in a fresh folder; each has
    # spawn() (start, do not wait), wait_ready(), start() (both) and stop()
    "raw_server": lambda tmp: (_raw_logits_server(_tiny_card()[1].path, tmp), None),
    "wrong": lambda tmp: wrong_server(tmp, WRONG_FAMILY, WRONG_REL),
    "served_cpu_set": _served_cpu_set,
}


def pytest_collection_finish(session):
    needed = {name for item in session.items for name in getattr(item, "fixturenames", ()) if name in EARLY_ENGINES}
    if not needed or session.config.option.collectonly:
        return
    import importlib.util
    import tempfile

    if importlib.util.find_spec("vllm") is None:
        return  # require_vllm() says it in the tests that need one
    for name in sorted(needed):
        tmp = Path(tempfile.mkdtemp(prefix=f"npu-tutorials-{name}-"))
        _EARLY_TMP.append(tmp)
        try:
            srv, extra = EARLY_ENGINES[name](tmp)
            _EARLY[name] = (srv.spawn(), extra)
        except Exception:  # noqa: BLE001 - the fixture starts it again and fails there, in its test, with the reason
            continue


def claim_engine(name: str, tmp: Path):
    """The server of ``name`` (:data:`EARLY_ENGINES`) and what came with it, ready: the one spawned when
    collection ended, else one started now in ``tmp``."""
    require_vllm()
    if name in _EARLY:
        srv, extra = _EARLY.pop(name)
        return srv.wait_ready(), extra
    srv, extra = EARLY_ENGINES[name](tmp)
    return srv.start(), extra


def pytest_sessionfinish(session, exitstatus):
    import shutil

    for srv, _ in _EARLY.values():  # spawned, never claimed (the session ended first)
        srv.stop()
    _EARLY.clear()
    for tmp in _EARLY_TMP:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def raw_server(tmp_path_factory):
    """The right checkpoint served with full-vocabulary raw logits (one engine for the whole session)."""
    from npu_tutorials.engine.processes import group_alive

    srv, _ = claim_engine("raw_server", tmp_path_factory.mktemp("raw-server"))
    yield srv
    pgid = srv.proc.pid if srv.proc else None
    rpc = srv._rpc_dir
    srv.stop()
    assert pgid is None or not group_alive(pgid)
    assert rpc is None or not Path(rpc).exists(), f"the engine's socket directory {rpc} was left behind"


def combined_spec(stop_ids: list[int] | None = None):
    """Every check of every card on one engine (each check from the card that declares it)."""
    from npu_tutorials.checks.controls import ControlSpec, spec_for_card
    from npu_tutorials.inputs.cards import known_models, load_card

    spec, sources = ControlSpec(stop_ids=stop_ids), []
    for key in known_models():
        own = spec_for_card(load_card(key))
        for c in own.checks:
            # chat consistency's limits are a trained model's chat-answer floor: no stand-in is judged by them
            if getattr(spec, c) is None and c != "chat_consistency":
                setattr(spec, c, getattr(own, c))
                sources.append(f"{c} from cards/{key}.yaml")
    spec.source = ", ".join(sources)
    return spec


def trimmed(spec, prompts: int = 2, words: int = 7):
    """The same checks and thresholds on fewer inputs (tests: each full-vocabulary request costs seconds,
    one per position of the consistency text): the first ``prompts`` prompts of each check, and the first
    ``words`` words of the consistency text's first sentence."""
    import re

    from npu_tutorials.checks.controls import ControlSpec

    out = ControlSpec(stop_ids=spec.stop_ids, source=spec.source + f"; trimmed to {prompts} prompts per check",
                      splits=spec.splits)
    if spec.logits:
        out.logits = spec.logits.model_copy(update={"prompts": spec.logits.prompts[:prompts]})
    if spec.consistency:
        first = re.split(r"(?<=[.。!?])\s*", spec.consistency.text.strip(), maxsplit=1)[0]
        out.consistency = spec.consistency.model_copy(update={"text": " ".join(first.split()[:words])})
    if spec.greedy:
        out.greedy = spec.greedy.model_copy(update={"prompts": spec.greedy.prompts[:prompts],
                                                    "chat_prompts": spec.greedy.chat_prompts[:prompts]})
    if spec.text:
        out.text = spec.text.model_copy(update={"items": spec.text.items[:prompts], "text_exact_min": None})
    return out


@pytest.fixture(scope="session")
def tiny_spec(tiny):
    gen = json.loads((tiny.path / "generation_config.json").read_text())
    eos = gen["eos_token_id"]
    return trimmed(combined_spec(eos if isinstance(eos, list) else [eos]))


class Replies:
    """The raw-logits engine, with every reply it gave kept by request: the same request again gets a copy of
    the same reply (the engine is deterministic: greedy, seeded), so the log-probability form
    (test_logprobs_form's ``LogprobsEngine``) derives from the very replies the raw run got."""

    def __init__(self, server):
        self.server, self.kept = server, {}

    def post(self, path, body):
        import copy

        key = json.dumps([path, body], sort_keys=True)
        if key not in self.kept:
            self.kept[key] = self.server.post(path, body)
        return copy.deepcopy(self.kept[key])

    def __getattr__(self, name):
        return getattr(self.server, name)


@pytest.fixture(scope="session")
def raw_replies(raw_server):
    return Replies(raw_server)


@pytest.fixture(scope="session")
def raw_results(raw_replies, card, tiny, tiny_spec):
    """Every check of ``tiny_spec`` with the right checkpoint (raw logits): the baseline the
    log-probability run and the negative controls are compared with."""
    from npu_tutorials.checks.controls import run_checks

    return run_checks(raw_replies, card.serve.served_model_name, tiny.path, tiny_spec, card.vocab_size,
                      keep_reports=True)
