"""One tutorial run: the card, the backend, the weights, the server, and the results document.

A gallery script reads like a report.  A cell measures (``tut.benchmark()``),
the next cell shows (``show.serving.bench_table()``):

* :class:`Tutorial` is the facade: it makes the run's declared state
  (:class:`~.state.TutorialState`) and the step objects that share it
  (:mod:`.steps_weights`, :mod:`.steps_serving`, :mod:`.steps_accuracy`,
  :mod:`.steps_performance`, :mod:`.steps_tuning`, :mod:`.records`); each step
  fills a section of ``tut.doc``, a :class:`~npu_tutorials.record.schema.ResultsDoc`;
* ``tut.show`` names the views of that document and the card
  (:class:`~npu_tutorials.views.refs.Show`): a cell that shows one leaves a
  reference on the page, and each language's pass draws it from the written
  document, so a document recorded on other hardware renders the same way.

:meth:`Tutorial.finish` stops the server and writes the document.  A run that
stops part-way is written with ``status: failed`` by :func:`abandon_active`
(called by the Sphinx hooks after each example).
"""

from __future__ import annotations

import os
import shutil
import time

from ..record import steps
from ..record.schema_base import Message
from ..engine.backend import describe_environment, detect_backend, host_threads
from ..engine.collect_env import Capture, collect_env_argv
from ..engine.platform import Platform, platform_for
from ..core.errors import TutorialError
from ..core.progress import Progress
from ..engine.scheduler import lease_devices
from ..inputs.cards import load_card
from ..inputs.digest import card_digest
from ..inputs.weights import weights_mode
from ..record.results import artifacts_dir, git_commit, now_utc, scrub
from ..record.schema import Conditions, Device, Machine, Provenance, ResultsDoc
from ..views import Show, Views
from .records import RecordSteps
from .state import TutorialState
from .steps_accuracy import AccuracySteps
from .steps_performance import PerformanceSteps
from .steps_serving import ServingSteps
from .steps_tuning import TuningSteps
from .steps_weights import WeightsSteps

PROFILES = ("full", "quick")
_ACTIVE: list["Tutorial"] = []


def select_profile(card, plat: Platform, requested: str | None = None) -> str:
    """``TUTORIAL_PROFILE`` (or ``requested``), else the platform's default for the card."""
    value = (requested or os.environ.get("TUTORIAL_PROFILE") or "").strip().lower()
    if value and value not in PROFILES:
        raise TutorialError(f"TUTORIAL_PROFILE={value!r} is not one of full, quick")
    return value or plat.default_profile(card)


def machine_of(env, threads: int | None = None) -> Machine:
    """The schema's machine facts from the backend's environment report."""
    d = env.to_dict()
    var, value = d.get("visible_devices_var"), d.get("visible_devices")
    versions = dict(d.get("versions") or {})
    return Machine(backend=d["backend"], cpu_model=d["cpu_model"], cpu_count=int(d["cpu_cores"]),
                   cpu_native_bf16=bool(d["cpu_native_bf16"]), memory_gib=d.get("memory_gib"), cpu_id=d.get("cpu_id"),
                   devices=[Device(**x) for x in d.get("devices") or []],
                   visible_devices=(f"{var}={value}" if value is not None else f"{var} unset: every device")
                   if var else None,
                   soc=str(d["soc_version"]) if d.get("soc_version") is not None else None,
                   driver=d.get("driver"), cann=d.get("cann"), python=versions.pop("python", ""),
                   versions=versions, host_threads=threads)


_FAILURE: list[str] = []  # why the running example failed (site.failures records it as sphinx-gallery sees it)


def note_failure(reason: str) -> None:
    """The cause of the current example's failure, for the results document :func:`abandon_active` writes."""
    _FAILURE[:] = [reason]


def detach(tut: "Tutorial") -> "Tutorial":
    """Take ``tut`` out of the unfinished tutorials that the next one (and :func:`abandon_active`) stops: for a
    caller that runs several at once and stops each itself (:func:`~.remeasure.measure_paired`)."""
    if tut in _ACTIVE:
        _ACTIVE.remove(tut)
    return tut


def abandon_active(reason: str = "the tutorial stopped before finish()") -> None:
    """Stop every unfinished tutorial's server and write what it measured, marked failed (with the cause
    :func:`note_failure` recorded, where there is one)."""
    reason = _FAILURE.pop() if _FAILURE else reason
    _FAILURE.clear()
    while _ACTIVE:
        _ACTIVE.pop().abandon(reason)


