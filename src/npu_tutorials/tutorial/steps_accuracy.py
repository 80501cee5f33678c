"""Steps that compare the engine with the fp32 CPU reference, and the task-level checks."""

from __future__ import annotations

import json

import numpy as np

from ..record import steps
from ..record.schema_base import Message
from ..checks.e2e import e2e_config
from ..checks.publish import publish_target
from ..measure import accuracy, consistency, metrics, tasks
from ..core.errors import TutorialError
from ..record.schema import (Check, ForwardConsistency, Functional, Histogram, LogitsAgreement, LogitsRow, ResultsDoc,
                             TaskRow, TaskScore, TextAgreement, TextRow)
from .state import TutorialState
from .steps_serving import ServingSteps


def _checks(verdict) -> list[Check]:
    return [Check(metric=m, measured=v, threshold=t, passed=bool(ok)) for m, v, t, ok in verdict.checks]


def _text_rows(rows, rule, chat: bool | None = None) -> list[TextRow]:
    out = []
    for r, kind in zip(rows, consistency.split_kinds(rows, rule)):
        d = r.to_dict()
        out.append(TextRow(prompt=d["prompt"], engine_text=d["engine_text"], reference_text=d["reference_text"],
                           engine_ids=d["engine_ids"], reference_ids=d["reference_ids"], exact=d["exact"],
                           first_divergence=d["first_divergence"], char_similarity=d["similarity"],
                           match_rate=d["match_rate"], margin_at_divergence=d.get("margin_at_divergence"),
                           error_at_divergence=d.get("error_at_divergence"),
                           first_token_error=d.get("error_first_token"), split=kind, chat=chat))
    return out


# The functional request's greedy comparison: at most this many tokens (a reply's first sentence or two)
FUNCTIONAL_GREEDY_TOKENS = 48


