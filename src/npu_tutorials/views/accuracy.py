"""Views of the engine-vs-reference checks (logits, greedy text) and the task-level checks."""

from __future__ import annotations

from . import plots
from ..core.messages import N_, _, gap, sentences
from ..inputs.cards import load_card
from ..measure.floor import FACTOR
from ..measure.metrics import SPLIT_KINDS, agrees, rate_interval_pct
from ..core.tables import Table, Verdict, fmt
from .base import BaseViews

# Between two sentences or a caption and its bracket: a space in English, none in Chinese (full-width punctuation).


def _top1(r) -> str:
    """One compared position's top-1 in words: the engine's choice is the reference's, an exact tie at the
    engine's top (the reference's token has the engine's best value too), or a flip."""
    return _("match") if r.top1_match else (_("tie") if r.top1_tie else _("differs"))


class AccuracyViews(BaseViews):
    """The engine's logits against the fp32 CPU reference: last positions, and every position of a text
    (``show.accuracy``)."""

    # -- last-position logits ------------------------------------------------------------
    def logits_table(self) -> Table:
        """Last-position logits per prompt: nMSE, cosine, top-1 (match, tie or differs), margin beside error."""
        a = self.need("logits_agreement")
        cols = [_("prompt"), _("tokens"), _("normalized MSE (%)"), _("cosine"), "top-1", _("top-5 overlap"),
                _("max |err|"), _("mean |err|"), _("KL (nats)"), _("ref. top-1/top-2 gap"), _("decisive")]
        rows = [[r.prompt, r.num_tokens, r.nmse_pct, fmt(r.cosine, 6), _top1(r),
                 f"{100 * r.top5_overlap:.0f} %", r.max_abs_err, r.mean_abs_err, r.kl_nats,
                 r.reference_top2_margin, "–" if r.decisive is None else r.decisive] for r in a.rows]
        flips = [r for r in a.rows if not agrees(r.model_dump())]
        ties = sum(r.top1_tie for r in a.rows)
        parts = [_("Compared as {form}, engine in {dtype}.", form=_(a.compared_form), dtype=a.engine_dtype)]
        if ties:
            parts.append(_("{n} prompt(s) tie: the engine's best value is shared by the reference's token, and the "
                           "engine's greedy choice (the first such index) is another: counted as agreement, not a "
                           "flip.", n=ties))
        if flips:
            parts.append(_("{n} prompt(s) changed their top-1 token; there the reference's gap between its two best "
                           "tokens ({gaps}) against the largest logit error ({errors}) tells a near-tie (gap below "
                           "the error: rounding can flip it) from an arithmetic fault (gap above it).", n=len(flips),
                           gaps=", ".join(fmt(r.reference_top2_margin) for r in flips),
                           errors=", ".join(fmt(r.max_abs_err) for r in flips)))
        if any(r.pair_err is not None for r in a.rows):  # judged by the split rule (a document before it: not)
            parts.append(_("'decisive': the gap exceeds the engine's largest error at that position. A flip is "
                           "judged by the card's split rule, on the two tokens that contend (the verdict below)."))
        else:
            parts.append(_("'decisive': the gap exceeds the error at that position, so a flip there would be a "
                           "fault."))
        note = sentences(parts) + self.same_arithmetic_note(a.engine_dtype)
        return Table(cols, rows, caption=_("Last-position logits, engine vs fp32 CPU reference, whole vocabulary"),
                     note=note)

    def logits_plot(self):
        """The engine's logits against the reference's, and the error's distribution."""
        a = self.need("logits_agreement")
        return plots.logits_error(a, _("{model}: {engine} vs fp32 CPU reference", model=self.card.name,
                                       engine=self.engine_label(a)))

    def logits_verdict(self) -> Verdict:
        """The logits verdict against the card's thresholds."""
        a = self.need("logits_agreement")
        return self.verdict(a.checks, self.stand_in_caveat, "logits_agreement")

    def logits_vs_reported(self) -> Table:
        """The logits summary beside the report's figures."""
        a = self.need("logits_agreement")
        s = a.summary
        rep = self.reported("logits")
        rows = [[_("normalized MSE (%)"), s["nmse_pct"], rep.get("nmse_pct")],
                [_("cosine similarity"), fmt(s["cosine"], 6), rep.get("cosine")],
                [_("top-1 agreement (%)"), s["top1_pct"], rep.get("top1_pct")],
                [_("top-5 overlap (%)"), s["top5_pct"], rep.get("top5_pct")],
                [_("KL divergence (nats)"), s["kl_nats"], rep.get("kl_nats")]]
        return Table([_("metric"), _("this build ({engine}, vs fp32 CPU)", engine=self.engine_label(a)),
                      _("reported ({hardware})", hardware=self.card.reported.hardware)], rows,
                     caption=_("Summary beside the report's figures"),
                     note=self.cite + self.method_note("logits") + self.same_arithmetic_note(a.engine_dtype))

    # -- every position ----------------------------------------------------------------
    def consistency_verdict(self, section: str = "forward_consistency") -> Verdict:
        """The every-position consistency verdict against the card's thresholds (``section``: forward_consistency, or
        chat_consistency: over a chat answer)."""
        c = self.need(section)
        return self.verdict(c.checks, sentences(x for x in (self.derived_limits_note(section), self.stand_in_caveat)
                                                if x), section)

    def derived_limits_note(self, section: str = "forward_consistency") -> str:
        """Which of the consistency limits (``section``'s check on the card) are derived for logits, and from which
        model's measured floor."""
        c = self.card.accuracy.chat_consistency if section == "chat_consistency" else self.card.accuracy.consistency
        if c is None:  # a recorded document rendered beside a card that has no consistency check any more
            return ""
        d = c.derived
        return _("Limits derived for logits ({limits}): {factor:g} x the bf16 rounding floor measured on the real weights of "
                 "{model}, on texts no check judges (see 'How the checks work'); the other limits are an "
                 "evaluation report's thresholds on the same quantities.",
                 limits=", ".join(d.limits), factor=FACTOR, model=load_card(d.record).name)

    def consistency_flips(self) -> Table:
        """Every position where the engine's top-1 differs: the reference's margin beside the engine's error."""
        c = self.need("forward_consistency")
        flips = [p for p in c.per_position if not agrees(p.model_dump())]
        return Table([_("position"), _("ref. top-1/top-2 gap"), _("engine error spread"), _("max |err|"),
                      _("what it is")],
                     [[p.position, p.reference_top2_margin, p.err_spread, p.max_abs_err,
                       _("an arithmetic difference (gap > error)") if p.decisive
                       else _("a near-tie (gap within error)")]
                      for p in flips] or [["–", "–", "–", "–", _("no position changed its top-1 token")]],
                     caption=_("Top-1 flips: {flips} of {positions} positions (top-1 on decisive positions: {pct}, "
                               "{decisive} decisive)", flips=len(flips), positions=len(c.per_position),
                               pct="–" if c.top1_decisive_pct is None else f"{c.top1_decisive_pct:.1f} %",
                               decisive=c.decisive_positions))

    def consistency_vs_reported(self) -> Table:
        """The every-position figures beside the report's."""
        c = self.need("forward_consistency")
        r = self.reported("consistency")
        rows = [[_("top-1 agreement, all positions (%)"), c.top1_pct, r.get("top1_pct")],
                [_("top-1 agreement, decisive positions (%)"), c.top1_decisive_pct, "–"],
                [_("perplexity relative difference (%)"), c.ppl_rel_diff_pct, r.get("ppl_rel_diff_pct")],
                [_("cosine (full-vocabulary logits)"), fmt(c.cosine, 7), "–"],
                [_("hidden-state cosine"), _("not measured"), r.get("hidden_cosine")],
                [_("KL divergence (nats)"), c.kl_nats, r.get("kl")]]
        return Table([_("metric"), _("this build ({engine}, vs fp32 CPU)", engine=self.engine_label(c)),
                      _("reported ({hardware})", hardware=self.card.reported.hardware)], rows,
                     caption=_("One forward pass over {tokens} tokens ({positions} positions)",
                               tokens=c.num_tokens, positions=c.positions),
                     note=_("Compared as {form}. The server does not expose hidden states, so this build compares "
                            "the logits (the last layer's hidden state times lm_head) instead.",
                            form=_(c.compared_form))
                          + gap() + self.cite + self.method_note("consistency")
                          + self.same_arithmetic_note(c.engine_dtype))



