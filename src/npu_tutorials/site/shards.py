"""Shards across runners: pack what one shard executed, assemble N shards into one site.

``make html SHARD=k/N`` executes only shard k's tutorials (:mod:`.selection`) and
packs them into ``_build/shards/shard-k-of-N.tar.gz``: each executed tutorial's
generated page, images, sphinx-gallery MD5 and cost files, downloads, and
results document, with a manifest (commit, shard, tutorials).
``make assemble SHARDS=<dir>`` checks the set (complete, one commit, no
tutorial twice), unpacks it and builds the whole site with nothing executed.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
import io

from ..core.errors import TutorialError
from ..inputs.gallery_index import tutorials
from ..record.results import UNKNOWN_COMMIT, known_commit, now_utc, read_doc
from .selection import parse_shard

MANIFEST = "shard-manifest.json"
PAGE_FILES = (".rst", ".py", ".py.md5", ".cost.json", ".codeobj.json", ".ipynb", ".zip", ".inputs")


def _tutorial_files(gallery_out: Path, downloads: Path, results: Path, stem: str, key: str) -> list[tuple[Path, str]]:
    """(file, name inside the archive) of everything one executed tutorial contributes to the site."""
    out = [(gallery_out / f"{stem}{ext}", f"gallery/{stem}{ext}") for ext in PAGE_FILES
           if (gallery_out / f"{stem}{ext}").is_file()]
    out += [(p, f"gallery/images/{p.name}") for p in sorted((gallery_out / "images").glob(f"sphx_glr_{stem}_*.png"))]
    out += [(p, f"gallery/images/thumb/{p.name}")
            for p in sorted((gallery_out / "images" / "thumb").glob(f"sphx_glr_{stem}_thumb.png"))]
    out += [(p, f"gallery/data/{p.name}") for p in sorted(downloads.glob(f"{key}-*")) + sorted(downloads.glob(f"{key}.*"))]
    out.append((results / f"{key}.json", f"results/{key}.json"))
    return out


def pack(shard: str, gallery_out: Path, downloads: Path, results: Path, executed: list[str], dest: Path) -> Path:
    """Pack the executed tutorials of shard ``k/N`` into one archive; refuse an unfinished one."""
    k, n = parse_shard(shard)
    keys = tutorials()
    files = []
    for stem in executed:
        key = keys[stem]
        if not (gallery_out / f"{stem}.py.md5").is_file():
            raise TutorialError(f"shard {shard}: {stem} did not run to the end in this build (no MD5); "
                                "nothing to pack")
        doc = read_doc(results / f"{key}.json")
        if doc.provenance.status != "complete":
            raise TutorialError(f"shard {shard}: {stem}'s run {doc.provenance.status}; nothing to pack")
        files += _tutorial_files(gallery_out, downloads, results, stem, key)
    manifest = {"commit": known_commit(f"packing shard {shard}"), "shard": k, "of": n, "tutorials": sorted(executed),
                "packed_at": now_utc()}
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"shard-{k}-of-{n}.tar.gz"
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)

        tar.addfile(info, io.BytesIO(data))
        for path, name in files:
            tar.add(path, arcname=name)
    tmp.replace(out)
    return out


def read_manifests(shards_dir: Path) -> list[tuple[Path, dict]]:
    archives = sorted(Path(shards_dir).glob("shard-*-of-*.tar.gz"))
    if not archives:
        raise TutorialError(f"no shard archives (shard-k-of-N.tar.gz) in {shards_dir}")
    out = []
    for a in archives:
        with tarfile.open(a) as tar:
            try:
                out.append((a, json.load(tar.extractfile(MANIFEST))))
            except KeyError:
                raise TutorialError(f"{a.name}: no {MANIFEST}: not a shard archive") from None
    return out


def check_set(manifests: list[tuple[Path, dict]], commit: str) -> list[str]:
    """Problems with a set of shards, one line each (empty: it assembles into one site)."""
    problems = []
    ns = {m["of"] for _, m in manifests}
    if len(ns) > 1:
        problems.append(f"the shards come from splits into different numbers of shards: {sorted(ns)}")
    n = max(ns)
    have = sorted(m["shard"] for _, m in manifests)
    missing = sorted(set(range(1, n + 1)) - set(have))
    if missing:
        problems.append(f"incomplete: shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing")
    dup = sorted({k for k in have if have.count(k) > 1})
    if dup:
        problems.append(f"shard(s) {', '.join(f'{k}/{n}' for k in dup)} given twice")
    commits = {m["commit"] for _, m in manifests}
    unknown = [a.name for a, m in manifests if m["commit"] == UNKNOWN_COMMIT]
    if unknown or commit == UNKNOWN_COMMIT:
        # "unknown" equal to "unknown" proves nothing: git could not read the checkout (in a container job,
        # until `git config --global --add safe.directory`)
        where = ", ".join(unknown + (["this checkout"] if commit == UNKNOWN_COMMIT else []))
        problems.append(f"the commit is unknown for {where}: the shards cannot be shown to come from one commit; "
                        "mark the workspace a git safe.directory where they are built and assembled")
        commits -= {UNKNOWN_COMMIT}
    if len(commits) > 1:
        problems.append(f"the shards come from different commits: {', '.join(sorted(commits))}")
    elif commits and commit != UNKNOWN_COMMIT and commits != {commit}:
        problems.append(f"the shards were built from {commits.pop()}, this checkout is {commit}")
    seen: dict[str, str] = {}
    for a, m in manifests:
        for stem in m["tutorials"]:
            if stem in seen:
                problems.append(f"{stem} is in both {seen[stem]} and {a.name}")
            seen[stem] = a.name
    return problems


def unpack(manifests: list[tuple[Path, dict]], gallery_out: Path, downloads: Path, results: Path) -> list[str]:
    """Unpack every shard's files where a build would have written them; return the tutorials."""
    where = {"gallery/data/": downloads, "gallery/": gallery_out, "results/": results}
    stems = []
    for a, m in manifests:
        with tarfile.open(a) as tar:
            for member in tar.getmembers():
                if member.name == MANIFEST or not member.isfile():
                    continue
                prefix = next(p for p in where if member.name.startswith(p))
                target = where[prefix] / member.name[len(prefix):]
                if ".." in Path(member.name).parts:
                    raise TutorialError(f"{a.name}: unsafe path {member.name}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
        stems += m["tutorials"]
    return sorted(stems)
