"""A failed tutorial run never leaves a page that a later build publishes as good.

The sphinx-gallery mechanism is exercised on a throw-away project with one tiny
example (the real tutorials take minutes): the project's own ``reset_example``
hook and page banners, the real sphinx-gallery and Sphinx.
"""

import os
import subprocess
import sys
from pathlib import Path


from npu_tutorials.site import banners, build_plan, rerun
from npu_tutorials.checks.site_check import NOT_EXECUTED_MARK, check
from npu_tutorials.inputs.gallery_index import tutorials

ROOT = Path(__file__).resolve().parents[1]

CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / 'src')!r})
from npu_tutorials.site.banners import add_banners
extensions = ["sphinx_gallery.gen_gallery"]
sphinx_gallery_conf = {{
    "examples_dirs": ["gallery"], "gallery_dirs": ["generated"], "filename_pattern": r"\\.py$",
    "reset_modules": ("npu_tutorials.site.teardown.reset_example",), "reset_modules_order": "both",
    "abort_on_example_error": False, "only_warn_on_example_error": False,
}}
def setup(app):
    app.connect("source-read", add_banners)
"""

EXAMPLE = '''"""
A tiny example
==============

Writes some output, then fails when ``EX_FAIL`` is set.
"""
import os
from pathlib import Path

counter = Path(os.environ["EX_COUNTER"])
n = int(counter.read_text()) + 1 if counter.is_file() else 1
counter.write_text(str(n))
print(f"run number {n}")

# %%
if os.environ.get("EX_FAIL") == "1":
    raise RuntimeError("the server went away")
print("all good")
'''


def _project(tmp_path: Path) -> Path:
    (tmp_path / "gallery").mkdir()
    (tmp_path / "gallery" / "README.txt").write_text("Gallery\n=======\n")
    (tmp_path / "gallery" / "ex.py").write_text(EXAMPLE)
    (tmp_path / "conf.py").write_text(CONF)
    (tmp_path / "index.rst").write_text("Site\n====\n\n.. toctree::\n\n   generated/index\n")
    return tmp_path


def _build(proj: Path, *, fail: bool, stale: bool = False) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "sphinx", "-b", "html", "-q", str(proj), str(proj / "_build")]
    if stale:  # sphinx-gallery's documented switch to re-run examples whose MD5 is current
        args += ["-D", "sphinx_gallery_conf.run_stale_examples=True"]
    env = {**os.environ, "EX_FAIL": "1" if fail else "0", "EX_COUNTER": str(proj / "counter")}
    return subprocess.run(args, cwd=proj.parent, env=env, capture_output=True, text=True, timeout=600)


def test_a_failed_run_is_rerun_by_the_next_build(tmp_path):
    proj = _project(tmp_path)
    md5 = proj / "generated" / "ex.py.md5"
    page = proj / "_build" / "generated" / "ex.html"

    ok = _build(proj, fail=False)
    assert ok.returncode == 0, ok.stderr
    assert md5.is_file() and "run number 1" in page.read_text()

    failed = _build(proj, fail=True, stale=True)  # the step 1-2: re-run, and it breaks
    assert failed.returncode != 0
    assert "Traceback" in page.read_text() and "run number 2" in page.read_text()
    assert not md5.is_file(), "a failed run must not leave the earlier run's MD5 in place"

    again = _build(proj, fail=False)  # step 3: a plain build
    assert again.returncode == 0, again.stderr
    html = page.read_text()
    assert "run number 3" in html and "all good" in html and "Traceback" not in html
    assert md5.is_file()

    unchanged = _build(proj, fail=False)  # nothing changed: not re-run
    assert unchanged.returncode == 0 and "run number 3" in page.read_text()


def test_a_page_rendered_without_execution_says_so(tmp_path):
    proj = _project(tmp_path)
    p = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-D", "plot_gallery=0", str(proj),
                        str(proj / "_build")], cwd=proj, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "EX_COUNTER": str(proj / "counter")})
    assert p.returncode == 0, p.stderr
    html = (proj / "_build" / "generated" / "ex.html").read_text()
    assert NOT_EXECUTED_MARK in html and "Not executed in this build" in html
    assert html.index("A tiny example") < html.index("Not executed in this build")
    assert not (proj / "counter").exists()


def test_banner_only_on_unexecuted_pages():
    rst = ("\n.. only:: html\n\n    .. note::\n        :class: sphx-glr-download-link-note\n\n"
           "        :ref:`Go to the end <sphx_glr_download_tutorials_models_x.py>`\n\n"
           ".. _sphx_glr_tutorials_models_x.py:\n\n\nTitle\n=====\n\nIntro.\n\n.. code-block:: Python\n\n"
           "    print(1)\n")
    src = [rst]
    banners.add_banners(None, "tutorials/models/x", src)
    assert NOT_EXECUTED_MARK in src[0] and src[0].index("=====") < src[0].index(NOT_EXECUTED_MARK)
    executed = [rst + "\n.. rst-class:: sphx-glr-script-out\n\n .. code-block:: none\n\n    1\n"]
    banners.add_banners(None, "tutorials/models/x", executed)
    assert NOT_EXECUTED_MARK not in executed[0]
    other = ["Usage\n=====\n\nNo gallery here.\n"]
    banners.add_banners(None, "usage", other)
    assert other == ["Usage\n=====\n\nNo gallery here.\n"]


def test_force_forgets_the_selected_tutorials_only(tmp_path, monkeypatch):
    gallery, results, downloads = tmp_path / "g", tmp_path / "r", tmp_path / "d"
    for d in (gallery, results, downloads):
        d.mkdir()
    monkeypatch.setenv("TUTORIAL_RESULTS_DIR", str(results))
    monkeypatch.setenv("TUTORIAL_DOWNLOADS_DIR", str(downloads))
    for stem, key in (("qwen2_5_0_5b", "qwen2.5-0.5b"), ("palmyra_mini", "palmyra-mini")):
        (gallery / f"{stem}.py.md5").write_text("x")
        (results / f"{key}.json").write_text("{}")
        (downloads / f"{key}-bench.json").write_text("{}")
    removed = build_plan.force_rerun(gallery, "qwen2_5")
    assert sorted(p.name for p in removed) == ["qwen2.5-0.5b-bench.json", "qwen2.5-0.5b.json", "qwen2_5_0_5b.py.md5"]
    assert (gallery / "palmyra_mini.py.md5").is_file() and (results / "palmyra-mini.json").is_file()


def _page(build: Path, stem: str, html: str) -> None:
    """A built page (with its bundle, which every shown page links)."""
    p = build / "html" / "tutorials" / "models" / f"{stem}.html"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(html)
    (build / "html" / "api" / "bundles").mkdir(parents=True, exist_ok=True)
    (build / "html" / "api" / "bundles" / f"{Path(stem).name}.zip").write_bytes(b"PK")


def test_make_html_fails_on_a_failed_page_and_names_it(tmp_path):
    """`make html` ends with the check: a failed page makes it exit non-zero with one line naming the page."""
    build = tmp_path / "b"
    _page(build, "qwen2_5_0_5b", '<div class="sphx-glr-script-out"></div><pre>Traceback (most recent call last):'
                                 '\nopenai.APIConnectionError</pre>')
    for stem in tutorials():
        if stem != "qwen2_5_0_5b":
            _page(build, stem, f'<div class="{NOT_EXECUTED_MARK}">Not executed in this build</div>')
    venv = Path(sys.executable).parents[1]
    # -o: the running venv is never rebuilt (a tree whose files are newer than .ready would delete it)
    p = subprocess.run(["make", "-o", f"{venv}/.ready", "html", f"BUILDDIR={build}", f"VENV={venv}", "PREFLIGHT=true",
                        "SPHINX=true", "TRANSLATE=true"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    lines = [l for l in p.stderr.splitlines() if l.startswith("check: ")]
    assert lines == ["check: qwen2_5_0_5b: the tutorial failed: openai.APIConnectionError (the next make html "
                     "re-runs it)"], p.stderr
    assert "site:" not in p.stdout


def test_stale_results_and_unlabelled_pages_fail_the_built_check(tmp_path):
    from docs import make_doc

    from npu_tutorials.record.results import write_doc

    build = tmp_path / "b"
    good = ('<div class="tut-freshness"></div><div class="sphx-glr-script-out"></div>' + '<div class="tut-table"></div><p class="tut-data"></p>' * 3 +
            '<img class="sphx-glr-single-img"> 2026-11-29T10:00:00+00:00 abc123')
    _page(build, "qwen2_5_0_5b", good)
    write_doc(make_doc(built_at="2026-11-28T09:00:00+00:00"), build / "results" / "qwen2.5-0.5b.json")
    _page(build, "palmyra_mini", "<p>no output, no label</p>")
    for stem in tutorials():
        if stem not in ("qwen2_5_0_5b", "palmyra_mini"):
            _page(build, stem, f'<div class="{NOT_EXECUTED_MARK}"></div>')
    problems = check(build, strict=False)
    assert problems == ["palmyra_mini: the page shows no output and does not say that it was not executed",
                        "qwen2_5_0_5b: the page's provenance does not match qwen2.5-0.5b.json (stale page or JSON)"]
    strict = check(build, strict=True)
    assert "qwen_1_8b_chat: the page shows no output: the tutorial did not execute" in strict


def test_changing_one_card_reruns_only_its_tutorial(tmp_path, monkeypatch):
    """Each tutorial's digest covers its own card and weights, not the others'."""
    from npu_tutorials.inputs import cards

    gallery = tmp_path / "g"
    gallery.mkdir()
    monkeypatch.setenv("TUTORIAL_WEIGHTS", "stand-in")
    stems = tuple(tutorials())  # every tutorial of the gallery
    for stem in stems:
        (gallery / f"{stem}.py.md5").write_text("x")
    assert sorted(rerun.invalidate_changed_tutorials(gallery)) == sorted(stems)
    for stem in stems:
        (gallery / f"{stem}.py.md5").write_text("x")
    assert rerun.invalidate_changed_tutorials(gallery) == []  # nothing changed

    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    for p in cards.CARDS_DIR.glob("*.yaml"):
        (cards_dir / p.name).write_text(p.read_text())
    card = cards_dir / "palmyra-mini.yaml"
    card.write_text((card.read_text() + "\n# a comment, and the summary reworded, change no measurement\n")
                    .replace("Writer's lightweight model", "Writer's small model"))
    monkeypatch.setattr(cards, "CARDS_DIR", cards_dir)
    assert rerun.invalidate_changed_tutorials(gallery) == []
    card.write_text(card.read_text().replace("max_tokens: 256", "max_tokens: 255"))  # a measured section
    assert rerun.invalidate_changed_tutorials(gallery) == ["palmyra_mini"]
    assert not (gallery / "palmyra_mini.py.md5").exists() and (gallery / "qwen2_5_0_5b.py.md5").exists()


def test_the_weights_are_part_of_the_digest(monkeypatch, tmp_path):
    monkeypatch.setenv("TUTORIAL_WEIGHTS", "stand-in")
    stand_in = rerun.inputs_digest("qwen2.5-0.5b")
    assert stand_in == rerun.inputs_digest("qwen2.5-0.5b")
    model = tmp_path / "Qwen2.5-0.5B"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"1234")
    monkeypatch.setenv("TUTORIAL_WEIGHTS", "auto")
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_QWEN2_5_0_5B", str(model))
    local = rerun.inputs_digest("qwen2.5-0.5b")
    assert local != stand_in
    (model / "model.safetensors").write_bytes(b"12345")  # another revision of the weights
    assert rerun.inputs_digest("qwen2.5-0.5b") != local
    # another model's weights path is not this tutorial's input
    before = rerun.inputs_digest("qwen2.5-0.5b")
    monkeypatch.setenv("TUTORIAL_MODEL_PATH_PALMYRA_MINI", str(tmp_path))
    assert rerun.inputs_digest("qwen2.5-0.5b") == before


def test_a_failed_tutorial_is_named_by_its_own_error_not_by_sphinx_s_bug_banner(tmp_path):
    """conf.py lets sphinx-gallery only warn; the build's check then names the page with the tutorial's
    own last error line.  Sphinx's "please report this to sphinx-doc" banner never appears."""
    from npu_tutorials.checks.site_check import failure_line

    assert '"only_warn_on_example_error": True' in (ROOT / "conf.py").read_text()
    proj = _project(tmp_path)
    conf = proj / "conf.py"
    conf.write_text(conf.read_text().replace('"only_warn_on_example_error": False', '"only_warn_on_example_error": True'))
    p = _build(proj, fail=True)
    assert "sphinx-doc/sphinx/issues" not in p.stderr and "Extension error" not in p.stderr
    html = (proj / "_build" / "generated" / "ex.html").read_text()
    assert failure_line(html) == "RuntimeError: the server went away"


