"""Views of where the page was built, the weights, the server, the functional check and the benchmark."""

from __future__ import annotations

from . import plots
from ..engine.bench import SUMMARY_ROWS
from ..record.headline import headline_figures
from ..core.messages import _, sentences
from ..core.tables import Pre, Table, fmt
from ..inputs.weights import kind_label, shown_label
from .base import BaseViews, memory_rows, shown
from ..inputs.layouts import num_parameters
from ..measure.metrics import SPLIT_KINDS



def parting(g) -> str:
    """Where a greedy pair of texts parts, and how that split is judged (near-tie or decisive), in words."""
    if g.first_divergence is None:
        return _("nowhere: the same tokens")
    e = g.error_at_divergence
    kind = _(SPLIT_KINDS[g.split]) if g.split else "?"
    if e is None:
        return _("at token {index}: {kind}", index=g.first_divergence, kind=kind)
    if e.pair_err is not None:
        return _("at token {index}: {kind} (the reference led its token by {margin} nats over the engine's; the engine "
                 "moved that lead by {err} nats)", index=g.first_divergence, kind=kind, margin=fmt(e.pair_margin, 3),
                 err=fmt(e.pair_err, 3))
    return _("at token {index}: {kind} (the reference's top-1/top-2 gap {margin} nats, the engine's largest error "
             "there {err} nats)", index=g.first_divergence, kind=kind, margin=fmt(e.reference_top2_margin, 3),
             err=fmt(e.max_abs_err, 3))


