"""The "Deploy it yourself" section of a tutorial page, as reStructuredText, from :mod:`.deploy`'s steps."""

from __future__ import annotations

from ..engine import commands as C
from ..engine import devices
from ..inputs.cards import Card
from ..engine.deploy import (BACKENDS, DEFAULT_PORT, LABELS, Step, container_argv, reader_place, serve_argv, steps,
                             targets)
from ..core.errors import TutorialError
from ..engine.multi_card import multi_card
from ..engine.platform import platform_for
from ..inputs.knobs import VLLM_ASCEND_QUANTIZATION, ascend_contract_problems, flag_problems, pinned_label
from ..measure.tuning_plan import (EAGER, GRAPH, config_label, image_environ, in_baseline, measured_best,
                                   select_knobs)
from ..record.results import recorded
from .render import collect_env_marker


# -- reStructuredText --------------------------------------------------------------------------------

def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def _code(text: str, lang: str = "bash", caption: str | None = None) -> str:
    opts = f"   :caption: {caption}\n" if caption else ""
    return f".. code-block:: {lang}\n{opts}\n{_indent(text, 3)}\n"


def _step_rst(i: int, step: Step) -> str:
    parts = [f"**{i}. {step.title}.**" + (f" {step.note}" if step.note else "") + "\n"]
    if step.lang == "python":
        parts.append(_code(step.text, "python", step.file))
        parts.append(_code(step.run))
    else:
        parts.append(_code(step.text))
    return "\n".join(parts)


def _notes_rst(card: Card) -> str:
    notes = []
    if card.deploy.base_model:
        cv = card.deploy.chat_variant
        where = " / ".join(f"{h} ``{r.id}``" for h, r in (("ModelScope", cv.modelscope),
                                                           ("Hugging Face", cv.huggingface)) if r)
        notes.append(f"{card.name} is a base model (pretrained, not instruction-tuned): the requests below are "
                     f"plain completions. For chat, serve the Instruct variant ({where}) with the same commands "
                     "and send ``/v1/chat/completions`` requests.")
    notes += card.deploy.notes
    if not notes:
        return ""
    return ".. note::\n\n" + "\n\n".join(_indent(f"- {n}", 3) for n in notes) + "\n"


def _multi_rst(card: Card, backend: str) -> str:
    n = card.deploy.cards
    plat = platform_for(backend)
    container = " (replace the container of step 1 by one with all of them)" if plat.containerized else ""
    parts = [f"**Several cards.** Three ways to use {n} cards of one host{container}:\n"]
    if plat.containerized:
        parts.append(_code(C.format_docker(container_argv(card, devices=range(n), multi_card=True))))
        a3 = devices.FAMILY["a3"]
        parts.append(f"Each ``--device /dev/davinciN`` is one chip: ``ASCEND_RT_VISIBLE_DEVICES`` and the "
                     f"tensor-parallel size count chips, not cards, and an {a3.label} card holds "
                     f"{a3.chips_per_card} of them (``npu-smi info`` lists Chip 0 and 1 per NPU; "
                     f"``/dev/davinci0`` to ``/dev/davinci{a3.chips - 1}`` on an {a3.label} host). As "
                     "vllm-ascend's multi-card docker line does, the container shares the host's network "
                     "(``--net=host``: HCCL between the chips, and the ports below need no ``-p``; the servers "
                     "listen on the host's 127.0.0.1, with the key) and mounts "
                     "the driver's ``hccn_tool`` (the chips' network settings).\n")
    for r in multi_card(card, backend):
        parts.append(f"*{r.title}*: {r.why}\n")
        parts.append(_code(r.text))
    return "\n".join(parts)


def tuned_npu(card: Card) -> tuple[list[str], dict[str, str], object, object] | None:
    """The copy-paste serve command with the best knobs the newest NPU build of ``card`` measured:
    ``(argv, env, document, row)``, or None where no NPU build recorded a tuning section."""
    found = measured_best(recorded(card.key)) if card.tuning else None
    if found is None:
        return None
    doc, row = found
    return C.deploy_argv(card, "npu", extra=row.flags), {**platform_for("npu").serve_env(card), **row.env}, doc, row


