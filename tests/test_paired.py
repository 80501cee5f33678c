"""Paired comparisons (issue 42): A and B measured alternately on one host, each figure judged by its ratio B/A
within rounds, with an exact interval for the median ratio; a change is called only when the interval
excludes 1.  The arithmetic on simulated hosts whose speed drifts, the side parser of ``make compare``, and
the document's views; ``scripts/compare.py`` on the real engine is in the slow set."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from conftest import require_vllm  # noqa: E402
from docs import machine  # noqa: E402
from npu_tutorials.cli.compare import parse_side  # noqa: E402
from npu_tutorials.core.errors import TutorialError  # noqa: E402
from npu_tutorials.core.messages import language  # noqa: E402
from npu_tutorials.measure import paired  # noqa: E402
from npu_tutorials.record.headline import METRICS  # noqa: E402
from npu_tutorials.record.schema_paired import Comparison, Side  # noqa: E402
from npu_tutorials.views.paired import paired_forest, paired_table, side_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_the_interval_is_the_sign_tests_exact_one():
    # k = 6: only the range reaches 95 % (1 - 2/64); k = 10: the 2nd smallest to the 2nd largest (1 - 2*11/1024)
    assert paired.median_interval([3, 1, 2, 6, 5, 4]) == (1, 6, pytest.approx(1 - 2 / 64))
    assert paired.median_interval(list(range(1, 11)))[:2] == (2, 9)
    assert paired.median_interval(list(range(1, 11)))[2] == pytest.approx(1 - 2 * 11 / 1024)
    low, high, cov = paired.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])  # too few rounds for 95 %: said so
    assert (low, high) == (1.0, 5.0) and cov == pytest.approx(1 - 2 / 32) and cov < 0.95


def test_rounds_alternate_which_side_goes_first():
    calls = []
    order, ra, rb = paired.interleaved(lambda i: calls.append(("A", i)) or {"x": 1.0},
                                       lambda i: calls.append(("B", i)) or {"x": 2.0}, 4)
    assert order == ["AB", "BA", "AB", "BA"]
    assert calls == [("A", 0), ("B", 0), ("B", 1), ("A", 1), ("A", 2), ("B", 2), ("B", 3), ("A", 3)]
    assert len(ra) == len(rb) == 4
    with pytest.raises(ValueError):
        paired.interleaved(lambda i: {}, lambda i: {}, 0)


def test_with_a_control_the_three_sides_run_in_the_six_orders_in_turn():
    order = paired.order_of(12, "ABC")
    assert order[:6] == ["ABC", "CBA", "BCA", "ACB", "CAB", "BAC"] and order[6:] == order[:6]
    for six in (order[:6], order[6:]):  # every side in every place twice; every pair in each order three times
        assert all(sorted(t[i] for t in six) == list("AABBCC") for i in range(3))
        for x, y in ("AB", "AC", "BC"):
            assert sum(t.index(x) < t.index(y) for t in six) == 3
    calls = []
    kept = []
    got, rounds = paired.interleaved_sides({s: (lambda s: lambda i: calls.append(s + str(i)) or {"x": i})(s)
                                            for s in "ABC"}, 2,
                                           lambda o, r: kept.append((list(o), {s: len(v) for s, v in r.items()})))
    assert got == ["ABC", "CBA"] and calls == ["A0", "B0", "C0", "C1", "B1", "A1"]
    assert kept == [(["ABC"], {"A": 1, "B": 1, "C": 1}), (["ABC", "CBA"], {"A": 2, "B": 2, "C": 2})]
    assert rounds == {s: [{"x": 0}, {"x": 1}] for s in "ABC"}


def test_fewer_rounds_than_a_95_percent_interval_needs_call_no_change():
    # five rounds all 10 % slower: the range excludes 1, but covers the median only at 93.8 %
    r = paired.paired_ratio("median_tpot_ms", "median TPOT", "ms", "lower", [10] * 5, [11] * 5)
    assert r.confidence < 0.95 and r.low > 1 and r.verdict == "no measurable change"
    assert paired.paired_ratio("median_tpot_ms", "median TPOT", "ms", "lower", [10] * 6, [11] * 6).verdict == "B worse"


def _host(k: int, slowdown: float, seed: int, drift: float = 0.5, noise: float = 0.02):
    """Simulated rounds on a host whose speed drifts by up to ``drift`` over the session (the 15-50 % the
    methods page records between hours) plus per-run noise: TPOT of A and of B (B ``slowdown`` slower)."""
    rng = random.Random(seed)
    a, b = [], []
    for i in range(k):
        host = 1.0 + drift * rng.random()  # this round's speed of the host, shared by both sides
        a.append({"median_tpot_ms": 40.0 * host * (1 + rng.gauss(0, noise))})
        b.append({"median_tpot_ms": 40.0 * host * slowdown * (1 + rng.gauss(0, noise))})
    return a, b


def test_a_ten_percent_slowdown_is_called_on_a_drifting_host_and_an_unchanged_pair_is_not():
    tpot = [m for m in METRICS if m[0] == "median_tpot_ms"]
    slow = [paired.paired_ratios(*_host(6, 1.10, seed), tpot)[0] for seed in range(10)]
    assert sum(r.verdict == "B worse" for r in slow) >= 9
    same = [paired.paired_ratios(*_host(6, 1.0, seed), tpot)[0] for seed in range(10)]
    assert sum(r.verdict != "no measurable change" for r in same) <= 1
    # the same rounds unpaired (each side's median, the host drifting 50 %) cannot tell the 10 % apart
    a, b = _host(6, 1.10, 0)
    ma = sorted(r["median_tpot_ms"] for r in a)
    mb = sorted(r["median_tpot_ms"] for r in b)
    assert max(ma) > min(mb)  # the two sides' ranges overlap


def test_a_null_effect_is_no_measurable_change_and_direction_follows_what_is_better():
    r = paired.paired_ratio("median_tpot_ms", "median TPOT", "ms", "lower", [40, 41, 39, 40, 42, 40],
                            [40.5, 40.2, 39.6, 39.5, 42.4, 40.1])
    assert r.verdict == "no measurable change" and r.low < 1 < r.high and r.k == 6
    up = paired.paired_ratio("output_throughput", "output throughput", "tok/s", "higher", [10] * 6,
                             [11, 11.2, 10.9, 11.1, 11.3, 11.0])
    assert up.verdict == "B better" and up.median == pytest.approx(1.105)
    down = paired.paired_ratio("median_ttft_ms", "median TTFT", "ms", "lower", [10] * 6, [11] * 6)
    assert down.verdict == "B worse"
    with pytest.raises(ValueError, match="rounds"):
        paired.paired_ratio("x", "x", "", "lower", [1, 2], [1])


def test_make_compares_sides_are_environment_words_and_flags():
    s, py = parse_side("B", "VLLM_CPU_OMP_THREADS_BIND=0 --max-num-seqs 4 --enable-chunked-prefill")
    assert s.env == {"VLLM_CPU_OMP_THREADS_BIND": "0"} and s.flags == ["--max-num-seqs", "4", "--enable-chunked-prefill"]
    assert py is None and s.python is None
    assert parse_side("A", "") == (Side(label="A"), None)
    with pytest.raises(TutorialError, match="neither NAME=value, python:PATH, image:REF nor a vLLM flag"):
        parse_side("A", "max-num-seqs 4")
    with pytest.raises(TutorialError, match="not a shell word list"):
        parse_side("A", "--x 'open")


def test_a_side_in_another_virtualenv_is_a_python_word(tmp_path, monkeypatch):
    """``python:PATH``: the interpreter that runs the side's server (another venv, another vLLM); the document
    keeps its path without this machine's, and its package versions as that interpreter reads them."""
    from npu_tutorials.engine.backend import interpreter_versions
    from npu_tutorials.inputs.versions_probe import package_versions

    monkeypatch.setenv("HOME", str(tmp_path))  # the venv in this user's home: a path of this machine
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")  # this build's packages, as a venv
    (venv / "python").chmod(0o755)
    s, py = parse_side("B", f"python:{venv / 'python'} --max-num-seqs 4")
    assert py == str(venv / "python") and s.flags == ["--max-num-seqs", "4"] and s.env == {}
    assert s.python is not None and str(tmp_path) not in s.python and s.python == "<home>/venv/bin/python"
    assert interpreter_versions(py) == package_versions()  # the same interpreter here: the same versions
    with pytest.raises(TutorialError, match="python:/nowhere/bin/python is not an interpreter this host can run"):
        parse_side("B", "python:/nowhere/bin/python")
    with pytest.raises(TutorialError, match="one python:PATH or image:REF word at most"):
        parse_side("B", f"python:{py} python:{py}")
    with pytest.raises(TutorialError, match="cannot read its package versions"):
        interpreter_versions("/bin/false")
    assert side_text(s).startswith("python:")