def new_state(key: str) -> TutorialState:
    """The state of a new run of card ``key`` on this machine: backend, dtypes, profile, threads, leased
    devices, an empty results document and a clean artifacts folder."""
    t0 = time.monotonic()
    card = load_card(key)
    progress = Progress(card.key)
    backend = detect_backend()
    plat = platform_for(backend)
    with progress.step(Message.of(steps.ENVIRONMENT)):
        env = describe_environment(backend)
    profile_name = select_profile(card, plat)
    plan = plat.plan(card, profile_name, env.device_name, env.soc_version)
    jobs = max(1, int(os.environ.get("TUTORIAL_JOBS_RUNNING", "1")))
    threads = max(1, host_threads() // jobs)  # concurrent tutorials share the host's cores
    import torch  # the fp32 reference and CPU baselines use their share of the cores

    torch.set_num_threads(threads)
    machine = machine_of(env, threads)
    doc = ResultsDoc(model=key, provenance=Provenance(
        built_at=now_utc(), git_commit=git_commit(), backend=backend, device=machine.device_label,
        machine=machine, profile=profile_name, engine_dtype=plan.dtype.dtype, card_digest=card_digest(key),
        status="running"))
    s = TutorialState(card=card, platform=plat, env=env, progress=progress, profile_name=profile_name, plan=plan,
                      threads=threads, mode=weights_mode(), doc=doc, artifacts=artifacts_dir() / card.key, t0=t0)
    doc.results.conditions = Conditions(profile=profile_name, dtype=s.dtype, dtype_note=s.dtype_note, eager=s.eager)
    if plat.visible_devices_var:
        with s.step(Message.of(steps.DEVICE_LEASE)):
            lease = lease_devices(card.requires.devices, on_wait=lambda: progress.maybe_say("waiting for free devices"))
        if lease is not None:
            s.leases.append(lease)
            s.device_env = {plat.visible_devices_var: ",".join(lease.names)}
    shutil.rmtree(s.artifacts, ignore_errors=True)  # nothing stale from an earlier run
    s.artifacts.mkdir(parents=True)
    s.collect_env = Capture(collect_env_argv(plat.ascend))  # in the background; finish() keeps its report
    return s


class Tutorial:
    """One model's tutorial run: ``tut = Tutorial("<card key>")``, then its steps in the page's order.

    Each method runs one step and stores the section it returns in :attr:`doc` (``doc.results.<section>``); a
    step that needs another's section is given it here, so the order a page needs is the order of the
    arguments below.  Every measurement needs the weights (:meth:`prepare_weights`) and the server
    (:meth:`start_server`); each raises one clear error where its input is missing.  The run's state is
    :attr:`state` (:class:`~.state.TutorialState`); the step groups that do the work are private."""

    def __init__(self, key: str, state: TutorialState | None = None):
        """Start the run of card ``key``: detect the backend, lease devices, open the results document.
        ``state``: a state made elsewhere (a test's, on fakes) instead of this machine's."""
        abandon_active("a new tutorial started before the previous one finished")
        self.state = s = state or new_state(key)
        self.card, self.doc, self.recorded_errors = s.card, s.doc, s.recorded_errors
        self.show = Show(Views(s.doc, s.card), s.card.key)
        self._weights = WeightsSteps(s)
        self._serving = ServingSteps(s, self._weights)
        self._records = RecordSteps(s)
        self._accuracy = AccuracySteps(s, self._serving)
        self._performance = PerformanceSteps(s, self._serving, self._records)
        self._tuning = TuningSteps(s, self._serving, self._performance, self._records)
        _ACTIVE.append(self)

    def step(self, name: str):
        """A named step: start and end lines on the build's terminal, its time in the cost table; if the
        server dies during it, one error naming the step, the exit code or signal, and the log's tail."""
        return self.state.step(name)

    # -- the steps, in a page's order ------------------------------------------------------------------
    def prepare_weights(self):
        """Find, download or build the checkpoint (real weights or the card's planted stand-in)."""
        return self._weights.prepare_weights()

    def prepare_serving_checkpoint(self):
        """How the engine loads the weights: as they are, or converted to a layout current vLLM serves."""
        r = self.state.results
        r.serving_checkpoint = self._weights.prepare_serving_checkpoint()
        return r.serving_checkpoint

    def run_offline_example(self, timeout: float = 1200):
        """The report's ``vllm.LLM`` example, run as its own Python process (:meth:`ServingSteps.run_offline_example`)."""
        if self.state.serve_path is None:
            self.prepare_serving_checkpoint()
        r = self.state.results
        r.offline_example = self._serving.run_offline_example(timeout)
        return r.offline_example

    def start_server(self, extra: list[str] | None = None, *, now: bool = True, checks: bool = True):
        """Start the OpenAI-compatible server with ``extra`` flags: the deployment as it is served; a step that
        needs another (the engine-vs-reference checks on a CPU without native bf16) gets it started then.
        ``now=False``: only say what to serve; the first step that needs the server starts it.  ``checks=False``: a
        run of the gated steps only (:mod:`.remeasure`), which loads no fp32 reference while a server starts."""
        if self.state.serve_path is None:
            self.prepare_serving_checkpoint()
        return self._serving.start_server(extra, now=now, checks=checks)

    def record_completion(self, prompt: str, completion):
        """Record the functional request's reply (an OpenAI completion or chat completion), then send the same
        request greedily to the engine and to the fp32 reference, whose answers the page sets side by side."""
        r = self.state.results
        r.functional = self._accuracy.functional_vs_reference(self._serving.record_completion(prompt, completion))
        return r.functional

    def benchmark(self):
        """vLLM's own serving benchmark on the card's conditions for this profile, and the memory it held."""
        r = self.state.results
        r.benchmark = self._serving.benchmark()
        r.memory = self._serving.memory()
        return r.benchmark

    def logits_agreement(self):
        """The engine's last-position logits over the whole vocabulary against the fp32 reference."""
        r = self.state.results
        r.logits_agreement = self._accuracy.logits_agreement()
        return r.logits_agreement

    def forward_consistency(self, chat: bool = False):
        """Every position of the card's text, engine against the fp32 reference; ``chat``: every position of the
        fp32 reference's answer to the card's chat request (``accuracy.chat_consistency``)."""
        r = self.state.results
        section = "chat_consistency" if chat else "forward_consistency"
        setattr(r, section, self._accuracy.forward_consistency(chat=chat))
        return getattr(r, section)

    def text_consistency(self):
        """The card's chat prompts, greedy, engine against reference."""
        r = self.state.results
        r.text_consistency = self._accuracy.text_consistency()
        return r.text_consistency

    def greedy_agreement(self):
        """The card's prompts, greedy tokens of engine and reference."""
        r = self.state.results
        r.greedy_agreement = self._accuracy.greedy_agreement()
        return r.greedy_agreement

    def qa_scores(self):
        """The text-consistency answers (:meth:`text_consistency`) scored against the card's expected answers."""
        r = self.state.results
        r.qa = self._accuracy.qa_scores(r.text_consistency)
        return r.qa

    def gsm(self):
        """GSM8K (or, offline on stand-ins only, GSM-style problems) answered greedily and scored."""
        r = self.state.results
        r.gsm = self._accuracy.gsm()
        return r.gsm

    def e2e_config(self):
        """vllm-ascend's e2e accuracy config for this model, from this run's figures so far."""
        r = self.state.results
        r.e2e_config = self._accuracy.e2e_config(self.doc)
        return r.e2e_config

    def input_length_sweep(self):
        """Per input length: requests one at a time (prefill and decode latency), then all at once."""
        r = self.state.results
        r.input_length_sweep = self._performance.input_length_sweep()
        return r.input_length_sweep

    def concurrency_sweep(self):
        """Output throughput at each concurrency, and (on a page without a benchmark) the memory it held."""
        r = self.state.results
        r.concurrency_sweep = self._performance.concurrency_sweep()
        if r.memory is None:  # a page measured by sweeps alone: the memory held meanwhile
            r.memory = self._serving.memory()
        return r.concurrency_sweep

    def efficiency(self):
        """The roofline fraction of the concurrency sweep's first point (:meth:`concurrency_sweep`), and plain
        transformers on the same conditions."""
        r = self.state.results
        r.efficiency = self._performance.efficiency(r.concurrency_sweep)
        return r.efficiency

    def known_limitations(self):
        """Warnings the servers printed in this build (deduplicated)."""
        r = self.state.results
        r.server_warnings = self._performance.known_limitations()
        return r.server_warnings

    def tuning(self):
        """Graph mode and the card's knobs, measured beside the report's conditions; reads the concurrency sweep
        and its server (:meth:`concurrency_sweep`) and the measured bandwidth (:meth:`efficiency`)."""
        r = self.state.results
        r.tuning = self._tuning.tuning(r.concurrency_sweep, r.efficiency, r.server)
        return r.tuning

    def recorded(self):
        """Documents of this model recorded by earlier builds on other hardware (``results/``)."""
        return self._records.recorded()

    # -- wrap-up ---------------------------------------------------------------------
    def stop(self) -> None:
        """Stop everything this tutorial started (server, bench worker, leases); write nothing."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        self.state.stop()

    def finish(self):
        """Stop the server and write ``_build/results/<model>.json`` (offered for download on the page)."""
        self.state.keep_collect_env()
        self.stop()
        path = self.state.close("complete")
        self.state.publish(path, f"{self.card.key}-results.json")
        return path

    def abandon(self, reason: str) -> None:
        """The run stopped part-way: stop the server, write what was measured, marked failed."""
        try:
            self.stop()
            self.state.close("failed", scrub(reason))  # a reason may name a log under the checkout
        except Exception as exc:  # never hide the original failure behind this one
            print(f"[{self.card.key}] could not write the failed run's results: {exc}", file=self.state.progress.out)