def _subsample(x: np.ndarray, n: int = 4000) -> list[float]:
    step = max(1, x.size // n)
    return [round(float(v), 5) for v in x[::step]]


class AccuracySteps:
    """The engine against the fp32 CPU reference (logits, every position, greedy text), and the task scores.
    Every check runs on the server in the accuracy dtype (:meth:`~.servers.ServerPool.ensure`)."""

    def __init__(self, state: TutorialState, serving: ServingSteps):
        self.s, self.serving = state, serving
        self._gsm_cache: tasks.GSMSet | None = None

    def _gsm_set(self) -> tasks.GSMSet:
        """The GSM problem set of this profile, generated once and reused by every step."""
        if self._gsm_cache is None:
            g = self.s.card.accuracy.gsm
            strict = self.s.real or bool(publish_target())  # real weights or publishing: GSM8K itself, or fail
            self._gsm_cache = tasks.gsm_set(g.profiles[self.s.profile_name].num_problems, g.seed,
                                            fallback=None if strict else "")
        return self._gsm_cache

    def logits_agreement(self) -> LogitsAgreement:
        """The card's prompts: the engine's last-position logits over the whole vocabulary against the fp32
        reference (``accuracy.logits``), with the card's verdict."""
        check = self.s.card.accuracy.logits
        if check is None:
            raise TutorialError(f"cards/{self.s.card.key}.yaml has no accuracy.logits section")
        with self.s.step(Message.of(steps.LOGITS, n=len(check.prompts))):
            rep = accuracy.logits_agreement(self.s.servers.ensure("accuracy"), self.s.model,
                                            self.s.serve_path, check, self.s.card.vocab_size, self.s.real,
                                            self.s.card.accuracy.splits)
        counts, edges = np.histogram(rep.errors, bins=120)
        eng, ref = rep.sample
        verdict = rep.verdict()
        out = LogitsAgreement(
            rows=[LogitsRow(**{k: v for k, v in r.items() if k in LogitsRow.model_fields}) for r in rep.rows],
            summary=rep.summary, thresholds=rep.thresholds, checks=_checks(verdict), passed=verdict.passed,
            compared_form=metrics.COMPARED_AS[rep.compared_as], engine_dtype=self.s.accuracy_dtype,
            error_histogram=Histogram(edges=edges.tolist(), counts=counts.tolist()),
            scatter_reference=_subsample(ref), scatter_engine=_subsample(eng))
        return out

    def forward_consistency(self, chat: bool = False) -> ForwardConsistency:
        """Every position of the card's text, engine against the fp32 reference, with the card's verdict; ``chat``:
        every position of the reference's answer to the card's chat request (``accuracy.chat_consistency``)."""
        a = self.s.card.accuracy
        check = a.chat_consistency if chat else a.consistency
        if check is None:
            raise TutorialError(f"cards/{self.s.card.key}.yaml has no accuracy.{'chat_' if chat else ''}consistency "
                                "section")
        what = Message.of(steps.CHAT_CONSISTENCY, n=check.positions) if chat \
            else Message.of(steps.CONSISTENCY)
        with self.s.step(what):
            rep = consistency.forward_consistency(self.s.servers.ensure("accuracy"), self.s.model,
                                                  self.s.serve_path, check, self.s.card.vocab_size, self.s.real,
                                                  self.s.card.accuracy.splits)
        d, verdict = rep.to_dict(), rep.verdict()
        out = ForwardConsistency(num_tokens=d["num_tokens"], positions=d["positions"], top1_pct=d["top1_pct"],
                                 top1_decisive_pct=d.get("top1_decisive_pct"),
                                 decisive_positions=d.get("decisive_positions"), ties=d.get("ties"),
                                 flips=d.get("flips"),
                                 flips_at_decisive=d.get("flips_at_decisive"),
                                 splits=metrics.split_counts(d["flip_kinds"]), per_position=d["per_position"],
                                 ppl_engine=d["ppl_engine"], ppl_reference=d["ppl_reference"],
                                 ppl_rel_diff_pct=d["ppl_rel_diff_pct"], cosine=d["cosine"], kl_nats=d["kl_nats"],
                                 thresholds=d["thresholds"], checks=_checks(verdict), passed=verdict.passed,
                                 compared_form=metrics.COMPARED_AS[d["compared_as"]],
                                 engine_dtype=self.s.accuracy_dtype)
        return out

    def _stop_ids(self) -> list[int] | None:
        p = self.s.serve_path or self.s.need_weights().path
        gen = json.loads((p / "generation_config.json").read_text()) if (p / "generation_config.json").is_file() else {}
        eos = gen.get("eos_token_id")
        return eos if isinstance(eos, list) else ([eos] if eos is not None else None)

    def functional_vs_reference(self, f: Functional | None) -> Functional:
        """The functional request ``f`` once more, greedy (up to :data:`FUNCTIONAL_GREEDY_TOKENS` tokens), on the
        served engine and on the fp32 reference fed the same token ids, with the engine's error where they part:
        the page sets the two answers side by side and says whether a split is a near-tie or decisive.  Returns
        ``f`` with the greedy answers."""
        fn = self.s.card.functional
        if f is None:
            raise TutorialError("record_completion() first: this compares its request")
        srv, chat = self.s.servers.ensure("performance"), fn.endpoint == "chat"
        n = min(fn.max_tokens, FUNCTIONAL_GREEDY_TOKENS)
        with self.s.step(Message.of(steps.FUNCTIONAL, n=n)):
            rows = consistency.text_consistency(srv, self.s.model, self.s.serve_path, [f.prompt], n, chat=chat,
                                                stop_ids=self._stop_ids(), vocab_size=self.s.card.vocab_size)
        row = _text_rows(rows, self.s.card.accuracy.splits, chat)[0]
        return f.model_copy(update={"greedy": row, "greedy_engine_dtype": self.s.servers.dtype, "greedy_tokens": n})

    def text_consistency(self) -> TextAgreement:
        """The card's chat prompts, greedy, engine against reference: identical texts, and where not, why."""
        qa = self.s.card.accuracy.qa
        with self.s.step(Message.of(steps.TEXT, n=len(qa.items))):
            rows = consistency.text_consistency(self.s.servers.ensure("accuracy"), self.s.model,
                                                self.s.serve_path, [i.prompt for i in qa.items], qa.max_tokens,
                                                chat=True, stop_ids=self._stop_ids(), vocab_size=self.s.card.vocab_size)
        rule = self.s.card.accuracy.splits
        verdict = consistency.text_verdict(rows, exact_min=qa.exact_min, rule=rule, real_weights=self.s.real)
        out = TextAgreement(num_tokens=qa.max_tokens, chat=True, rows=_text_rows(rows, rule),
                            checks=_checks(verdict),
                            passed=verdict.passed, engine_dtype=self.s.accuracy_dtype)
        return out

    def qa_scores(self, text: TextAgreement | None) -> TaskScore:
        """The text-consistency answers ``text`` scored against the card's expected answers."""
        qa = self.s.card.accuracy.qa
        if text is None:
            raise TutorialError("call text_consistency() first: the QA score scores its answers")
        rows = [TaskRow(question=i.prompt, expected=" / ".join(i.expected), output=r.engine_text,
                        correct=tasks.qa_correct(r.engine_text, i.expected), reference_output=r.reference_text,
                        reference_correct=tasks.qa_correct(r.reference_text, i.expected))
                for i, r in zip(qa.items, text.rows)]
        out = TaskScore(source=qa.source, title=qa.title, rows=rows, reference_correct=sum(r.reference_correct
                                                                                          for r in rows),
                        correct=sum(r.correct for r in rows), total=len(rows), max_tokens=qa.max_tokens,
                        truncated=sum(len(r.engine_ids) >= qa.max_tokens for r in text.rows),
                        meaningful_for_model_quality=self.s.real, engine_dtype=text.engine_dtype)
        return out

    def gsm(self) -> TaskScore:
        """GSM8K (or, offline on stand-ins only, GSM-style problems) answered greedily and scored."""
        g = self.s.card.accuracy.gsm
        size = g.profiles[self.s.profile_name]
        gs = self._gsm_set()
        problems = gs.problems
        source = gs.source + (f" (GSM8K not used: {gs.fallback_reason})" if gs.fallback_reason else "")
        # a task score measures the deployment as it is served (on a CPU without native bf16: float32), not the
        # engine-vs-reference arithmetic, so it needs no engine of the checks' dtype
        srv, model = self.s.servers.ensure("task"), self.s.model

        def ask(p):
            r = srv.post("/v1/chat/completions", tasks.gsm_request(model, p.question, size.max_tokens))
            return r["choices"][0]["message"]["content"], r["choices"][0].get("finish_reason")

        with self.s.step(Message.of(steps.GSM, n=len(problems),
                                     max_tokens=size.max_tokens)):
            outs = consistency.parallel(ask, problems, 20)
        rows = [TaskRow(question=p.question, expected=p.answer, output=o, correct=tasks.gsm_correct(o, p.answer))
                for (o, _), p in zip(outs, problems)]
        out = TaskScore(source=source, rows=rows, correct=sum(r.correct for r in rows), total=len(rows),
                        max_tokens=size.max_tokens, truncated=sum(f == "length" for _, f in outs),
                        meaningful_for_model_quality=self.s.real, engine_dtype=self.s.servers.dtype)
        return out

    def e2e_config(self, doc: ResultsDoc) -> str:
        """vllm-ascend's e2e accuracy config for this model (its ``tests/e2e/models`` format) from the figures of
        ``doc``, written next to the page for download."""
        text = e2e_config(self.s.card, doc)
        path = self.s.artifacts / f"{self.s.card.key}-e2e.yaml"
        path.write_text(text)
        self.s.publish(path, path.name)
        return text

    def greedy_agreement(self) -> TextAgreement:
        """The card's prompts, greedy tokens of engine and reference, each row with its own error."""
        g = self.s.card.accuracy.greedy
        n = len(g.prompts) + len(g.chat_prompts)
        with self.s.step(Message.of(steps.GREEDY, n=n, tokens=g.num_tokens)):
            srv = self.s.servers.ensure("accuracy")
            rows = consistency.text_consistency(srv, self.s.model, self.s.serve_path, g.prompts, g.num_tokens,
                                                chat=False, vocab_size=self.s.card.vocab_size)
            chat = consistency.text_consistency(srv, self.s.model, self.s.serve_path, g.chat_prompts, g.num_tokens,
                                                chat=True, vocab_size=self.s.card.vocab_size) if g.chat_prompts else []
        bound = self.s.card.accuracy.splits
        verdict = consistency.greedy_verdict(rows + chat, **g.thresholds.model_dump(), rule=bound,
                                             real_weights=self.s.real)
        out = TextAgreement(num_tokens=g.num_tokens, chat=False,
                            rows=_text_rows(rows, bound, False if chat else None) + _text_rows(chat, bound, True),
                            checks=_checks(verdict),
                            passed=verdict.passed, engine_dtype=self.s.accuracy_dtype)
        return out
