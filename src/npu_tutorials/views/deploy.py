"""The commands this build ran, collapsed and labelled, apart from the page's copy-paste set.

The build's own commands carry what only a build needs (127.0.0.1 and a random port, this build's weights
folder, ``--logprobs-mode raw_logits`` for the accuracy checks, ``VLLM_CPU_*`` settings, eager mode on
the CPU).  They stay on the page as a record, in a collapsed block; the commands to copy are in the
"Deploy it yourself" section (:mod:`npu_tutorials.engine.deploy`).
"""

from __future__ import annotations

from ..engine.collect_env import deployer_command
from ..engine.deploy import curl_text
from ..core.errors import TutorialError
from ..core.messages import N_, _, html, listed
from ..engine.platform import platform_for
from .base import BaseViews, shown

NOT_FOR_COPYING = N_("The commands of this page's own build, for the record, not for copying: they point at this "
                     "build's weights folder (<weights>) and a server on 127.0.0.1 at a random port, with no API key "
                     "(nothing outside this machine reaches it), and carry settings only the build needs. Copy from "
                     "\"Deploy it yourself\".")


class Collapsed:
    """Labelled blocks of text shown collapsed (an HTML ``<details>``) in the gallery, plain elsewhere.
    The summary, the note and the captions are in the language being rendered."""

    def __init__(self, summary: str, blocks: list[tuple[str, str]], note: str | None = None):
        self.summary, self.blocks = summary, blocks
        self.note = _(NOT_FOR_COPYING) if note is None else note

    def _repr_html_(self) -> str:
        body = "".join(f"<p>{html(caption)}</p><pre>{html(text)}</pre>" for caption, text in self.blocks)
        return (f'<details class="tut-this-build"><summary>{html(self.summary)}</summary>'
                f'<p class="tut-note">{html(self.note)}</p>{body}</details>')

    def __repr__(self) -> str:
        blocks = "\n\n".join(f"# {caption}\n{text}" for caption, text in self.blocks)
        return f"{self.summary}\n({self.note})\n\n{blocks}"


class DeployViews(BaseViews):
    BUILD_PARTS = {"offline": N_("the offline script"), "server": N_("the server"), "requests": N_("the request"),
                   "bench": N_("the benchmark")}

    def _build_block(self, part: str) -> list[tuple[str, str]]:
        r = self.r
        if part == "offline":
            o = self.need("offline_example")
            notes = ["# " + shown(c) for c in o.build_changes]
            return [(_("the offline vllm.LLM script, run as its own Python process ({seconds:.0f} s, engine "
                       "start included)", seconds=o.wall_s), "\n".join([*notes, o.code]) if notes else o.code)]
        if part == "server":
            s = self.need("server")
            notes = [_("# --max-logprobs -1 --logprobs-mode raw_logits: for the accuracy checks on this page"),
                     _("# <weights>: this build's weights folder")]
            if r.conditions is not None:
                notes += ["# " + shown(c) for c in r.conditions.build_changes]  # stored messages
            notes.append(_("# ready after {seconds:.0f} s; models: {models}", seconds=s.startup_s,
                           models=", ".join(s.models)))
            return [(_("the server"), f"{s.command}\n" + "\n".join(notes))]
        if part == "requests":
            base = self.need("server").base_url
            return [(_("readiness and the request (curl; the page's own request went through the openai client)"),
                     f"curl -sf {base}/v1/models\n{curl_text(self.card, base, auth=False)}")]
        if part == "bench":
            return [(_("vllm bench serve against this build's server (<weights>: its tokenizer)"),
                     self.need("benchmark").command)]
        raise TutorialError(f"this_build_ran: unknown part {part!r}; one of {', '.join(self.BUILD_PARTS)}")

    def this_build_ran(self, *parts: str) -> Collapsed:
        """This build's own commands for ``parts`` (``offline``, ``server``, ``requests``, ``bench``;
        none: every part the document has), collapsed and labelled as not for copying."""
        blocks, names = [], []
        for part in parts or self.BUILD_PARTS:
            try:
                blocks += self._build_block(part)
            except TutorialError:
                if parts:  # asked for by name: the step must have run
                    raise
                continue
            names.append(_(self.BUILD_PARTS[part]))
        if not blocks:
            raise TutorialError(f"the results of {self.doc.model} hold none of this build's commands yet")
        return Collapsed(_("This build ran: {parts} ({backend}, {device}; not for copying)",
                           parts=listed(names), backend=self.backend, device=self.prov.device), blocks)


def collect_env_block(docs: list, backend: str, label: str) -> Collapsed | str:
    """A "Deploy it yourself" tab's ``vllm collect-env`` report: the newest of ``docs`` (this build's document
    first, then the recorded ones) built on ``backend`` that captured one, collapsed; or the HTML of one line
    saying that no build of that kind captured it yet, with the command to run."""
    found = [d for d in docs if d.provenance.backend == backend and d.provenance.machine.collect_env is not None]
    if not found:
        ascend = platform_for(backend).ascend
        script = deployer_command(ascend)
        note = _("Environment report: not captured yet, no {label} build of this page has recorded one. On your "
                 "host ({where}), {command} prints it.", label=label, command=script,
                 where=_("in vllm-ascend's container") if ascend else _("where vLLM is installed"))
        return f'<p class="tut-note">{html(note).replace(html(script), f"<code>{html(script)}</code>")}</p>'
    d = max(found, key=lambda d: d.provenance.built_at)
    c, p = d.provenance.machine.collect_env, d.provenance
    return Collapsed(_("Environment report ({command}), as the {label} build of {date} captured it ({device})",
                       command=c.command, label=label, date=p.built_at[:10], device=p.device),
                     [(c.command, c.text)],
                     note=_("What a deployer attaches to a bug report: run the same command on your host and "
                            "compare it with this one."))