SPLIT_NOTE = N_("Where the reference's top-1/top-2 gap at the split is below the engine's largest error there, the "
               "split is rounding at a near-tie: shown and counted, not a fault, as long as the engine's error there "
               "stays within the check's bound (its normalized MSE at that position); otherwise it is a fault. "
               "Above the error, the split is decisive: a fault.")


PAIR_SPLIT_NOTE = N_("A split is judged on the two tokens that contend there, the reference's top-1 and the engine's "
                     "choice: it is rounding at a near-tie (shown and counted, not a fault) only when the engine moved "
                     "the reference's lead between them by no more than the card's split rule allows, the most that "
                     "bf16 rounding in another implementation moved such a pair on calibration text; and near-tie "
                     "splits may be no more frequent than that rounding explains. Otherwise the split is a fault "
                     "(the methods page).")


def _pair(rows) -> bool:
    """Whether these text rows carry the contending pair at their splits (documents before the split rule do not)."""
    return any(r.error_at_divergence is not None and r.error_at_divergence.pair_err is not None for r in rows)


def _split_cols(rows, legacy: str, legacy_head: str):
    """The two figures a text table shows at a row's split: the reference's lead and the engine's error on the
    contending pair; in a document before the split rule, the top-1/top-2 gap and the error field ``legacy``
    (headed ``legacy_head``).  Returns the two headings, and a function of a row giving its two cells."""
    pair = _pair(rows)

    def cols(r):
        e = r.error_at_divergence
        if pair:
            return [None if e is None else e.pair_margin, None if e is None else e.pair_err]
        return [r.margin_at_divergence, None if e is None else getattr(e, legacy)]
    heads = ([_("reference's lead over the engine's token there"), _("engine's error on that pair")] if pair else
             [_("ref. top-1/top-2 gap there"), legacy_head])
    return heads, cols


