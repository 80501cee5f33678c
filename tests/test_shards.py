"""The build at scale: shards across runners assembled into one site, and the split itself.

The end-to-end test runs the real Makefile, Sphinx and sphinx-gallery in separate copies of this
checkout, on a gallery of two fast stand-in tutorials (``TUTORIAL_GALLERY_DIR``): two shards, then
``make assemble``, then a single build to compare with.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from npu_tutorials.site import shards
from npu_tutorials.core.errors import TutorialError
from npu_tutorials.site.selection import Hardware, fits, parse_shard, split

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

FAKE = '''"""
{title}
{underline}

A fast stand-in for a tutorial: it writes a results document and shows views of it (each cell leaves its
view's reference, drawn with its CSV when the page is built, as on a tutorial's page).
"""
import sys

sys.path.insert(0, {tests!r})
from docs import make_doc  # noqa: E402

from npu_tutorials.inputs.cards import load_card  # noqa: E402
from npu_tutorials.record.results import git_commit, write_doc  # noqa: E402
from npu_tutorials.views import Show, Views  # noqa: E402

# the model of this page (as a tutorial names it): Tutorial("{key}")
with open({counter!r}, "a") as runs:  # each execution, counted: the second language runs nothing
    runs.write("{key}\\n")
doc = make_doc("{key}", built_at="2026-11-30T0{n}:00:00+00:00", commit=git_commit(), throughput={n}0.0)
write_doc(doc)
show = Show(Views(doc, load_card("{key}")), "{key}")  # as a tutorial's tut.show: drawn by the page build
show.serving.bench_table()

# %%
show.accuracy.logits_verdict()

# %%
show.environment()

# %%
show.serving.bench_plot()

# %%
print(doc.provenance.built_at, doc.provenance.git_commit)
'''


def _fake_gallery(d: Path) -> Path:
    d.mkdir()
    counter = d.parent / "executions.txt"
    (d / "README.rst").write_text("Model tutorials\n===============\n")
    for n, (stem, key) in enumerate((("fast_a", "qwen2.5-0.5b"), ("fast_b", "palmyra-mini")), 1):
        title = f"Fast {stem[-1].upper()}"
        (d / f"{stem}.py").write_text(FAKE.format(title=title, underline="=" * len(title), tests=str(TESTS),
                                                   key=key, n=n, counter=str(counter)))
    return d


def _copy_checkout(dest: Path, base: Path) -> Path:
    """A clone of this working tree's files, committed once in ``base``: every copy of one test is at the
    same commit, as the runners of one CI run are (a copy without git has an unknown commit, and shards of an
    unknown commit are refused)."""
    if not base.exists():
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
        for f in files:
            src = ROOT / f
            if src.is_file() and not f.startswith("docs/source/tutorials/models/"):
                (base / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, base / f)
        git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
            subprocess.run([*git, *cmd], cwd=base, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", str(base), str(dest)], check=True, capture_output=True)
    return dest


def _env(gallery: Path, tmp: Path) -> dict:
    # a clean environment: nothing inherited from a surrounding `make test` (its build folder, above all)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORIAL_") and k not in ("MAKEFLAGS", "MFLAGS")}
    env.update({"TUTORIAL_GALLERY_DIR": str(gallery), "TUTORIAL_RECORDED_DIR": str(tmp / "rec"),
                "TUTORIAL_WEIGHTS": "stand-in", "PREFLIGHT": "true"})
    return env


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    """The fast gallery, one committed checkout, and one single ``make html`` of it (both languages): the shards
    are compared with it, and the browser opens it."""
    tmp = tmp_path_factory.mktemp("fast")
    gallery = _fake_gallery(tmp / "gallery")
    env = _env(gallery, tmp)
    single = _copy_checkout(tmp / "single", tmp / "checkout-base")
    r = _make(single, "html", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {"tmp": tmp, "env": env, "single": single, "base": tmp / "checkout-base"}


def _make(repo: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    venv = Path(sys.executable).parents[1]
    # -o: the running venv is never rebuilt (a copied tree's files are newer than its .ready)
    return subprocess.run(["make", "-o", f"{venv}/.ready", *args, f"VENV={venv}"], cwd=repo, capture_output=True,
                          text=True,
                          timeout=900, env=env)


def _page_outputs(repo: Path, stem: str, lang: str = "") -> str:
    """The executed output blocks of a page (what the tutorial printed and showed), in the English site or in
    the site of ``lang``."""
    html = (repo / "_build" / "html" / lang / "tutorials" / "models" / f"{stem}.html").read_text()
    import re

    return "\n".join(re.findall(r'<div class="tut-table">.*?</div>|<pre>.*?</pre>', html, flags=re.S))


def _drawn_from(repo: Path, stem: str, lang: str = "") -> tuple[list[str], int, list[str]]:
    """What a page shows whatever its language: what the tutorial printed (its ``<pre>`` blocks), how many tables
    it draws, and the identifiers of the documents its tables and figures name."""
    html = (repo / "_build" / "html" / lang / "tutorials" / "models" / f"{stem}.html").read_text()
    return (re.findall(r"<pre>.*?</pre>", html, flags=re.S), len(re.findall(r'<div class="tut-table">', html)),
            re.findall(r'<p class="tut-data">.*?(doc-[0-9a-f]+)', html))


def _doc(repo: Path, key: str) -> dict:
    d = json.loads((repo / "_build" / "results" / f"{key}.json").read_text())
    d["provenance"].pop("wall_time_s", None)
    return d


@pytest.mark.slow  # three page builds (half a minute on CI); assemble's refusals and the split: the tests below
def test_two_shards_plus_assemble_equal_one_build(fast, tmp_path):
    env, single = fast["env"], fast["single"]
    archives = tmp_path / "archives"
    archives.mkdir()
    for k in (1, 2):
        repo = _copy_checkout(tmp_path / f"shard{k}", fast["base"])
        r = _make(repo, "html", f"SHARD={k}/2", env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        packed = list((repo / "_build" / "shards").glob("*.tar.gz"))
        assert [p.name for p in packed] == [f"shard-{k}-of-2.tar.gz"]
        with tarfile.open(packed[0]) as tar:
            manifest = json.load(tar.extractfile("shard-manifest.json"))
        assert manifest["tutorials"] == [["fast_a"], ["fast_b"]][k - 1]
        shutil.copy(packed[0], archives)

    site = _copy_checkout(tmp_path / "assembled", fast["base"])
    r = _make(site, "assemble", f"SHARDS={archives}", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "assembled 2 shards: fast_a, fast_b" in r.stdout
    r = _make(site, "check", "CHECK_TRANSLATIONS=true", env=env)  # this gallery's pages have no catalogs
    assert r.returncode == 0, r.stderr[-3000:]

    for stem, key in (("fast_a", "qwen2.5-0.5b"), ("fast_b", "palmyra-mini")):
        assert _page_outputs(site, stem) == _page_outputs(single, stem) != ""
        assert _doc(site, key) == _doc(single, key)
        # both languages show the same executed outputs, and each build executed each tutorial once:
        # one per shard, one for the single build; neither the Chinese pass nor the assembly ran anything. The
        # views are drawn at page-build time in the page's language (their words differ), from the same document
        for repo in (site, single):
            assert _drawn_from(repo, stem, "zh_CN") == _drawn_from(repo, stem) != ([], 0, [])
    runs = (fast["tmp"] / "executions.txt").read_text().split()
    assert sorted(runs) == ["palmyra-mini", "palmyra-mini", "qwen2.5-0.5b", "qwen2.5-0.5b"]


def test_both_languages_of_a_tutorial_page_render_in_chromium(fast, tmp_path):
    """The built site in a real browser (Debian's headless Chromium): each tutorial page and the landing page,
    in both languages, lay out their tables, decode their figures, and link to their counterpart; the same probe
    says FAIL on a copy with a figure that does not decode and a counterpart removed."""
    from npu_tutorials.checks.browser import probe

    html = fast["single"] / "_build" / "html"
    pages = [f"{lang}{page}" for lang in ("", "zh_CN/")
             for page in ("tutorials/models/fast_a.html", "tutorials/models/fast_b.html", "index.html")]
    views = {v.path: v for v in probe(html, pages)}
    assert [p for v in views.values() for p in v.problems()] == []
    for page in pages:
        v = views["/" + page]
        zh = page.startswith("zh_CN/")
        assert v.lang == ("zh-CN" if zh else "en"), (page, v.lang)
        other = "/" + (page.removeprefix("zh_CN/") if zh else "zh_CN/" + page)
        assert {s["resolved"] for s in v.switches} == {other} and {s["status"] for s in v.switches} == {200}
        if "tutorials/" in page:  # the fast tutorial shows a table (the benchmark) and a figure (its plot)
            assert len(v.tables) >= 2 and all(t["width"] > 0 for t in v.tables), (page, v.tables)
            assert len(v.images) >= 1 and all(i["ok"] and i["width"] > 100 for i in v.images), (page, v.images)
            # issue 41: the page opens with where its numbers come from; its document's and its bundle's links (issue
            # 56: the document by its identifier) answer on the site
            internal = [a for a in v.fresh_links if not a["external"]]
            assert v.fresh == 1 and [a["status"] for a in internal] == [200, 200], v.fresh_links
            assert "/api/documents/doc-" in internal[0]["href"] and internal[1]["href"].endswith(".zip")
            assert all(t["fits"] for t in v.tables), (page, v.tables)
        else:  # the landing page: a card per model and the comparison figure, drawn
            assert v.cards == 2 and any("models_compared" in i["src"] and i["ok"] for i in v.images), v.images

    broken = tmp_path / "broken"
    shutil.copytree(html, broken)
    figure = views["/zh_CN/tutorials/models/fast_a.html"].images[0]["src"]
    (broken / "zh_CN" / "tutorials" / "models" / figure).resolve().write_bytes(b"not a png")
    (broken / "tutorials" / "models" / "fast_b.html").unlink()
    wide = broken / "tutorials" / "models" / "fast_a.html"  # a table wider than the column, with no box to scroll in
    article = re.search(r"<article[^>]*>", wide.read_text())[0]
    wide.write_text(wide.read_text().replace(article, article + '<table style="width:3000px"><tr><td>a</td></tr>'
                                             "<tr><td>b</td></tr></table>", 1))
    problems = [p for v in probe(broken, pages) for p in v.problems()]
    assert any(p.startswith("/zh_CN/tutorials/models/fast_a.html: figure") for p in problems), problems
    assert "/tutorials/models/fast_b.html: HTTP 404" in problems
    assert any(p.startswith("/tutorials/models/fast_a.html: table 1 overflows the content column") for p in problems)
    assert ("/zh_CN/tutorials/models/fast_b.html: the language switch ../../../tutorials/models/fast_b.html -> "
            "/tutorials/models/fast_b.html answers 404") in problems, problems


def test_the_screenshot_command_draws_both_languages(fast, tmp_path):
    """scripts/screenshot.py (make screenshots): a PNG of each language of a page, and the browser's verdict."""
    out = tmp_path / "shots"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot.py"), "--site",
                        str(fast["single"] / "_build" / "html"), "--page", "tutorials/models/fast_a.html",
                        "--out", str(out), "--height", "900"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    shots = sorted(p.name for p in out.iterdir())
    assert shots == ["en-tutorials-models-fast_a.png", "zh_CN-tutorials-models-fast_a.png"]
    for name in shots:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1280
    assert "browser: 2 pages render" in r.stdout
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot.py"), "--site", str(tmp_path / "none"),
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: no page tutorials/models/qwen2_5_0_5b.html"), r.stderr


def _archive(d: Path, k: int, n: int, tutorials: list[str], commit: str = "c1") -> None:
    d.mkdir(exist_ok=True)
    import io

    with tarfile.open(d / f"shard-{k}-of-{n}.tar.gz", "w:gz") as tar:
        data = json.dumps({"commit": commit, "shard": k, "of": n, "tutorials": tutorials}).encode()
        info = tarfile.TarInfo("shard-manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def test_assemble_refuses_bad_sets_one_line_each(tmp_path):
    a = tmp_path / "a"
    _archive(a, 1, 3, ["x"])
    _archive(a, 3, 3, ["x", "y"], commit="c2")
    problems = shards.check_set(shards.read_manifests(a), "c1")
    assert problems == ["incomplete: shard(s) 2/3 missing", "the shards come from different commits: c1, c2",
                        "x is in both shard-1-of-3.tar.gz and shard-3-of-3.tar.gz"]
    b = tmp_path / "b"
    _archive(b, 1, 2, ["x"])
    _archive(b, 2, 2, ["y"])
    assert shards.check_set(shards.read_manifests(b), "c1") == []
    assert shards.check_set(shards.read_manifests(b), "c9") == ["the shards were built from c1, this checkout is c9"]
    with pytest.raises(TutorialError, match="no shard archives"):
        shards.read_manifests(tmp_path / "empty")


def test_make_assemble_names_the_missing_shard(tmp_path):
    a = tmp_path / "a"
    _archive(a, 2, 2, ["qwen2_5_0_5b"])
    venv = Path(sys.executable).parents[1]
    r = subprocess.run([str(venv / "bin" / "python"), "scripts/shard.py", "assemble", "--shards", str(a)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "error: incomplete: shard(s) 1/2 missing" and "the shards were built from c1" in lines[1]


def test_the_split_is_stable_and_balanced_by_cost():
    costs = {"a": 500.0, "b": 300.0, "c": 250.0, "d": 100.0}
    assert split(costs, 2) == [["a", "d"], ["b", "c"]]
    assert split(dict(reversed(list(costs.items()))), 2) == [["a", "d"], ["b", "c"]]  # order does not matter
    assert split(costs, 1) == [["a", "b", "c", "d"]] and split(costs, 5)[4] == []
    for bad in ("0/2", "3/2", "1-2", "x"):
        with pytest.raises(TutorialError, match="is not k/N"):
            parse_shard(bad)


def test_a_build_executes_what_fits_its_hardware():
    from npu_tutorials.inputs.cards import load_card

    card = load_card("qwen-1_8b-chat")
    assert fits(card, Hardware("cpu", 0, None, 24.0)) == ""
    assert "18 GiB of RAM" in fits(card, Hardware("cpu", 0, None, 8.0))
    assert fits(card, Hardware("npu", 8, 64.0, 1024.0)) == ""
    assert "needs 16 GiB per device" in fits(card, Hardware("npu", 1, 8.0, 64.0))
    big = card.model_copy(update={"requires": card.requires.model_copy(update={"devices": 2, "cpu": False})})
    assert fits(big, Hardware("npu", 1, 64.0, 64.0)) == "it needs 2 npu devices; this build sees 1"
    assert "cannot run on a CPU build" in fits(big, Hardware("cpu", 0, None, 64.0))


def test_a_pages_bundle_reruns_it_with_its_own_command(fast, tmp_path):
    """Issue 41's "re-run exactly this": the bundle the built site offers for a page holds one command; run in a
    fresh clone (its ``git checkout``, then its ``make html``), it executes that page again, and only it."""
    import zipfile

    z = zipfile.ZipFile(fast["single"] / "_build" / "html" / "api" / "bundles" / "fast_a.zip")
    readme = z.read("fast_a/README.md").decode()
    command = re.search(r"```bash\n(.+)\n```", readme)[1]
    checkout, make = command.split(" && ")
    assert checkout.startswith("git checkout ") and make == "make html TUTORIAL_ONLY=fast_a"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(fast["base"]), str(clone)], check=True, capture_output=True)
    subprocess.run(checkout.split(), cwd=clone, check=True, capture_output=True)  # the commit it names exists
    runs = fast["tmp"] / "executions.txt"
    before = runs.read_text().split()
    r = _make(clone, *make.split()[1:], env=fast["env"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert runs.read_text().split() == before + ["qwen2.5-0.5b"]  # fast_a ran once more, fast_b not
    assert (clone / "_build" / "results" / "qwen2.5-0.5b.json").is_file()


@pytest.mark.engine
@pytest.mark.slow  # two builds of a page that serves the tiny stand-in with the real engine (minutes)
def test_a_bundle_reruns_its_page_on_the_tiny_stand_in(tmp_path):
    """Issue 41's "re-run exactly this" on the real engine: a site whose one page is the contributing guide's
    template (vLLM serving the tiny stand-in) offers a bundle; in a fresh clone, the bundle's own command (its
    ``git checkout``, then its ``make html``) runs that page again, and the new document is complete and of the
    commit the bundle names."""
    import zipfile

    from conftest import require_vllm

    require_vllm()
    from npu_tutorials.inputs.cards import load_card
    from npu_tutorials.inputs.standin import ensure_standin, tiny_config
    from npu_tutorials.inputs.weights import local_path_var
    from npu_tutorials.record.results import read_doc

    card = load_card("qwen2.5-0.5b")
    tiny = ensure_standin(card, config=tiny_config(card.config), label="tiny")
    gallery = tmp_path / "gallery"
    gallery.mkdir()
    (gallery / "README.rst").write_text("Model tutorials\n===============\n")
    shutil.copy(ROOT / "docs" / "source" / "tutorial_template.py", gallery / "tiny_page.py")
    env = {**_env(gallery, tmp_path), local_path_var(card): str(tiny.path), "TUTORIAL_WEIGHTS": "auto",
           "TUTORIAL_CACHE": str(ROOT / ".cache")}
    site = _copy_checkout(tmp_path / "site", tmp_path / "base")
    r = _make(site, "html", env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    z = zipfile.ZipFile(site / "_build" / "html" / "api" / "bundles" / "tiny_page.zip")
    command = re.search(r"```bash\n(.+)\n```", z.read("tiny_page/README.md").decode())[1]
    checkout, make = command.split(" && ")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "base"), str(clone)], check=True, capture_output=True)
    subprocess.run(checkout.split(), cwd=clone, check=True, capture_output=True)
    r = _make(clone, *make.split()[1:], env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = read_doc(clone / "_build" / "results" / "qwen2.5-0.5b.json")
    assert doc.provenance.status == "complete" and doc.results.benchmark is not None
    assert doc.provenance.git_commit == checkout.split()[-1] and doc.results.memory is not None
