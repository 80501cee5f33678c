"""One tutorial run: the card, the backend, the weights, the server, and the results document.

A gallery script reads like a report.  A cell measures (``tut.benchmark()``),
the next cell shows (``show.bench_table()``):

* :class:`Tutorial` and its step mixins (:mod:`.steps_serving`,
  :mod:`.steps_accuracy`, :mod:`.steps_performance`) do the work and fill
  ``tut.doc``, a :class:`~npu_tutorials.record.schema.ResultsDoc`;
* ``tut.show`` is a :class:`~npu_tutorials.views.Views` of that document and
  the card: every table and plot is drawn from them alone, so a document
  recorded on other hardware renders the same way.

:meth:`Tutorial.finish` stops the server and writes the document.  A run that
stops part-way is written with ``status: failed`` by :func:`abandon_active`
(called by the Sphinx hooks after each example).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from ..engine.backend import accuracy_dtype, describe_environment, detect_backend, engine_dtype, host_threads
from ..inputs.cards import BenchProfile, load_card
from ..engine.commands import CONVERSION_WHY, CONVERTED_ARCHS
from ..core.errors import TutorialError
from ..core.progress import Progress
from ..engine.scheduler import VISIBLE, lease_devices
from ..record.results import artifacts_dir, git_commit, now_utc, scrub, write_doc
from ..record.schema import (Conditions, Device, Machine, Provenance, ResultsDoc, ServingCheckpoint, StepCost,
                             WeightsInfo)
from ..engine.server import HOST, VLLMServer, check_port_free, free_port
from .steps_accuracy import AccuracySteps
from .steps_performance import PerformanceSteps
from .steps_serving import ServingSteps
from .steps_tuning import TuningSteps
from ..views import Views
from ..inputs.weights import Weights, resolve_weights, weights_mode

PROFILES = ("full", "quick")
_ACTIVE: list["Tutorial"] = []


def select_profile(card, backend: str, requested: str | None = None) -> str:
    value = (requested or os.environ.get("TUTORIAL_PROFILE") or "").strip().lower()
    if value and value not in PROFILES:
        raise TutorialError(f"TUTORIAL_PROFILE={value!r} is not one of full, quick")
    if value:
        return value
    return "full" if backend in ("npu", "cuda") else card.benchmark.cpu_default


def choose_port() -> int:
    if os.environ.get("TUTORIAL_PORT"):
        try:
            port = int(os.environ["TUTORIAL_PORT"])
        except ValueError:
            raise TutorialError(f"TUTORIAL_PORT={os.environ['TUTORIAL_PORT']!r} is not a port number") from None
        check_port_free(HOST, port)
        return port
    return free_port(HOST)


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


def abandon_active(reason: str = "the tutorial stopped before finish()") -> None:
    """Stop every unfinished tutorial's server and write what it measured, marked failed."""
    while _ACTIVE:
        _ACTIVE.pop().abandon(reason)


