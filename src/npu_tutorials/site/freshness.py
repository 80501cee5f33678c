"""The block a reader sees first on every tutorial page: which run its numbers come from, what they are good
for, and what to do with them (download the bundle, re-run the page, report a problem).

Drawn from the document the page shows (this build's, or the recorded run a page this build did not execute is
drawn from), in the pass's language, by :func:`npu_tutorials.site.banners.add_banners`.
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import date, datetime, timezone
from urllib.parse import quote

from packaging.version import InvalidVersion, Version

from ..core.messages import _, in_lang
from ..engine.platform import platform_for
from ..inputs.engines import ascend_engines
from ..record.headline import engine_versions
from .api import bundle_path, document_path, rerun_command

FRESH_MARK = "tut-freshness"
BLOCK = """
.. admonition:: {title}
   :class: tip {mark}

   {measured}

   {scope}

   {links}

"""


def repository_url() -> str:
    """The site's repository (where its issues are filed), from one place: ``TUTORIAL_REPOSITORY_URL``, else the
    GitHub Actions job's repository, else this checkout's ``origin`` where it is a web or ssh address; '' when
    none is known (the page then offers no report link)."""
    url = os.environ.get("TUTORIAL_REPOSITORY_URL", "").strip()
    if not url and os.environ.get("GITHUB_REPOSITORY"):
        url = f"{os.environ.get('GITHUB_SERVER_URL', 'https://github.com')}/{os.environ['GITHUB_REPOSITORY']}"
    if not url:
        try:
            url = subprocess.run(["git", "remote", "get-url", "origin"], capture_output=True, text=True,
                                 timeout=10, cwd=os.path.dirname(__file__)).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            url = ""
    m = re.fullmatch(r"git@([\w.-]+):(.+?)(\.git)?", url)
    if m:
        url = f"https://{m[1]}/{m[2]}"
    url = url.removesuffix(".git").rstrip("/")
    return url if re.match(r"https?://", url) else ""


def report_url(repo: str, page: str, doc, stem: str) -> str:
    """A new issue on ``repo``, prefilled with the page, the commit and date of its run, and the backend."""
    p = doc.provenance
    title = f"[Doc]: Feedback for {page}"
    body = (f"Page: {page}\nTutorial: {stem} ({doc.model})\nRun: {p.built_at}, commit {p.git_commit}\n"
            f"Backend: {p.backend} ({p.device}), {p.weights.kind if p.weights else 'unknown'} weights\n\n"
            "What is wrong or unclear:\n")
    return f"{repo}/issues/new?title={quote(title)}&body={quote(body)}"



@in_lang
def scope_line(doc, lang: str | None = None) -> str:
    """What the page's numbers are good for, and what they are not."""
    p = doc.provenance
    if p.weights is None or p.weights.kind != "real":
        return _("**Scope:** stand-in weights. These numbers show that the tutorial runs end to end and how "
                 "{device} performs; they are not deployment figures, and generated text means nothing.",
                 device=p.device)
    if not platform_for(p.backend).accelerator:
        return _("**Scope:** the real weights on a CPU. The accuracy checks hold for these weights; the speed is "
                 "this CPU's ({device}), not an accelerator's.", device=p.device)
    return _("**Scope:** one host ({device}) at one version, not a specification: run the benchmark on your own "
             "hardware before you size a deployment.", device=p.device)


OLD_AFTER_DAYS = 30  # a shown record older than this gets a warning with its age


def newest_release() -> str:
    """The newest vllm-ascend release the project declares (``data/pinned/engines.yaml``; the ``main`` snapshot is
    no release)."""
    tags = [e.vllm_ascend for e in ascend_engines() if e.vllm_ascend != "main"]
    return max(tags, key=lambda t: Version(t.removeprefix("v")))


@in_lang
def old_line(doc, today: date | None = None, lang: str | None = None) -> str:
    """A warning when the shown document is old: measured more than :data:`OLD_AFTER_DAYS` days before ``today``
    (default: now, UTC), or on an older vllm-ascend than the newest declared release; '' when neither."""
    p = doc.provenance
    today = today or datetime.now(timezone.utc).date()
    age = (today - date.fromisoformat(p.built_at[:10])).days
    parts = []
    if age > OLD_AFTER_DAYS:
        parts.append(_("measured {days} days ago (on {date})", days=age, date=p.built_at[:10]))
    ours, newest = p.machine.versions.get("vllm_ascend"), newest_release()
    try:
        older = bool(ours) and Version(ours.removeprefix("v")) < Version(newest.removeprefix("v"))
    except InvalidVersion:  # a snapshot's version string: nothing to say
        older = False
    if older:
        parts.append(_("measured on vllm-ascend {ours}, older than the newest declared release {newest}",
                       ours=ours, newest=newest))
    if not parts:
        return ""
    return _("**Old numbers:** {what}; the runner workflow renews them weekly, or re-run this page as below.",
             what="; ".join(parts))


@in_lang
def freshness_block(doc, stem: str, depth: int, recorded: str = "", doc_id: str = "", lang: str | None = None) -> str:
    """The block under a page's title: ``doc`` is the document the page shows (``recorded``: its path under
    ``results/`` when it is a recorded run; ``doc_id``: its identifier, quoted and linked where ``api/`` serves
    it); ``depth``: how far the page is below the site's root."""
    p, up = doc.provenance, "../" * depth
    weights = _("real weights") if p.weights and p.weights.kind == "real" else _("stand-in weights")
    # a build of uncommitted code says so: its commit alone would not reproduce it
    short = p.git_commit[:12] + ("+dirty" if p.git_commit.endswith("+dirty") else "")
    if recorded:
        measured = _("Recorded by a build on {date}, commit ``{commit}``, with {versions}, on {device}, "
                     "{weights}; this build did not execute it.", date=p.built_at[:10], commit=short,
                     versions=engine_versions(doc) or "–", device=p.device, weights=weights)
    else:
        measured = _("Measured by this site's build on {date}, commit ``{commit}``, with {versions}, on {device}, "
                     "{weights}.", date=p.built_at[:10], commit=short, versions=engine_versions(doc) or "–",
                     device=p.device, weights=weights)
    commit = p.git_commit.removesuffix("+dirty")
    links = [_("`Download the bundle <{href}>`__ (script, card, commands, results)", href=up + bundle_path(stem)),
             _("re-run this page: ``{command}``", command=rerun_command(stem, commit))]
    repo = repository_url()
    if repo:
        page = f"tutorials/models/{stem}.html"
        links.append(_("`report a problem with this page <{href}>`__", href=report_url(repo, page, doc, stem)))
    if doc_id:
        measured += " " + _("Document ``{id}`` (`JSON <{href}>`__): cite it by this identifier.", id=doc_id,
                            href=up + document_path(doc_id))
    old = old_line(doc, lang=lang)
    if old:
        measured += " " + old
    return BLOCK.format(title=_("Where these numbers come from"), mark=FRESH_MARK, measured=measured,
                        scope=scope_line(doc, lang), links=" · ".join(links))