def _comparison() -> Comparison:
    a, b = _host(6, 1.10, 3)
    for r, s, t in zip(a, b, (100.5, 99.5, 100.2, 99.8, 100.1, 99.9)):
        r["output_throughput"], s["output_throughput"] = 100.0, t
    return Comparison(model="qwen3-0.6b", built_at="2026-12-04T12:00:00+00:00", machine=machine(), profile="quick",
                      steps=["benchmark"], servers="shared", a=Side(label="A"),
                      b=Side(label="B", flags=["--max-num-seqs", "4"], env={"X": "1"}), order=paired.order_of(6),
                      rounds_a=a, rounds_b=b, ratios=paired.paired_ratios(a, b, METRICS))


def test_a_control_draws_as_rows_of_its_own_where_a_change_called_is_a_false_alarm():
    from npu_tutorials.site.paired_page import blocks_markdown

    doc = _comparison()
    a, c = _host(12, 1.0, 5)
    a2, b = _host(12, 1.10, 5)
    doc.rounds_a, doc.rounds_b, doc.rounds_c = a, b, c
    doc.order = paired.order_of(12, "ABC")
    doc.ratios = paired.paired_ratios(a, b, METRICS)
    doc.control = paired.paired_ratios(a, c, METRICS)
    c_fast = [{"median_tpot_ms": 0.8 * r["median_tpot_ms"]} for r in a]  # a copy of A that is not A: called
    alarm = paired.paired_ratios(a, c_fast, METRICS)
    assert alarm[0].verdict == "B better"
    rows = {r[0]: r for r in paired_table(doc).rows}
    assert rows["median TPOT: control, A again / A"][-1] == "no measurable change"
    doc.control = alarm
    t = paired_table(doc)
    assert {r[0]: r for r in t.rows}["median TPOT: control, A again / A"][-1] == "false alarm"
    assert "false alarm of this host" in t.note
    assert "A, B and A again in the six orders in turn" in t.note and "AB, BA" not in t.note  # how they ran
    assert [x.get_text() for x in paired_forest(doc).axes[0].get_yticklabels()] == [
        "median TPOT", "median TPOT: control, A again / A"]
    md = blocks_markdown(doc)
    assert "| median TPOT | 2 of 2 (B worse)" in md and "| median TPOT, control A again / A" in md
    assert blocks_markdown(doc, 10) == ""  # one block of 10 in 12 rounds: no table
    a20, c20 = _host(20, 1.0, 6)
    doc.rounds_a, doc.rounds_b, doc.rounds_c = a20, _host(20, 1.10, 7)[1], c20
    assert "Cut into 2 blocks of 10 rounds" in blocks_markdown(doc, 10)  # make compare's default K
    with language("zh_CN"):
        zh = blocks_markdown(doc)
    assert "blocks calling a change" not in zh and "B worse" not in zh and "control" not in zh