def split_label(r) -> str:
    """How a text row's first divergence is judged, in words ('–' where the texts agree)."""
    if r.first_divergence is None:
        return "–"
    kind = r.split or ("decisive" if r.error_at_divergence is not None and r.error_at_divergence.decisive
                       else None)
    return _(SPLIT_KINDS[kind]) if kind else _("not judged (recorded before splits were)")


class TextViews(BaseViews):
    """Greedy text of the engine against the fp32 CPU reference: chat answers and the card's prompts
    (``show.text``)."""

    def text_table(self) -> Table:
        """The greedy texts of engine and reference side by side, with where and why they part."""
        t = self.need("text_consistency")
        pair = _pair(t.rows)
        heads, cols = _split_cols(t.rows, "err_spread", _("engine error spread there"))
        rows = [[r.prompt, r.engine_text, r.reference_text, r.exact,
                 "–" if r.first_divergence is None else r.first_divergence, r.char_similarity, *cols(r),
                 split_label(r)]
                for r in t.rows]
        exact = sum(r.exact for r in t.rows)
        caption = _("Greedy outputs, engine vs reference: {exact} / {total} exact", exact=exact, total=len(t.rows))
        rep = self.reported("text_consistency")
        if rep:
            caption += gap() + _("(reported: {exact} / {total} exact, {similar} 'similar')", exact=rep["exact"],
                               total=rep["total"], similar=rep["similar"])
        note = _("'character similarity' is difflib's ratio of matching characters, not a semantic judgement; the "
                 "report's 'similar' was a reader's judgement.") + gap()
        if not self.real:
            note += _("Stand-in weights: both columns follow the planted next-token map, not language; what matters "
                      "is whether they agree, and where not, why.")
        return Table([_("prompt"), _("engine ({dtype})", dtype=t.engine_dtype or self.dtype),
                      _("reference (fp32 CPU)"), _("exact"), _("first diverging token"), _("character similarity"),
                      *heads, _("split")], rows,
                     caption=caption, note=note + gap() + _(PAIR_SPLIT_NOTE if pair else SPLIT_NOTE))

    def text_verdict(self) -> Verdict:
        """The text-consistency verdict (identical answers) against the card's count."""
        t = self.need("text_consistency")
        return self.verdict(t.checks, self.stand_in_caveat, "text_consistency")

    def greedy_table(self) -> Table:
        """Greedy decoding per prompt: first token, match rate, and where a divergence happened, why."""
        g = self.need("greedy_agreement")
        def err(e):
            return None if e is None else e.max_abs_err

        pair = _pair(g.rows)
        heads, cols = _split_cols(g.rows, "max_abs_err", _("max |logit err| there"))
        rows = [[r.prompt, _("same") if r.engine_ids[:1] == r.reference_ids[:1] else _("differs"),
                 f"{100 * r.match_rate:.0f} %",
                 "–" if r.first_divergence is None else _("token {index}", index=r.first_divergence),
                 *cols(r), split_label(r), err(r.first_token_error)] for r in g.rows]
        first = 100 * sum(r.engine_ids[:1] == r.reference_ids[:1] for r in g.rows) / len(g.rows)
        mean = 100 * sum(r.match_rate for r in g.rows) / len(g.rows)
        t = Table([_("prompt"), _("first token"), _("{n}-token match", n=g.num_tokens), _("first divergence"),
                   *heads, _("split"),
                   _("max |logit err| at the first token")],
                  rows, caption=_("Greedy decoding: engine ({dtype}) vs fp32 CPU reference: first-token agreement "
                                  "{first:.0f} %, mean match {mean:.0f} %, every split counted (the verdict "
                                  "excuses near-ties within its bound)", dtype=g.engine_dtype or self.dtype,
                                  first=first, mean=mean))
        if all(r.first_divergence is None for r in g.rows):
            t.note = _("Every sequence is identical.") + self.same_arithmetic_note(g.engine_dtype)
        else:
            t.note = _(PAIR_SPLIT_NOTE if pair else SPLIT_NOTE) + " " + _("After the first different token the two "
                                                                         "continue from different texts.")
        t.note += self.method_note("greedy")
        return t

    def greedy_verdict(self) -> Verdict | None:
        """The greedy-agreement verdict against the card's thresholds (None when it has none)."""
        g = self.need("greedy_agreement")
        return self.verdict(g.checks, self.stand_in_caveat, "greedy_agreement") if g.checks else None

    def greedy_plot(self):
        """Per prompt, how many greedy tokens agree with the reference."""
        g = self.need("greedy_agreement")
        return plots.greedy_agreement(g.rows, _("{model}: greedy {n} tokens, {backend} engine vs fp32 CPU",
                                                model=self.card.name, n=g.num_tokens, backend=self.backend))