def _tuned_rst(card: Card, serve_step: int) -> str:
    """The NPU tab's measured tuning: the best combination an NPU build recorded, marked with where and when
    it was measured, or a line saying that nothing is measured yet."""
    planned = select_knobs(card, "npu", "full", environ=image_environ("aarch64"), machine="aarch64",
                           exists=lambda path: True, vllm_ascend="")
    if not (planned.run or planned.skipped):
        return ""
    tuned = tuned_npu(card)
    if tuned is None:
        base = [k for k, why in planned.skipped.items() if in_baseline(why)]
        had = (f" Already in vllm-ascend's baseline (its image's settings or its defaults), so not measured: "
               f"{', '.join(base)}." if base else "")
        apart = "".join(f" Not on this model: {k} ({why})." for k, why in planned.skipped.items() if k not in base)
        return ("**Tuned (measured).** Nothing is measured yet: no NPU build of this page has recorded its tuning "
                f"section, so step {serve_step} is vllm-ascend's default graph mode. On an NPU, the page's tuning "
                "section measures each of these knobs alone, then the best combination: "
                f"{', '.join(k.name for k in planned.run)}.{had}{apart}\n")
    argv, env, doc, row = tuned
    when = _when(doc)
    if not row.knobs:
        return (f"**Tuned (measured).** None of the knobs this page measures helped beyond the spread {when}: "
                f"step {serve_step}, graph mode with vllm-ascend's defaults, was the best measured.\n")
    return (f"**Tuned (measured).** The best combination this page measured, {' + '.join(row.knobs)}, {when} "
            f"('{row.name}' in its tuning table); to use it, run this in place of step {serve_step}:\n\n"
            + _code(C.format_command(argv, env, exports=True)))


def _when(doc) -> str:
    """Where and when a recorded document was measured, as the NPU tab says it."""
    p = doc.provenance
    return (f"on {p.device} on {p.built_at[:10]} ({p.profile} profile, vllm-ascend "
            f"{p.machine.versions.get('vllm_ascend') or 'version not recorded'})")


def _list_table(rows: list[list[str]]) -> str:
    """A list-table with a header row."""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in rows:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {cell}" for cell in row[1:]]
    return "\n".join(lines) + "\n"


NOT_MEASURED = "not measured yet"


def scenarios(card: Card) -> tuple[list[tuple[str, str, str | None, str | None]], object]:
    """The NPU tab's scenarios, each ``(scenario, what decides it, configuration, figure)`` from the newest NPU
    build's tuning section (:func:`~npu_tutorials.measure.tuning_plan.measured_best`'s document), and that
    document (None: no NPU build recorded one; every configuration and figure is None then).  Low latency: the
    row of the lowest median TPOT at concurrency 1; high throughput: the highest median output throughput at
    the highest concurrency; long context: the page's own server (the input-length sweep runs no other
    configuration) at the longest input length of the card's sweep."""
    found = measured_best(recorded(card.key)) if card.tuning else None
    doc = found[0] if found else None
    sweep = (card.sweeps or {}).get(doc.provenance.profile if doc else "full")
    t = doc.results.tuning if doc else None
    out = []
    low = min(t.rows, key=lambda r: r.tpot_ms.median) if t else None
    out.append(("Low latency", "lowest median TPOT at concurrency 1 (one request at a time)",
                low and config_label(low.name), low and f"TPOT {low.tpot_ms.text(1, 'ms')}"))
    fast = [r for r in t.rows if r.throughput_high is not None] if t else []
    high = max(fast, key=lambda r: r.throughput_high.median) if fast else None
    at = (f"concurrency {high.high_concurrency}" if high and high.high_concurrency else
          f"concurrency {max(sweep.concurrency)}" if sweep else "the highest concurrency")
    out.append(("High throughput", f"highest median output throughput at {at}",
                high and config_label(high.name), high and f"{high.throughput_high.text(1, 'tok/s')}"))
    if sweep is None:
        out.append(("Long context", "this page's sweeps do not measure input length", None, None))
        return out, doc
    longest = max(sweep.input_lens)
    point = next((p for p in (doc.results.input_length_sweep or []) if p.input_len == longest), None) if doc else None
    eager = doc.results.conditions.eager if doc and doc.results.conditions else card.serve.enforce_eager
    out.append(("Long context", f"{longest} input tokens, the longest of this page's input-length sweep (its "
                "server only)", point and config_label(EAGER if eager else GRAPH),
                point and f"TPOT {point.tpot_ms.text(1, 'ms')}, prefill {point.prefill_ms.text(1, 'ms')}"))
    return out, doc


