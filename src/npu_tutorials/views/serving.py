"""Views of where the page was built, the weights, the server, the functional check and the benchmark."""

from __future__ import annotations

from math import prod

from . import plots
from ..engine.bench import SUMMARY_ROWS
from ..record.headline import headline_figures
from ..core.tables import Table, fmt
from .base import BaseViews


class BuildViews(BaseViews):
    """Where the page was built, the model, the weights, the conditions and the provenance."""

    def environment(self) -> Table:
        """Where this build ran: backend, devices, versions."""
        m = self.prov.machine
        rows = [["backend", m.backend], ["device", m.device_label]]
        for d in m.devices:
            mem = f", {d.memory_gib:.0f} GiB" if d.memory_gib else ""
            rows.append([f"device {d.index}", f"{d.name}{mem}"])
        for label, value in (("visible devices", m.visible_devices), ("SoC", m.soc), ("driver", m.driver),
                             ("CANN", m.cann)):
            if value:
                rows.append([label, value])
        rows += [[k, v] for k, v in m.versions.items() if v]
        rows += [["python", m.python], ["CPU", f"{m.cpu_model} ({m.cpu_count} cores, "
                                               f"{'native' if m.cpu_native_bf16 else 'no native'} bf16)"],
                 ["memory", f"{m.memory_gib} GiB"]]
        if m.host_threads:
            rows.append(["CPU threads for the reference and baselines", m.host_threads])
        return Table(["item", "value"], rows, caption=f"Where this page was built ({self.prov.built_at})")

    def conditions(self) -> Table:
        """This build's conditions (profile, dtype, eager, what it changed) beside the card's."""
        c = self.need("conditions")
        p = self.card.benchmark.profiles[c.profile]
        full = self.card.benchmark.profiles["full"]
        rows = [["profile", c.profile, "full"],
                ["requests", p.num_prompts, full.num_prompts],
                ["input tokens", p.input_len, full.input_len],
                ["output tokens", p.output_len, full.output_len],
                ["request rate (req/s)", str(p.request_rate), str(full.request_rate)],
                ["dtype", c.dtype, self.card.serve.dtype],
                ["eager mode", c.eager, self.card.serve.enforce_eager]]
        notes = [] if c.profile == "full" else [
            "This build ran the reduced 'quick' profile; the report's conditions are the 'full' column."]
        if c.dtype_note:
            notes.append(f"dtype {c.dtype}: {c.dtype_note}.")
        return Table(["condition", "this build", "report"], rows, caption="Benchmark conditions", note=" ".join(notes))

    def weights(self) -> Table:
        """Which weights this build used (real with id and revision, or stand-in with seed)."""
        w = self.prov.weights
        rows = [["weights", w.label], ["kind", w.kind], ["source", w.source]]
        rows += [[k, fmt(v) if not isinstance(v, list) else ", ".join(map(str, v))] for k, v in w.config.items()]
        note = ("" if w.kind == "real" else
                "Stand-in weights: generated text follows a planted next-token map, not language, and task accuracy "
                "means nothing; speed and engine-vs-reference agreement are still real measurements of this network.")
        return Table(["item", "value"], rows, caption="Weights used by this build", note=note)

    def properties(self) -> Table:
        """The model's property table, from the card and its config (inferred fields marked)."""
        from ..inputs.layouts import for_config

        cfg = self.card.config
        inferred = set(self.card.stand_in.inferred_fields)

        def val(key):
            return f"{cfg[key]} (inferred)" if key in inferred else cfg[key]

        kv = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        nparams = sum(prod(shape) for _, shape, _ in for_config(cfg).parameters(cfg))
        hubs = (("ModelScope", self.card.hub.modelscope), ("Hugging Face", self.card.hub.huggingface))
        rows = [["architecture", self.card.architecture],
                ["parameters (counted from the config)", f"{nparams / 1e9:.3f} B"],
                ["hidden size", val("hidden_size")], ["attention heads", f"{cfg['num_attention_heads']} ({kv} KV)"],
                ["layers", val("num_hidden_layers")], ["max position embeddings", val("max_position_embeddings")],
                ["vocabulary", val("vocab_size")], ["model type", "causal language model (decoder only)"],
                ["weights source", " / ".join(f"{h}: {r.id}" for h, r in hubs if r)]]
        note = (f"Fields marked inferred are not in the model's published config: {', '.join(sorted(inferred))}."
                if inferred else "")
        if self.card.hub.note:
            note = (note + " " + self.card.hub.note.strip()).strip()
        return Table(["property", "value"], rows, caption=self.card.name, note=note)

    def serving_checkpoint(self) -> Table:
        """How this build serves the checkpoint (as is, or converted) and why."""
        sc = self.need("serving_checkpoint")
        return Table(["", ""], [["route", sc.route]] + ([["why", sc.why]] if sc.why else []),
                     caption="How this build serves the checkpoint")

    def known_limitations(self) -> Table:
        """The warnings the vLLM server printed in this build."""
        rows = [[w] for w in (self.r.server_warnings or [])]
        return Table(["warning printed by the vLLM server in this build"], rows or [["(none)"]],
                     caption=f"What the {self.backend} backend reported while serving")

    def provenance(self) -> Table:
        """Where, when and with what every number on the page was measured."""
        p = self.prov
        rows = [["built at", p.built_at], ["git commit", p.git_commit], ["backend", p.backend], ["device", p.device],
                ["weights", p.weights.label if p.weights else "–"], ["profile", p.profile],
                ["engine dtype", p.engine_dtype], ["status", p.status], ["wall time", f"{p.wall_time_s:.0f} s"],
                ["versions", ", ".join(f"{k} {v}" for k, v in p.machine.versions.items() if v)]]
        costs = self.r.costs
        if costs:
            rows.append(["time per step", "; ".join(f"{c.step}: {c.seconds:.0f} s" for c in costs)])
        return Table(["", ""], rows, caption="Provenance of every number on this page",
                     note=f"The whole document: {self.doc.model}-results.json (schema {self.doc.schema_}).")