class TaskViews(BaseViews):
    """Task scores: the report's questions, GSM-style problems, and the e2e accuracy config (``show.tasks``)."""

    def _task_table(self, key: str, caption: str) -> Table:
        s = self.need(key)
        rows = [[r.question, r.expected, r.output, _("correct") if r.correct else _("wrong")] for r in s.rows]
        notes = [self._answered_by(s)]
        if not s.meaningful_for_model_quality:
            notes.append(_("Stand-in weights: this score measures nothing about the model; "
                           "it shows the pipeline runs."))
        if s.truncated:
            notes.append(_("{truncated} of {total} answers were cut off at {max_tokens} new tokens, which limits the "
                           "score as well.", truncated=s.truncated, total=s.total, max_tokens=s.max_tokens))
        return Table([_("question"), _("expected"), _("engine output"), _("result")], rows,
                     caption=_("{task}: {correct} / {total} correct", task=caption, correct=s.correct, total=s.total),
                     note=sentences(notes))

    def _answered_by(self, s) -> str:
        """Which engine a task score's answers came from (the GSM set: the deployment as served; QA: the
        text-consistency engine, in the card's dtype)."""
        return _("Answered by the {engine}.", engine=self.engine_label(s))

    def qa_table(self) -> Table:
        """The card's questions, the engine's answers and whether each is correct; where the fp32 reference's
        answers were scored too, beside them, and whether the two scores agree."""
        s = self.need("qa")
        t = self._task_table("qa", _(s.title or "Chinese QA"))
        if s.reference_correct is not None and all(r.reference_output is not None for r in s.rows):
            t.columns += [_("reference output (fp32 CPU)"), _("reference result")]
            for row, r in zip(t.rows, s.rows):
                row += [r.reference_output, _("correct") if r.reference_correct else _("wrong")]
            differ = sum(r.correct != r.reference_correct for r in s.rows)
            t.caption += gap() + _("(fp32 reference: {correct} / {total}; {verdict})",
                                          correct=s.reference_correct, total=s.total,
                                          verdict=_("the same result on every question") if not differ
                                          else _("{n} question(s) judged differently", n=differ))
        lo, hi = rate_interval_pct(s.correct, s.total)
        t.caption += gap() + _("(95 % interval of the engine's score over {total} questions: {lo:.0f}–{hi:.0f} %)",
                               total=s.total, lo=lo, hi=hi)
        rep = self.reported("qa")
        if rep:
            t.caption += gap() + _("(reported: {correct} / {total})", correct=rep["correct"], total=rep["total"])
        return t

    def gsm_examples(self, n: int = 2) -> Table:
        """The first problems of the GSM-style set this build scored."""
        s = self.need("gsm")
        return Table([_("question"), _("answer")], [[r.question, r.expected] for r in s.rows[:n]],
                     caption=_("The first problems of the set ({source})", source=s.source))

    def gsm_table(self) -> Table:
        """The GSM-style score beside the report's GSM8K figure."""
        s = self.need("gsm")
        rep = self.reported("gsm8k")
        rows = [[_("problems"), s.source, _("GSM8K, first 20")],
                [_("answered correctly"), f"{s.correct} / {s.total}", f"{rep.get('correct')} / {rep.get('total')}"],
                [_("accuracy"), f"{100 * s.correct / s.total:.1f} %", f"{rep.get('accuracy_pct')} %"],
                [_("max new tokens"), s.max_tokens, "–"], [_("answers cut off at the limit"), s.truncated, "–"]]
        notes = [self._answered_by(s)]
        if not s.meaningful_for_model_quality:
            notes.append(_("Stand-in weights: the score says nothing about the model; the pipeline (problems, "
                           "generation, answer extraction, scoring) is what ran."))
        if s.truncated:
            notes.append(_("{truncated} answers reached the {max_tokens}-token limit: the cut-off limits this score "
                           "too, not only the weights.", truncated=s.truncated, max_tokens=s.max_tokens))
        notes.append(self.cite)
        return Table(["", _("this build"), _("reported ({hardware})", hardware=self.card.reported.hardware)], rows,
                     caption=_("GSM-style math word problems, greedy"), note=sentences(notes))

    def e2e_config(self) -> str:
        """The vllm-ascend e2e accuracy config generated for this model."""
        return self.need("e2e_config")