def _scenarios_rst(card: Card) -> str:
    """The NPU tab's scenario table: the measured best per scenario, or "not measured yet"."""
    rows, doc = scenarios(card)
    table = _list_table([["Scenario", "Measured best by", "Configuration", "Figure"]]
                        + [[name, by, cfg or NOT_MEASURED, fig or "–"] for name, by, cfg, fig in rows])
    if doc is not None:
        head = (f"**Scenarios (measured).** The configuration of the page's tuning table that measured best per "
                f"scenario, {_when(doc)}:\n")
    elif card.tuning is None:
        head = ("**Scenarios (measured).** Not measured yet: this model's card has no tuning section, so no build "
                "compares configurations per scenario:\n")
    else:
        head = ("**Scenarios (measured).** Not measured yet: no NPU build of this page has recorded its tuning "
                "section:\n")
    return head + "\n" + table


def w8a8_argv(card: Card) -> list[str] | None:
    """The NPU serve command of the W8A8 checkpoint the card names (``--quantization ascend``, through
    :func:`~npu_tutorials.engine.commands.deploy_argv`), checked against vllm-ascend's contract; None where the
    card names none."""
    if card.deploy.w8a8 is None:
        return None
    if C.needs_conversion(card, "npu"):
        raise TutorialError(f"{card.key}: deploy.w8a8: the commands serve {card.architecture} converted to Qwen2, "
                            "and the conversion takes a full-precision checkpoint, not a quantized one")
    quantized = ("--quantization", VLLM_ASCEND_QUANTIZATION)
    argv = C.deploy_argv(card, "npu", model_dir=f"{C.local_dir(card)}-W8A8", extra=quantized)
    problems = (flag_problems([*platform_for("npu").serve_flags(card, eager=False), *quantized])  # the pinned extract
                + ascend_contract_problems(argv, platform_for("npu").serve_env(card)))
    if problems:
        raise TutorialError(f"{card.key}: deploy.w8a8: the serve command breaks vllm-ascend's contract: {problems[0]}")
    return argv


def _quantized_rst(card: Card, serve_step: int) -> str:
    """Quantized serving: the W8A8 checkpoint the card names, or one sentence saying it names none."""
    p = devices.FAMILY["310p"]
    argv = w8a8_argv(card)
    if argv is None:
        return (f"**Quantized (W8A8).** This card names no published W8A8 checkpoint of {card.name}, so there is "
                f"none to serve with vllm-ascend's ``--quantization {VLLM_ASCEND_QUANTIZATION}``: the commands "
                f"above serve {card.serve.dtype} ({p.dtype} on 310P).\n")
    w = card.deploy.w8a8
    where = " / ".join(f"{h} ``{r.id}`` (revision ``{r.revision}``)"
                       for h, r in (("ModelScope", w.modelscope), ("Hugging Face", w.huggingface)) if r)
    model_dir = f"{C.local_dir(card)}-W8A8"
    download = next(iter(C.download_commands(card.model_copy(update={"hub": w}), model_dir).values()))
    env = platform_for("npu").serve_env(card)
    return (f"**Quantized (W8A8).** The published W8A8 checkpoint {where}: download it into ``{model_dir}``, then "
            f"serve it with ``--quantization {VLLM_ASCEND_QUANTIZATION}`` in place of step {serve_step}. Not measured "
            "by this site: no build of this page served it, so no figure here is of it, and the command is only "
            f"checked against the flags of {pinned_label()} and what vllm-ascend honours:\n\n"
            + _code(download) + "\n" + _code(C.format_command(argv, env, exports=True)))


def _family_rst(card: Card, family: str, serve_step: int) -> str:
    """The serve command on an NPU of ``family`` (310P), as this build serves there: its dtype and vllm-ascend's
    own flags for it (:meth:`~npu_tutorials.engine.platform.Platform.family_flags`)."""
    p = devices.FAMILY[family]
    argv = serve_argv(card, "npu", reader_place(card), family=family)
    return (f"On {p.label} (310P), use the ``{C.ascend_image(p.key)}`` image in step 1 (``dtype=\"{p.dtype}\"`` in "
            f"the offline script) and serve with this in place of step {serve_step}: ``--dtype {p.dtype}`` (it has no "
            f"bfloat16), and what vllm-ascend's own {p.label} recipes add, a full graph for decode batches only "
            "(``FULL_DECODE_ONLY``) and no prefix caching:\n\n" + _code(C.format_command(argv)))


def _faq_rst(card: Card) -> str:
    """The card's FAQ: problems a deployer of this model meets."""
    if not card.deploy.faq:
        return ""
    return "**FAQ.**\n\n" + "\n\n".join(f"- **{e.q}** {e.a}" for e in card.deploy.faq) + "\n"