class BuildViews(BaseViews):
    """Where the page was built, the model, the weights, the conditions and the provenance."""

    def environment(self) -> Table:
        """Where this build ran: backend, devices, versions."""
        m = self.prov.machine
        rows = [[_("backend"), m.backend], [_("device"), m.device_label]]
        for d in m.devices:
            mem = f", {d.memory_gib:.0f} GiB" if d.memory_gib else ""
            rows.append([_("device {index}", index=d.index), f"{d.name}{mem}"])
        for label, value in ((_("visible devices"), m.visible_devices), ("SoC", m.soc), (_("driver"), m.driver),
                             ("CANN", m.cann)):
            if value:
                rows.append([label, value])
        rows += [[k, v] for k, v in m.versions.items() if v]
        cpu = (_("{model} ({count} cores, native bf16)", model=m.cpu_model, count=m.cpu_count) if m.cpu_native_bf16
               else _("{model} ({count} cores, no native bf16)", model=m.cpu_model, count=m.cpu_count))
        rows += [["python", m.python], ["CPU", cpu], [_("memory"), f"{m.memory_gib} GiB"]]
        if m.host_threads:
            rows.append([_("CPU threads for the reference and baselines"), m.host_threads])
        return Table([_("item"), _("value")], rows,
                     caption=_("Where this page was built ({built_at})", built_at=self.prov.built_at))

    def conditions(self) -> Table:
        """This build's conditions (profile, dtype, eager, what it changed) beside the card's."""
        c = self.need("conditions")
        p = self.card.benchmark.profiles[c.profile]
        full = self.card.benchmark.profiles["full"]
        rows = [[_("profile"), c.profile, "full"],
                [_("requests"), p.num_prompts, full.num_prompts],
                [_("input tokens"), p.input_len, full.input_len],
                [_("output tokens"), p.output_len, full.output_len],
                [_("request rate (req/s)"), str(p.request_rate), str(full.request_rate)],
                ["dtype", c.dtype, self.card.serve.dtype],
                [_("eager mode"), c.eager, self.card.serve.enforce_eager]]
        notes = [] if c.profile == "full" else [
            _("This build ran the reduced 'quick' profile; the report's conditions are the 'full' column.")]
        if c.dtype_note:
            notes.append(_("dtype {dtype}: {why}.", dtype=c.dtype, why=c.dtype_note))
        return Table([_("condition"), _("this build"), _("report")], rows, caption=_("Benchmark conditions"),
                     note=sentences(notes))

    def weights(self) -> Table:
        """Which weights this build used (real with id and revision, or stand-in with seed)."""
        w = self.prov.weights
        rows = [[_("weights"), shown_label(w)], [_("kind"), kind_label(w.kind)], [_("source"), w.source]]
        rows += [[k, fmt(v) if not isinstance(v, list) else ", ".join(map(str, v))] for k, v in w.config.items()]
        note = ("" if w.kind == "real" else
                _("Stand-in weights: generated text follows a planted next-token map, not language, and task "
                  "accuracy means nothing; speed and engine-vs-reference agreement are still real measurements of "
                  "this network."))
        return Table([_("item"), _("value")], rows, caption=_("Weights used by this build"), note=note)

    def properties(self) -> Table:
        """The model's property table, from the card and its config (inferred fields marked)."""
        cfg = self.card.config
        inferred = set(self.card.stand_in.inferred_fields)

        def val(key):
            return _("{value} (inferred)", value=cfg[key]) if key in inferred else cfg[key]

        kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        nparams = num_parameters(cfg)
        hubs = (("ModelScope", self.card.hub.modelscope), ("Hugging Face", self.card.hub.huggingface))
        rows = [[_("architecture"), self.card.architecture],
                [_("parameters (counted from the config)"), f"{nparams / 1e9:.3f} B"],
                [_("hidden size"), val("hidden_size")],
                [_("attention heads"), f"{cfg['num_attention_heads']} ({kv} KV)"],
                [_("layers"), val("num_hidden_layers")], [_("max position embeddings"), val("max_position_embeddings")],
                [_("vocabulary"), val("vocab_size")], [_("model type"), _("causal language model (decoder only)")],
                [_("weights source"), " / ".join(f"{h}: {r.id}" for h, r in hubs if r)]]
        note = (_("Fields marked inferred are not in the model's published config: {fields}.",
                  fields=", ".join(sorted(inferred))) if inferred else "")
        if self.card.hub.note:  # the card's words, as they are
            note = note + " " + self.card.hub.note.strip() if note else self.card.hub.note.strip()
        return Table([_("property"), _("value")], rows, caption=self.card.name, note=note)

    def serving_checkpoint(self) -> Table:
        """How this build serves the checkpoint (as is, or converted) and why."""
        sc = self.need("serving_checkpoint")
        return Table(["", ""], [[_("route"), sc.route]] + ([[_("why"), sc.why]] if sc.why else []),
                     caption=_("How this build serves the checkpoint"))

    def known_limitations(self) -> Table:
        """The warnings the vLLM server printed in this build."""
        rows = [[w] for w in (self.r.server_warnings or [])]
        return Table([_("warning printed by the vLLM server in this build")], rows or [[_("(none)")]],
                     caption=_("What the {backend} backend reported while serving", backend=self.backend))

    def provenance(self) -> Table:
        """Where, when and with what every number on the page was measured."""
        p = self.prov
        rows = [[_("built at"), p.built_at], ["git commit", p.git_commit], [_("backend"), p.backend],
                [_("device"), p.device], [_("weights"), shown_label(p.weights) if p.weights else "–"],
                [_("profile"), p.profile], [_("engine dtype"), p.engine_dtype], [_("status"), p.status],
                [_("wall time"), f"{p.wall_time_s:.0f} s"],
                [_("versions"), ", ".join(f"{k} {v}" for k, v in p.machine.versions.items() if v)]]
        costs = self.r.costs
        if costs:
            rows.append([_("time per step"), "; ".join(f"{c.step.shown()}: {c.seconds:.0f} s" for c in costs)])
        return Table(["", ""], rows, caption=_("Provenance of every number on this page"),
                     note=_("The whole document: {file} (schema {schema}).", file=f"{self.doc.model}-results.json",
                            schema=self.doc.schema_))