def test_the_document_draws_as_a_table_and_a_forest_plot_in_both_languages():
    doc = Comparison.model_validate(json.loads(_comparison().model_dump_json()))  # as stored and read back
    t = paired_table(doc)
    rows = {r[0]: r for r in t.rows}
    assert rows["median TPOT"][-1] == "B worse" and rows["output throughput"][-1] == "no measurable change"
    assert "X=1 --max-num-seqs 4" in t.note and "the page's server as it is" in t.note and "96.9 %" in t.note
    assert "versions differ" not in t.note
    assert "alternating AB, BA, ..." in t.note and "six orders" not in t.note
    doc.a.versions, doc.b.versions = {"vllm": "0.31.0", "torch": "2.9"}, {"vllm": "0.32.0", "torch": "2.9"}
    assert "The sides' versions differ (A / B): vllm 0.31.0 / 0.32.0." in paired_table(doc).note
    fig = paired_forest(doc)
    assert len(fig.axes[0].get_yticklabels()) == 2
    with language("zh_CN"):
        zh = paired_table(doc)
        paired_forest(doc)
    assert "B worse" not in repr(zh) and "median TPOT" not in repr(zh)


def test_a_throughput_change_shows_the_latency_of_the_same_rounds_in_its_row():
    """Issue 56: a gain bought with latency shows in the row that calls the gain; no change, no latency beside."""
    doc = Comparison.model_validate(json.loads(_comparison().model_dump_json()))
    rng = random.Random(3)
    a, b = [], []
    for _i in range(6):
        host = 1.0 + 0.3 * rng.random()
        a.append({"output_throughput": 100 / host, "median_ttft_ms": 50 * host, "median_tpot_ms": 20 * host})
        b.append({"output_throughput": 120 / host, "median_ttft_ms": 65 * host, "median_tpot_ms": 21 * host})
    doc.rounds_a, doc.rounds_b, doc.order = a, b, paired.order_of(6, "AB")
    doc.ratios = paired.paired_ratios(a, b, METRICS)
    rows = {r[0]: r for r in paired_table(doc).rows}
    assert rows["output throughput"][-1] == "B better; in the same rounds: median TTFT +30.0 %, median TPOT +5.0 %"
    assert rows["median TTFT"][-1] == "B worse"
    with language("zh_CN"):
        zh = {r[0]: r for r in paired_table(doc).rows}
    assert any("+30.0 %" in r[-1] and "B better" not in r[-1] for r in zh.values())
    doc.ratios = paired.paired_ratios(a, a, METRICS)
    assert {r[0]: r for r in paired_table(doc).rows}["output throughput"][-1] == "no measurable change"