DIED = ("the vLLM server died during the serving benchmark (killed by signal SIGKILL); last lines of "
        "{log}:\n(EngineCore pid=7) INFO 12-02 10:00:00 [multiproc_executor.py:486] [shutdown] Executor: all "
        "workers exited gracefully")


def test_a_tutorial_error_ends_on_its_cause_without_a_traceback(tmp_path):
    """Issue 40: a TutorialError (here the message a server killed during the benchmark raises,
    engine.server.VLLMServer.check_alive: the cause, then the log it quotes) is logged and shown as its message,
    not as a traceback; the page, the failed run's results document and the check's line name the cause, not the
    log's last line; the language check says nothing more about the failed page.  Another exception keeps its
    traceback, logged once."""
    from npu_tutorials.checks.site_check import failure_line
    from npu_tutorials.checks.translations import mirror_problems

    proj = _project(tmp_path)
    ex = proj / "gallery" / "ex.py"
    died = DIED.format(log=proj / "server.log")
    conf = proj / "conf.py"  # as conf.py has it: the build's own check names a failed page
    conf.write_text(conf.read_text().replace('"only_warn_on_example_error": False', '"only_warn_on_example_error": True'))
    ex.write_text(EXAMPLE.replace('raise RuntimeError("the server went away")',
                                  "from npu_tutorials.core.errors import TutorialError\n"
                                  f"    raise TutorialError({died!r})"))
    p = _build(proj, fail=True)
    assert "Traceback (most recent call last)" not in p.stderr, p.stderr[-3000:]
    assert "gallery/ex.py failed: TutorialError: the vLLM server died during the serving benchmark" in p.stderr
    # the closing summary names it in one line (no log, no traceback)
    assert "leaving traceback:\n\n    the vLLM server died during the serving benchmark (killed by signal SIGKILL)\n" in p.stderr
    html = (proj / "_build" / "generated" / "ex.html").read_text()
    assert "Traceback" not in html and "all workers exited gracefully" in html  # the page keeps the whole message
    assert failure_line(html) == "the vLLM server died during the serving benchmark (killed by signal SIGKILL)"
    # the build's check: its line is the cause, and the languages check skips the failed page
    build = tmp_path / "b"
    for lang in ("", "zh_CN/"):
        _page(build, f"{lang}qwen2_5_0_5b", html)
    for stem in tutorials():
        if stem != "qwen2_5_0_5b":
            _page(build, stem, f'<div class="{NOT_EXECUTED_MARK}">Not executed in this build</div>')
    assert [l for l in mirror_problems(build / "html") if "qwen2_5_0_5b" in l] == []
    r = subprocess.run([sys.executable, "scripts/check_site.py", "--built", "--lang2", "zh_CN", "--build-dir",
                        str(build)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TUTORIAL_ONLY": ""})
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == ("check: qwen2_5_0_5b: the tutorial failed: the vLLM server died during the "
                                         "serving benchmark (killed by signal SIGKILL) (the next make html re-runs it)")
    assert "tables in English" not in r.stderr
    # any other exception: its traceback, logged once, and its exception line on the page
    ex.write_text(EXAMPLE)
    p = _build(proj, fail=True, stale=True)
    assert p.stderr.count("Traceback (most recent call last)") == 1, p.stderr[-3000:]
    html = (proj / "_build" / "generated" / "ex.html").read_text()
    assert failure_line(html) == "RuntimeError: the server went away"


def test_a_failed_runs_document_names_its_cause(tmp_path, monkeypatch):
    """The cause sphinx-gallery saw (site.failures -> facade.note_failure) is the failed document's reason,
    with the checkout's paths scrubbed (a document carries no machine path)."""
    from npu_tutorials.core.errors import TutorialError, one_line
    from npu_tutorials.record.results import ROOT as REPO
    from npu_tutorials.tutorial import facade

    seen = []

    class Active:
        def abandon(self, reason):
            seen.append(reason)

    monkeypatch.setattr(facade, "_ACTIVE", [Active()])
    facade.note_failure(one_line(TutorialError(DIED.format(log=f"{REPO}/_build/server.log"))))
    facade.abandon_active("the tutorial raised before finish()")
    assert seen == ["the vLLM server died during the serving benchmark (killed by signal SIGKILL)"]
    monkeypatch.setattr(facade, "_ACTIVE", [Active()])
    facade.abandon_active("the tutorial raised before finish()")  # nothing noted: the generic reason
    assert seen[-1] == "the tutorial raised before finish()"


def test_the_end_of_make_html_judges_only_the_selected_tutorials(tmp_path):
    """`make html TUTORIAL_ONLY=<one>` in a fresh clone: the pages it was not asked to execute are not its to fail."""
    from docs import make_doc

    from npu_tutorials.record.results import write_doc

    build = tmp_path / "b"
    doc = make_doc()
    good = ('<div class="tut-freshness"></div><div class="sphx-glr-script-out"></div>' + '<div class="tut-table"></div><p class="tut-data"></p>' * 3 +
            f'<img class="sphx-glr-single-img"> {doc.provenance.built_at} {doc.provenance.git_commit}')
    _page(build, "qwen2_5_0_5b", good)
    write_doc(doc, build / "results" / "qwen2.5-0.5b.json")
    for only, rc in (("qwen2_5_0_5b", 0), ("", 1)):  # every other page absent: only the selection passes
        p = subprocess.run([sys.executable, "scripts/check_site.py", "--built", "--build-dir", str(build)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env={**os.environ, "TUTORIAL_ONLY": only})
        assert p.returncode == rc, p.stderr
        assert ("palmyra_mini" in p.stderr) == (rc == 1)