def _tab_rst(card: Card, backend: str) -> str:
    parts = [f"**Versions.** These commands target {targets(backend)}\n",
             f".. raw:: html\n\n   {collect_env_marker(backend)}\n"]
    plat = platform_for(backend)
    if plat.ascend and C.needs_conversion(card, backend):
        note = C.NATIVE_NPU_NOTE.format(arch=card.architecture, vllm=C.VLLM_ASCEND_STACK['vllm'])
        parts.append(f"{note[0].upper()}{note[1:]}; the commands below use the converted checkpoint, which needs "
                     "no remote code.\n")
    tab_steps = steps(card, backend)
    for i, step in enumerate(tab_steps, 1):
        parts.append(_step_rst(i, step))
    if plat.ascend:
        serve_step = 1 + [s.key for s in tab_steps].index("serve")
        tuned = _tuned_rst(card, serve_step)
        if tuned:
            parts.append(tuned)
        parts.append(_scenarios_rst(card))
        parts.append(_quantized_rst(card, serve_step))
        parts.append(_family_rst(card, "310p", serve_step))
        faq = _faq_rst(card)
        if faq:
            parts.append(faq)
    if not plat.accelerator:
        parts.append("On a CPU without AVX512-BF16 or AMX (``lscpu | grep -o 'avx512_bf16\\|amx_bf16'`` prints "
                     "nothing), bfloat16 is emulated and several times slower than float32: serve with "
                     "``--dtype float32`` there. Stop the server with Ctrl-C.\n")
    else:
        parts.append(_multi_rst(card, backend))
    return "\n".join(parts)


def _download_rst(card: Card) -> str:
    tabs = [f".. tab-item:: {hub}\n   :sync: {hub.lower().replace(' ', '-')}\n\n{_indent(_code(cmd), 3)}\n"
            for hub, cmd in C.download_commands(card).items()]
    return (f"**Download the weights** into ``{C.local_dir(card)}`` (one of):\n\n.. tab-set::\n   :sync-group: hub\n\n"
            + _indent("\n".join(tabs), 3) + "\n")


def _conditions_rst(card: Card) -> str:
    report = ("The report ran eager mode (``--enforce-eager``, no graph compilation), and so do this page's "
              "measurements" if card.serve.enforce_eager else
              "The report's serve flags (the model card) have no ``--enforce-eager``; this site's CPU builds "
              "run eager all the same, to keep the build short")
    return (
        f"**Graph or eager.** The commands above run graph mode, the production default. {report} (see "
        "*this build ran* on the page). Graph mode (ACL graphs on vllm-ascend, CUDA graphs on GPUs, "
        "torch.compile on the CPU) decodes faster once started. Add ``--enforce-eager`` "
        "(``enforce_eager=True`` in ``vllm.LLM``) for the fastest start and the least memory, to reproduce "
        "the report's conditions, or to debug.\n\n"
        "**Secure by default.** Every server above requires the key the environment step generated, and "
        "listens on this host's loopback only (``--host 127.0.0.1``; vllm-ascend's container publishes "
        "``-p 127.0.0.1:8000:8000``), because vLLM serves anyone who reaches its port when it has no "
        "``--api-key``. For a load balancer on another host, publish the port on the interface it reaches "
        "(``-p 8000:8000``, or ``--host 0.0.0.0`` outside a container), keep the key, and let the firewall "
        "admit only the balancer. (This page's own build runs its servers on 127.0.0.1 without a key: nothing "
        "else can reach them, and they stop with the build.)\n")


def deploy_rst(card: Card) -> str:
    """The page's "Deploy it yourself" section: notes, download, then NPU / GPU / CPU tabs."""
    tabs = [f".. tab-item:: {LABELS[b]}\n   :sync: {b}\n\n{_indent(_tab_rst(card, b), 3)}\n" for b in BACKENDS]
    intro = (f"Every block below works when pasted in order on a host of its tab's kind: they all use the folder "
             f"``{C.local_dir(card)}``, the served model name ``{card.serve.served_model_name}`` and port "
             f"{DEFAULT_PORT}. The test suite runs the CPU tab, step by step, with only the host's paths "
             "and the port changed, on a tiny stand-in of the model in place of the download "
             "(``tests/test_deploy.py`` with ``npu_tutorials.engine.deploy.cpu_set``).\n")
    notes = _notes_rst(card)
    return "\n".join(x for x in (intro, notes, _download_rst(card),
                                 "**Then, on your host:**\n\n.. tab-set::\n\n" + _indent("\n".join(tabs), 3) + "\n",
                                 _conditions_rst(card)) if x)