class Tutorial(ServingSteps, AccuracySteps, PerformanceSteps, TuningSteps):
    def __init__(self, key: str):
        abandon_active("a new tutorial started before the previous one finished")
        self.t0 = time.monotonic()
        self.card = load_card(key)
        self.progress = Progress(self.card.key)
        self.backend = detect_backend()
        with self.progress.step("environment"):
            self.env = describe_environment(self.backend)
        self.profile_name = select_profile(self.card, self.backend)
        e = engine_dtype(self.card.serve.dtype, self.backend, self.env.device_name, self.env.soc_version)
        self.dtype, self.eager_required, self.dtype_note = e.dtype, e.eager_required, e.why
        self.accuracy_dtype = accuracy_dtype(self.card.serve.dtype, self.backend, self.dtype)
        self.jobs = max(1, int(os.environ.get("TUTORIAL_JOBS_RUNNING", "1")))
        self.threads = max(1, host_threads() // self.jobs)  # concurrent tutorials share the host's cores
        import torch  # the fp32 reference and CPU baselines use their share of the cores

        torch.set_num_threads(self.threads)
        self._leases = []
        self.device_env: dict[str, str] = {}
        if self.backend in VISIBLE:
            with self.step("device lease"):
                lease = lease_devices(self.card.requires.devices,
                                      on_wait=lambda: self.progress.maybe_say("waiting for free devices"))
            if lease is not None:
                self._leases.append(lease)
                self.device_env = {VISIBLE[self.backend]: ",".join(lease.names)}
        self.mode = weights_mode()
        self.weights: Weights | None = None
        self.server: VLLMServer | None = None
        self.serve_path: Path | None = None  # what the engine loads (converted, where needed)
        self.build_changes: list[str] = []
        machine = machine_of(self.env, self.threads)
        self.doc = ResultsDoc(model=key, provenance=Provenance(
            built_at=now_utc(), git_commit=git_commit(), backend=self.backend, device=machine.device_label,
            machine=machine, profile=self.profile_name, engine_dtype=self.dtype, status="running"))
        self.doc.results.conditions = Conditions(profile=self.profile_name, dtype=self.dtype,
                                                 dtype_note=self.dtype_note, eager=self._eager)
        self.show = Views(self.doc, self.card)
        self.artifacts = artifacts_dir() / self.card.key
        shutil.rmtree(self.artifacts, ignore_errors=True)  # nothing stale from an earlier run
        self.artifacts.mkdir(parents=True)
        _ACTIVE.append(self)

    @property
    def results(self):
        return self.doc.results

    @property
    def profile(self) -> BenchProfile:
        return self.card.benchmark.profiles[self.profile_name]

    @property
    def run_env(self) -> dict[str, str]:
        """The environment of every engine and device step: the card's, plus this tutorial's devices."""
        from ..engine.commands import build_env

        return {**build_env(self.card, self.backend), **self.device_env}

    @property
    def bench_worker(self):
        """One process for every ``vllm bench serve`` run of this tutorial (vLLM is imported once)."""
        from ..engine.bench import BenchWorker

        if getattr(self, "_bench_worker", None) is None or self._bench_worker.proc.poll() is not None:
            self._bench_worker = BenchWorker()
        return self._bench_worker

    def port(self) -> int:
        """``TUTORIAL_PORT``, else a free port no concurrent tutorial of this build holds."""
        if os.environ.get("TUTORIAL_PORT"):
            return choose_port()
        from ..engine.scheduler import lease_port

        port, lease = lease_port(HOST)
        self._leases.append(lease)
        return port

    @property
    def _eager(self) -> bool:
        return self.card.serve.enforce_eager or self.backend == "cpu" or self.eager_required

    @contextlib.contextmanager
    def step(self, name: str):
        """A named step: start and end lines on the build's terminal, its time in the cost table; if the
        server dies during it, one error naming the step, the exit code or signal, and the log's tail."""
        with self.progress.step(name):
            srv = self.server
            if srv is not None and srv.proc is not None:
                with srv.step(name):
                    yield
            else:
                yield

    # -- weights ---------------------------------------------------------------------
    def prepare_weights(self) -> Weights:
        """Find the real weights, or build the planted stand-in, and record which (``TUTORIAL_WEIGHTS``)."""
        with self.step("weights (find, download or build the stand-in)"):
            self.weights = resolve_weights(self.card, self.mode, progress=self.progress)
        w = self.weights
        import json

        cfg = json.loads((w.path / "config.json").read_text())
        shape = {k: cfg[k] for k in ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                     "num_key_value_heads", "intermediate_size", "vocab_size",
                                     "max_position_embeddings", "tie_word_embeddings", "rope_theta", "torch_dtype")
                 if k in cfg}
        self.doc.provenance.weights = WeightsInfo(kind=w.kind, source=w.source, label=scrub(w.label()),
                                                  hub_id=w.hub_id, revision=w.revision, seed=w.seed, sha256=w.sha256,
                                                  config=shape)
        return w

    def _need_weights(self) -> Weights:
        if self.weights is None:
            raise TutorialError("call prepare_weights() first")
        return self.weights

    def prepare_serving_checkpoint(self) -> ServingCheckpoint:
        """How the engine loads the weights: as they are, or converted to a layout current vLLM serves."""
        w = self._need_weights()
        arch = self.card.architecture
        if arch in CONVERTED_ARCHS:
            from ..inputs.convert import ensure_converted
            from ..core.memory import trim_memory

            with self.step(f"convert {arch} to {CONVERTED_ARCHS[arch]}"):
                self.serve_path = ensure_converted(w.path)
                trim_memory()
            sc = ServingCheckpoint(route=f"converted to {CONVERTED_ARCHS[arch]}",
                                   why=CONVERSION_WHY.format(arch=arch))
        else:
            self.serve_path = w.path
            sc = ServingCheckpoint(route="as is")
        self.results.serving_checkpoint = sc
        return sc

    @property
    def reference_path(self) -> Path:
        """The checkpoint the fp32 CPU reference loads: the one the engine serves (tests/test_convert.py
        proves transformers' Qwen2 on converted weights equals an independent forward of the original)."""
        if self.serve_path is None:
            self.prepare_serving_checkpoint()
        return self.serve_path

    def path_placeholders(self) -> dict[str, str]:
        out = {}
        for p in (self.serve_path, self.weights.path if self.weights else None):
            if p:
                out[str(p)] = "<weights>"
                out[str(Path(p).resolve())] = "<weights>"
        return out

    # -- wrap-up ---------------------------------------------------------------------
    def _publish(self, path: Path, name: str) -> None:
        """Copy a file next to the generated page so the page can offer it for download."""
        dest = os.environ.get("TUTORIAL_DOWNLOADS_DIR")
        if dest:
            Path(dest).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(dest) / name)

    def stop(self) -> None:
        """Stop everything this tutorial started (server, bench worker, leases); write nothing."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.server is not None:
            self.server.stop()
        if getattr(self, "_bench_worker", None) is not None:
            self._bench_worker.close()
        for lease in self._leases:
            lease.release()

    def _close(self, status: str, failure: str | None = None) -> Path:
        self.stop()
        p = self.doc.provenance
        p.status, p.failure = status, failure
        p.wall_time_s = round(time.monotonic() - self.t0, 1)
        self.results.costs = [StepCost(step=n, seconds=round(s, 2)) for n, s in self.progress.top_level()]
        path = write_doc(self.doc)
        print(self.progress.cost_table(), file=self.progress.out, flush=True)
        return path

    def finish(self) -> Path:
        """Stop the server and write ``_build/results/<model>.json`` (offered for download on the page)."""
        path = self._close("complete")
        self._publish(path, f"{self.card.key}-results.json")
        return path

    def abandon(self, reason: str) -> None:
        """The run stopped part-way: stop the server, write what was measured, marked failed."""
        try:
            self._close("failed", reason)
        except Exception as exc:  # never hide the original failure behind this one
            print(f"[{self.card.key}] could not write the failed run's results: {exc}", file=self.progress.out)

    def recorded(self):
        """Documents of this model recorded by earlier builds on other hardware (``results/``); a file that
        cannot be read is named on the terminal and in :attr:`recorded_errors` (the gate fails on it)."""
        from ..record.results import recorded

        self.recorded_errors: list[str] = []
        docs = recorded(self.card.key, errors=self.recorded_errors)
        for e in self.recorded_errors:
            self.progress.say(f"left out a recorded document: {e}")
        return docs

    def from_record(self, section: str, why: str):
        """``section`` (``tuning`` or ``transformers_baseline``) as an earlier build recorded it (``results/``),
        for a profile that leaves it to the full one: the value and its provenance go into this document
        (``results.from_records``), or, with no fitting record, ``results.not_measured`` says so.  Returns the
        value or None."""
        import typing

        from ..record.results import recorded, section_from_records
        from ..record.schema import RecordedSection

        if section not in typing.get_args(RecordedSection):
            raise ValueError(f"no section {section!r} can be shown from a record ({typing.get_args(RecordedSection)})")
        value, origin = section_from_records(self.doc, section, recorded(self.card.key), why)
        if origin is None:
            self.results.not_measured[section] = (f"{why}; no build recorded it for {self.backend}, {self.dtype} "
                                                  f"and these weights (results/{self.card.key}/)")
            self.progress.say(f"{section}: not measured in this build, and no record holds it")
        else:
            self.results.from_records[section] = origin
            self.progress.say(f"{section}: not measured in this build; shown as {origin.file} recorded it "
                              f"(built {origin.built_at} on {origin.machine})")
        return value

    def noise(self):
        """The between-run noise recorded for this build's machine kind, model, profile and dtype
        (:func:`gate.measured_noise`), or None; a record the gate refuses joins :attr:`recorded_errors`."""
        from ..checks.gate import CONFIRM, measured_noise

        errors = getattr(self, "recorded_errors", None)
        if errors is None:
            self.recorded_errors = errors = []
        return measured_noise(self.doc, errors=errors, confirm=CONFIRM)