@pytest.mark.engine
@pytest.mark.slow
def test_make_compare_runs_two_flag_sets_on_the_tiny_stand_in(tmp_path):
    """scripts/compare.py end to end on the tiny stand-in, 2 rounds with a control: A (and its copy C) served in
    "an image" (the fake docker), B by "another virtualenv's" interpreter with a smaller batch; the document
    reads back and draws, and no server or container is left."""
    require_vllm()
    out = tmp_path / "cmp.json"
    other = tmp_path / "other-venv" / "python"  # B's servers run by "another virtualenv's" interpreter
    other.parent.mkdir()
    other.write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path / 'ran'}\nexec {sys.executable} \"$@\"\n")
    other.chmod(0o755)
    docker = ROOT / "tests" / "fakes" / "bin-docker"  # A (and its control) in "an image": the fake docker
    p = subprocess.run([sys.executable, "scripts/compare.py", "qwen2.5-0.5b", "--tiny", "--k", "2",
                        "--a=image:quay.io/ascend/vllm-ascend:v0.23.0", f"--b=python:{other} --max-num-seqs 2",
                        "--control", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=1500, env={**os.environ, "TUTORIAL_CACHE": str(ROOT / ".cache"),
                                          "TUTORIAL_RESULTS_DIR": str(tmp_path / "results"),
                                          "PATH": f"{docker}{os.pathsep}{os.environ['PATH']}",
                                          "FAKE_DOCKER_STATE": str(tmp_path / "docker"),
                                          "FAKE_DOCKER_PYTHON": sys.executable})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    doc = Comparison.model_validate_json(out.read_text())
    assert doc.order == ["ABC", "CBA"] and doc.b.flags == ["--max-num-seqs", "2"] and doc.steps == ["benchmark"]
    assert {r.key for r in doc.ratios} == {"output_throughput", "median_ttft_ms", "median_tpot_ms"}
    assert {r.key for r in doc.control} == {r.key for r in doc.ratios} and len(doc.rounds_c) == 2
    assert not out.with_suffix(".partial.json").exists()  # the rounds kept while it ran, gone once it is whole
    ran = (tmp_path / "ran").read_text().splitlines()
    assert sum("vllm.entrypoints.openai.api_server" in x for x in ran) == 2  # B's two servers, A's and C's not
    assert doc.b.python and doc.b.versions["vllm"] and any("versions_probe.py" in x for x in ran)
    calls = (tmp_path / "docker" / "calls.log").read_text().splitlines()
    runs = [c for c in calls if c.startswith("run --rm --name")]
    assert len(runs) == 5 and all("--net=host" in c and "vllm.entrypoints.openai.api_server" in c for c in runs)
    assert sum(c.startswith("rm -f npu-tutorials-side-") for c in calls) == 5  # A's warm-up, A's and C's: removed
    assert doc.warmup
    assert doc.a.image == "quay.io/ascend/vllm-ascend:v0.23.0" and doc.a.versions["vllm"]
    assert not list((tmp_path / "docker").glob("*.pid"))  # no container left
    assert all(r.k == 2 and r.low > 0 for r in doc.ratios) and doc.weights.kind == "stand-in"
    assert "Paired comparison" in p.stdout and "B/A" in p.stdout
    # 2 rounds can call nothing: said before the rounds are spent, and the table's note states the rule applied
    assert "make compare: 2 rounds cannot call a change" in p.stderr
    assert "covers at least 95 % (6 rounds or more) and excludes 1" in p.stdout
    paired_table(doc), paired_forest(doc)


# -- make check GATE=1 PAIRED=<ref>: the gate as a paired comparison of two checkouts' code ---------------------

from npu_tutorials.checks import paired_gate  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def _fake_checkout(root: Path, tpot: float, fail: bool = False) -> Path:
    """A checkout whose ``npu_tutorials`` is only what the paired gate's snippet imports: ``measure_gated`` and
    ``headline_figures`` (the real ones measure a page's gated steps; these return fixed figures)."""
    pkg = root / "src" / "npu_tutorials"
    (pkg / "tutorial").mkdir(parents=True)
    (pkg / "record").mkdir(parents=True)
    for d in (pkg, pkg / "tutorial", pkg / "record"):
        (d / "__init__.py").write_text("")
    (pkg / "tutorial" / "remeasure.py").write_text(
        "def measure_gated(key):\n"
        + ("    raise RuntimeError('the server died')\n" if fail else f"    return {{'key': key, 'tpot': {tpot}}}\n"))
    (pkg / "record" / "headline.py").write_text(
        "class F:\n    def __init__(self, v):\n        self.value = v\n"
        "def headline_figures(doc):\n    return {'median_tpot_ms': F(doc['tpot']), 'output_throughput': F(1000 / doc['tpot'])}\n")
    return root


def test_each_side_runs_its_own_checkouts_code_in_a_process_of_its_own(tmp_path):
    ref = _fake_checkout(tmp_path / "ref", 40.0)
    assert paired_gate.run_side(ref, "qwen2.5-0.5b", tmp_path / "s") == {"median_tpot_ms": 40.0,
                                                                          "output_throughput": 25.0}
    broken = _fake_checkout(tmp_path / "broken", 40.0, fail=True)
    with pytest.raises(TutorialError, match=r"broken's run of qwen2.5-0.5b failed \(exit 1\):\n(.|\n)*the server died"):
        paired_gate.run_side(broken, "qwen2.5-0.5b", tmp_path / "s")


def test_a_ref_is_a_commit_of_the_repository_checked_out_apart(tmp_path):
    repo = _repo(tmp_path)
    (repo / "f").write_text("two")
    _git(repo, "commit", "-qam", "two")
    first = paired_gate.resolve("HEAD~1", repo)
    assert len(first) == 40
    where = paired_gate.worktree(repo, first, tmp_path / "wt")
    assert (where / "f").read_text() == "one" and (repo / "f").read_text() == "two"
    paired_gate.drop_worktree(repo, where)
    assert not where.exists() and first not in _git(repo, "worktree", "list")
    with pytest.raises(TutorialError, match="PAIRED=nope: no such commit"):
        paired_gate.resolve("nope", repo)


@pytest.mark.parametrize("slower, failed", [(1.12, True), (1.03, False), (1.0, False)])
def test_the_paired_gate_fails_a_real_slowdown_of_five_percent_or_more_only(tmp_path, slower, failed):
    """Fake sides on a host that drifts 40 % over the session: this checkout 12 % slower fails; 3 % slower
    is a note (real, but under the gate's 5 %); unchanged passes."""
    rng = random.Random(11)
    calls = []

    def run(checkout, key, scratch):
        calls.append(checkout.name)
        host = 1 + 0.4 * len(calls) / 12
        tpot = 40.0 * host * (slower if checkout.name == "this" else 1.0) * (1 + rng.gauss(0, 0.003))
        return {"median_tpot_ms": tpot}

    doc = paired_gate.compare_checkouts("qwen2.5-0.5b", tmp_path / "ref", "a" * 40, tmp_path / "this", machine(),
                                        run=run)
    assert calls[:5] == ["ref", "ref", "this", "this", "ref"] and len(calls) == 13  # a warm-up, then 6 rounds
    assert doc.servers == "fresh" and doc.a.code == "a" * 40 and doc.warmup
    notes, bad = paired_gate.judge(doc)
    assert bool(bad) == failed
    if failed:
        assert "median TPOT this/ref 1.1" in bad[0] and "slower than ref aaaaaaaaaaaa" in bad[0]
    elif slower > 1:
        assert any("slower, by less than 5 %" in n for n in notes)
    else:
        assert any("no measurable change" in n for n in notes)
    assert "the code of aaaaaaaaaaaa" in paired_table(doc).note


@pytest.mark.engine
@pytest.mark.slow
def test_the_paired_gate_runs_two_checkouts_of_this_repository_on_the_tiny_stand_in(tmp_path, tiny):
    """HEAD's code against this working tree's, 2 rounds each on the real engine (a fresh process and server per
    side and round): a document per model, and one line per figure."""
    require_vllm()
    from npu_tutorials.record.results import read_doc

    build = tmp_path / "_build"
    (build / "results").mkdir(parents=True)
    src = ROOT / "results" / "qwen3-0.6b" / "cpu-amd-epyc-2c-bf16.json"
    doc = json.loads(src.read_text())
    doc["model"] = "qwen2.5-0.5b"
    (build / "results" / "qwen2.5-0.5b.json").write_text(json.dumps(doc))
    assert read_doc(build / "results" / "qwen2.5-0.5b.json").model == "qwen2.5-0.5b"
    env = {"TUTORIAL_MODEL_PATH_QWEN2_5_0_5B": str(tiny.path), "TUTORIAL_BACKEND": "cpu"}
    old = {k: os.environ.get(k) for k in env}
    trees = _git(ROOT, "worktree", "list")
    os.environ.update(env)
    try:
        notes, bad = paired_gate.paired_gate_lines(build, ROOT, "HEAD", ["qwen2.5-0.5b"], k=2)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    out = Comparison.model_validate_json((build / "compare" / "paired-gate-qwen2.5-0.5b.json").read_text())
    assert out.order == ["AB", "BA"] and out.servers == "fresh" and len(out.rounds_a) == 2
    assert {r.key for r in out.ratios} == {"output_throughput", "median_ttft_ms", "median_tpot_ms"}
    assert sum("this/ref" in n for n in notes + bad) == 3 and any("2 rounds per side took" in n for n in notes)
    assert _git(ROOT, "worktree", "list") == trees  # the ref's worktree is gone


def _gate_build(tmp_path: Path) -> Path:
    build = tmp_path / "_build"
    (build / "results").mkdir(parents=True)
    (build / "results" / "qwen3-0.6b.json").write_text((ROOT / "results" / "qwen3-0.6b" / "cpu-amd-epyc-2c-bf16.json")
                                                       .read_text())
    return build


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f").write_text("one")
    _git(repo, "add", "f")
    _git(repo, "commit", "-qm", "one")
    return repo


@pytest.mark.parametrize("second, failed", [(1.12, True), (1.0, False)])
def test_the_paired_gate_measures_again_before_it_fails(tmp_path, second, failed):
    """k rounds call this checkout 12 % slower; k more rounds are measured and the 2k judged together: a real
    slowdown still fails, a first half that was chance (the second unchanged) is a note."""
    halves, rng = iter([1.12, second]), random.Random(3)

    def compare(key, ref_dir, commit, this_dir, machine_, k):
        slower = next(halves)

        def run(checkout, key, scratch):
            return {"median_tpot_ms": 40.0 * (slower if checkout.name == "this" else 1.0) * (1 + rng.gauss(0, 0.01))}
        return paired_gate.compare_checkouts(key, Path("ref"), commit, Path("this"), machine_, k, run=run)

    notes, bad = paired_gate.paired_gate_lines(_gate_build(tmp_path), _repo(tmp_path), "HEAD", ["qwen3-0.6b"],
                                               compare=compare)
    assert any("called slower in 6 rounds, measuring 6 more" in n for n in notes)
    assert bool(bad) == failed and any("12 rounds per side took" in n for n in notes)
    doc = Comparison.model_validate_json((tmp_path / "_build" / "compare" / "paired-gate-qwen3-0.6b.json").read_text())
    assert len(doc.order) == len(doc.rounds_a) == 12 and doc.ratios[0].k == 12


def test_a_ref_whose_code_does_not_run_here_is_a_note_and_this_checkouts_failure_an_error(tmp_path):
    ref, this = _fake_checkout(tmp_path / "ref", 40.0, fail=True), _fake_checkout(tmp_path / "this", 40.0)

    def compare(key, ref_dir, commit, this_dir, machine_, k):
        return paired_gate.compare_checkouts(key, ref, commit, this, machine_, k)

    notes, bad = paired_gate.paired_gate_lines(_gate_build(tmp_path), _repo(tmp_path), "HEAD", ["qwen3-0.6b"],
                                               compare=compare)
    assert not bad and any("did not run in this environment, nothing to compare with" in n and "the server died" in n
                           for n in notes)
    broken = _fake_checkout(tmp_path / "broken", 40.0, fail=True)
    with pytest.raises(TutorialError, match="broken's run") as e:
        paired_gate.compare_checkouts("qwen3-0.6b", _fake_checkout(tmp_path / "ok", 40.0), "a" * 40, broken,
                                      machine(), 2)
    assert not isinstance(e.value, paired_gate.RefUnusable)


def test_a_round_that_fails_ends_the_comparison_with_the_rounds_before_it(monkeypatch):
    """The 30-round Qwen2.5 comparison lost its provenance when the benchmark client was OOM-killed at round 20
    (its rounds only in <out>.partial.json).  Now a failing round ends the comparison with a whole document of the
    rounds completed before it, ``stopped`` saying after which round and why (one line); before 2 rounds, the
    error itself.  Every side's tutorial is stopped either way.  The sides are fakes of ``Tutorial``: the
    attributes ``measure_paired`` reads (``state.round``, ``state.servers.stop``, the gated step, ``doc``)."""
    from types import SimpleNamespace

    from npu_tutorials.tutorial import remeasure

    made = []

    class FakeSide:
        def __init__(self, side, fail_at):
            self.label, self.fail_at, self.stopped = side.label, fail_at, False
            self.state = SimpleNamespace(round=0, servers=SimpleNamespace(stop=lambda: None))
            self.doc = SimpleNamespace(provenance=SimpleNamespace(machine=machine(), weights=None, profile="quick"),
                                       speed=100.0 if side.label == "A" else 90.0)

        def benchmark(self):  # qwen2.5-0.5b's gated step
            if self.label == "B" and self.state.round == self.fail_at:
                raise TutorialError("vllm bench serve failed (exit -9); last lines of bench.log:\nNamespace(...)")

        def stop(self):
            self.stopped = True

    def run(fail_at):
        made.clear()
        monkeypatch.setattr(remeasure, "_side_tutorial", lambda key, side, work, fresh, python=None:
                            made.append(FakeSide(side, fail_at)) or made[-1])
        return remeasure.measure_paired("qwen2.5-0.5b", Side(label="A"), Side(label="B", flags=["-x"]), k=6)

    monkeypatch.setattr(remeasure, "headline_figures",
                        lambda doc: {"output_throughput": SimpleNamespace(value=doc.speed)})
    doc = run(fail_at=4)  # round 4 fails: B goes first in it (AB, BA, AB, BA)
    assert doc.stopped == "after round 3 of 6: vllm bench serve failed (exit -9); last lines of bench.log:"
    assert doc.order == ["AB", "BA", "AB"] and len(doc.rounds_a) == len(doc.rounds_b) == 3
    [ratio] = doc.ratios
    assert ratio.k == 3 and ratio.median == pytest.approx(0.9)
    assert all(t.stopped for t in made)
    complete = run(fail_at=None)
    assert complete.stopped is None and len(complete.order) == 6
    with pytest.raises(TutorialError, match="exit -9"):
        run(fail_at=1)  # nothing to keep
    assert all(t.stopped for t in made)