class ServingViews(BaseViews):
    """The offline example, the functional check and the benchmark (``show.serving``)."""

    def offline_output(self) -> str:
        """What the offline script printed, and how long it took."""
        o = self.need("offline_example")
        return f"{o.prompt!r} -> {o.text!r}\n(whole script, engine start included: {o.wall_s:.0f} s)"

    def functional(self) -> Table:
        """The functional request and the engine's reply."""
        f = self.need("functional")
        usage = f"{f.prompt_tokens} prompt + {f.completion_tokens} completion tokens"
        if f.endpoint == "chat":
            rows = [["user", f.prompt], ["assistant (this build)", f.text], ["finish reason", f.finish_reason],
                    ["usage", usage]]
            reported = self.reported("chat").get("reply")
            if reported:
                rows.append([f"assistant (reported, {self.card.reported.hardware})", reported])
            caption = "Chat request through the OpenAI client"
        else:
            rows = [["prompt", f.prompt], ["completion", f.text], ["finish reason", f.finish_reason], ["usage", usage]]
            caption = "Functional check through the OpenAI client"
        note = "" if self.real else "Stand-in weights: the text follows the planted next-token map by design."
        return Table(["", ""], rows, caption=caption, note=note)

    def bench_table(self) -> Table:
        """The benchmark's figures (headline figures with median, spread and sample), beside the report's."""
        b = self.need("benchmark")
        reported = self.reported("bench")
        cols = ["metric", "this build", "unit"] + ([f"reported ({self.card.reported.hardware})"] if reported else [])
        heads = headline_figures(self.doc)
        rows = []
        for label, key, unit in SUMMARY_ROWS:
            if key in heads:  # a headline figure: the one definition every page, matrix and gate shows
                rows.append([f"{label} (median over {heads[key].over})", heads[key].text(), unit]
                            + ([reported.get(key)] if reported else []))
            elif key in b.summary:
                rows.append([label, b.summary[key], unit] + ([reported.get(key)] if reported else []))
        c = b.conditions
        notes = [f"{c.num_prompts} requests, {c.input_len} in / {c.output_len} out, request rate {c.request_rate}, "
                 f"{b.repeats} runs of vllm bench serve (each with prompts of its own). Throughput, median TTFT and "
                 "median TPOT are the headline figures (median, interquartile range, sample); every other row is "
                 "the median of the runs' own values."]
        if reported:
            notes.append(self.cite + self.method_note("bench"))
            if self.prov.profile != "full":
                notes.append("This build ran the quick profile, so its figures are not comparable with the report's.")
        return Table(cols, rows, caption=f"vllm bench serve, {self.prov.profile} profile, on {self.prov.device}",
                     note=" ".join(notes))

    def bench_plot(self):
        """Per-request TTFT and TPOT of the benchmark, as distributions."""
        b = self.need("benchmark")
        c = b.conditions
        return plots.latency_distributions(b, f"{self.card.name} on {self.backend}: per-request latency "
                                              f"({c.num_prompts} requests, {c.input_len} in / {c.output_len} out)")