class ServingViews(BaseViews):
    """The offline example, the functional check and the benchmark (``show.serving``)."""

    def offline_output(self) -> Pre:
        """What the offline script printed, and how long it took."""
        o = self.need("offline_example")
        out = f"{o.prompt!r} -> {o.text!r}\n" + _("(whole script, engine start included: {seconds:.0f} s)",
                                                   seconds=o.wall_s)
        return Pre("\n".join([out, *(_("(this build: {change})", change=shown(c)) for c in o.build_changes)]))

    def functional(self) -> Table:
        """The functional request and the engine's reply."""
        f = self.need("functional")
        usage = _("{prompt} prompt + {completion} completion tokens", prompt=f.prompt_tokens,
                  completion=f.completion_tokens)
        if f.endpoint == "chat":
            rows = [[_("user"), f.prompt], [_("assistant (this build)"), f.text],
                    [_("finish reason"), f.finish_reason], [_("usage"), usage]]
            reported = self.reported("chat").get("reply")
            if reported:
                rows.append([_("assistant (reported, {hardware})", hardware=self.card.reported.hardware), reported])
            caption = _("Chat request through the OpenAI client")
        else:
            rows = [[_("prompt"), f.prompt], [_("completion"), f.text], [_("finish reason"), f.finish_reason],
                    [_("usage"), usage]]
            caption = _("Functional check through the OpenAI client")
        note = "" if self.real else _("Stand-in weights: the text follows the planted next-token map by design.")
        g = f.greedy
        if g is not None:
            rows += [[_("greedy, engine ({dtype})", dtype=f.greedy_engine_dtype or self.dtype), g.engine_text],
                     [_("greedy, fp32 CPU reference"), g.reference_text], [_("where they part"), parting(g)]]
            note = sentences([note, _("The greedy rows send the same request with temperature 0 and up to {n} new "
                                      "tokens to the engine and to the fp32 reference, fed the same token ids.",
                                      n=f.greedy_tokens)])
        return Table(["", ""], rows, caption=caption, note=note)

    def bench_table(self) -> Table:
        """The benchmark's figures (headline figures with median, spread and sample), beside the report's."""
        b = self.need("benchmark")
        reported = self.reported("bench")
        cols = [_("metric"), _("this build"), _("unit")] + (
            [_("reported ({hardware})", hardware=self.card.reported.hardware)] if reported else [])
        heads = headline_figures(self.doc)
        rows = []
        for label, key, unit in SUMMARY_ROWS:
            if key in heads:  # a headline figure: the one definition every page, matrix and gate shows
                rows.append([_("{label} (median over {over})", label=_(label), over=heads[key].over),
                             heads[key].text(), unit]
                            + ([reported.get(key)] if reported else []))
            elif key in b.summary:
                rows.append([_(label), b.summary[key], unit] + ([reported.get(key)] if reported else []))
        rows += [r + (["–"] if reported else []) for r in memory_rows(self.r.memory, self.backend)]
        c = b.conditions
        notes = [_("{requests} requests, {input_len} in / {output_len} out, request rate {rate}, {runs} runs of vllm "
                   "bench serve (each with prompts of its own). Throughput, median TTFT and median TPOT are the "
                   "headline figures (median, interquartile range, sample); every other row is the median of the "
                   "runs' own values.", requests=c.num_prompts, input_len=c.input_len, output_len=c.output_len,
                   rate=c.request_rate, runs=b.repeats)]
        if self.r.memory is not None:
            notes.append(_("Memory: the server's processes sampled every half second while it ran (each one's "
                           "proportional share, so memory they share counts once), its device memory as the "
                           "device's own tool lists it, the KV cache as vLLM's log reports it."))
        if reported:
            notes.append(self.cite + self.method_note("bench"))
            if self.prov.profile != "full":
                notes.append(_("This build ran the quick profile, so its figures are not comparable with the "
                               "report's."))
        return Table(cols, rows, caption=_("vllm bench serve, {profile} profile, on {device}",
                                           profile=self.prov.profile, device=self.prov.device),
                     note=sentences(notes))

    def thumbnail(self):
        """A small picture of the benchmark for the landing page's card (the per-request TPOT distribution)."""
        if self.r.benchmark is None and self.r.concurrency_sweep:
            return plots.thumbnail(sweep=self.r.concurrency_sweep)  # a page measured by sweeps alone
        return plots.thumbnail(self.need("benchmark"))

    def bench_plot(self):
        """Per-request TTFT and TPOT of the benchmark, as distributions."""
        b = self.need("benchmark")
        c = b.conditions
        return plots.latency_distributions(b, _("{model} on {backend}: per-request latency ({requests} requests, "
                                                "{input_len} in / {output_len} out)", model=self.card.name,
                                                backend=self.backend, requests=c.num_prompts, input_len=c.input_len,
                                                output_len=c.output_len))
