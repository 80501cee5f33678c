"""Views of the engine-vs-reference checks (logits, greedy text) and the task-level checks."""

from __future__ import annotations

from . import plots
from ..measure.metrics import agrees
from ..core.tables import Table, Verdict, fmt
from .base import BaseViews


def _top1(r) -> str:
    """One compared position's top-1 in words: the engine's choice is the reference's, an exact tie at the
    engine's top (the reference's token has the engine's best value too), or a flip."""
    return "match" if r.top1_match else ("tie" if r.top1_tie else "differs")


class AccuracyViews(BaseViews):
    """The engine's logits against the fp32 CPU reference: last positions, and every position of a text
    (``show.accuracy``)."""

    # -- last-position logits ------------------------------------------------------------
    def logits_table(self) -> Table:
        """Last-position logits per prompt: nMSE, cosine, top-1 (match, tie or differs), margin beside error."""
        a = self.need("logits_agreement")
        cols = ["prompt", "tokens", "normalized MSE (%)", "cosine", "top-1", "top-5 overlap", "max |err|",
                "mean |err|", "KL (nats)", "ref. top-1/top-2 gap", "decisive"]
        rows = [[r.prompt, r.num_tokens, r.nmse_pct, fmt(r.cosine, 6), _top1(r),
                 f"{100 * r.top5_overlap:.0f} %", r.max_abs_err, r.mean_abs_err, r.kl_nats,
                 r.reference_top2_margin, "–" if r.decisive is None else r.decisive] for r in a.rows]
        flips = [r for r in a.rows if not agrees(r.model_dump())]
        ties = sum(r.top1_tie for r in a.rows)
        note = f"Compared as {a.compared_form}, engine in {a.engine_dtype}. "
        if ties:
            note += (f"{ties} prompt(s) tie: the engine's best value is shared by the reference's token, and the "
                     "engine's greedy choice (the first such index) is another: counted as agreement, not a flip. ")
        if flips:
            note += (f"{len(flips)} prompt(s) changed their top-1 token; there the reference's gap between its two "
                     f"best tokens ({', '.join(fmt(r.reference_top2_margin) for r in flips)}) against the largest "
                     f"logit error ({', '.join(fmt(r.max_abs_err) for r in flips)}) tells a near-tie (gap below the "
                     "error: rounding can flip it) from an arithmetic fault (gap above it). ")
        note += ("'decisive': the gap exceeds the error at that position, so a flip there would be a fault."
                 + self.same_arithmetic_note(a.engine_dtype))
        return Table(cols, rows, caption="Last-position logits, engine vs fp32 CPU reference, whole vocabulary",
                     note=note)

    def logits_plot(self):
        """The engine's logits against the reference's, and the error's distribution."""
        a = self.need("logits_agreement")
        return plots.logits_error(a, f"{self.card.name}: {self.engine_label(a)} vs fp32 CPU reference")

    def logits_verdict(self) -> Verdict:
        """The logits verdict against the card's thresholds."""
        a = self.need("logits_agreement")
        return self.verdict(a.checks, self.stand_in_caveat)

    def logits_vs_reported(self) -> Table:
        """The logits summary beside the report's figures."""
        a = self.need("logits_agreement")
        s = a.summary
        rep = self.reported("logits")
        rows = [["normalized MSE (%)", s["nmse_pct"], rep.get("nmse_pct")],
                ["cosine similarity", fmt(s["cosine"], 6), rep.get("cosine")],
                ["top-1 agreement (%)", s["top1_pct"], rep.get("top1_pct")],
                ["top-5 overlap (%)", s["top5_pct"], rep.get("top5_pct")],
                ["KL divergence (nats)", s["kl_nats"], rep.get("kl_nats")]]
        return Table(["metric", f"this build ({self.engine_label(a)}, vs fp32 CPU)",
                      f"reported ({self.card.reported.hardware})"], rows, caption="Summary beside the report's figures",
                     note=self.cite + self.method_note("logits") + self.same_arithmetic_note(a.engine_dtype))

    # -- every position ----------------------------------------------------------------
    def consistency_verdict(self) -> Verdict:
        """The every-position consistency verdict against the card's thresholds."""
        c = self.need("forward_consistency")
        return self.verdict(c.checks, self.stand_in_caveat)

    def consistency_flips(self) -> Table:
        """Every position where the engine's top-1 differs: the reference's margin beside the engine's error."""
        c = self.need("forward_consistency")
        flips = [p for p in c.per_position if not agrees(p.model_dump())]
        return Table(["position", "ref. top-1/top-2 gap", "engine error spread", "max |err|", "what it is"],
                     [[p.position, p.reference_top2_margin, p.err_spread, p.max_abs_err,
                       "an arithmetic difference (gap > error)" if p.decisive else "a near-tie (gap within error)"]
                      for p in flips] or [["–", "–", "–", "–", "no position changed its top-1 token"]],
                     caption=f"Top-1 flips: {len(flips)} of {len(c.per_position)} positions "
                             f"(top-1 on decisive positions: "
                             f"{'–' if c.top1_decisive_pct is None else f'{c.top1_decisive_pct:.1f} %'}, "
                             f"{c.decisive_positions} decisive)")

    def consistency_vs_reported(self) -> Table:
        """The every-position figures beside the report's."""
        c = self.need("forward_consistency")
        r = self.reported("consistency")
        rows = [["top-1 agreement, all positions (%)", c.top1_pct, r.get("top1_pct")],
                ["top-1 agreement, decisive positions (%)", c.top1_decisive_pct, "–"],
                ["perplexity relative difference (%)", c.ppl_rel_diff_pct, r.get("ppl_rel_diff_pct")],
                ["cosine (full-vocabulary logits)", fmt(c.cosine, 7), "–"],
                ["hidden-state cosine", "not measured", r.get("hidden_cosine")],
                ["KL divergence (nats)", c.kl_nats, r.get("kl")]]
        return Table(["metric", f"this build ({self.engine_label(c)}, vs fp32 CPU)",
                      f"reported ({self.card.reported.hardware})"], rows,
                     caption=f"One forward pass over {c.num_tokens} tokens ({c.positions} positions)",
                     note=f"Compared as {c.compared_form}. The server does not expose hidden states, so this build "
                          "compares the logits (the last layer's hidden state times lm_head) instead. "
                          + self.cite + self.method_note("consistency") + self.same_arithmetic_note(c.engine_dtype))



class TextViews(BaseViews):
    """Greedy text of the engine against the fp32 CPU reference: chat answers and the card's prompts
    (``show.text``)."""

    def text_table(self) -> Table:
        """The greedy texts of engine and reference side by side, with where and why they part."""
        t = self.need("text_consistency")
        rows = [[r.prompt, r.engine_text, r.reference_text, r.exact,
                 "–" if r.first_divergence is None else r.first_divergence, r.char_similarity,
                 r.margin_at_divergence, None if r.error_at_divergence is None else r.error_at_divergence.err_spread]
                for r in t.rows]
        exact = sum(r.exact for r in t.rows)
        caption = f"Greedy outputs, engine vs reference: {exact} / {len(t.rows)} exact"
        rep = self.reported("text_consistency")
        if rep:
            caption += f" (reported: {rep['exact']} / {rep['total']} exact, {rep['similar']} 'similar')"
        note = ("'character similarity' is difflib's ratio of matching characters, not a semantic judgement; the "
                "report's 'similar' was a reader's judgement. ")
        if not self.real:
            note += ("Stand-in weights: both columns follow the planted next-token map, not language; what matters "
                     "is whether they agree, and where not, why.")
        return Table(["prompt", f"engine ({t.engine_dtype or self.dtype})", "reference (fp32 CPU)", "exact",
                      "first diverging token", "character similarity", "ref. top-1/top-2 gap there",
                      "engine error spread there"], rows, caption=caption, note=note)

    def text_verdict(self) -> Verdict:
        """The text-consistency verdict (identical answers) against the card's count."""
        t = self.need("text_consistency")
        return self.verdict(t.checks, self.stand_in_caveat)

    def greedy_table(self) -> Table:
        """Greedy decoding per prompt: first token, match rate, and where a divergence happened, why."""
        g = self.need("greedy_agreement")
        def err(e):
            return None if e is None else e.max_abs_err

        rows = [[r.prompt, "same" if r.engine_ids[:1] == r.reference_ids[:1] else "differs",
                 f"{100 * r.match_rate:.0f} %", "–" if r.first_divergence is None else f"token {r.first_divergence}",
                 r.margin_at_divergence, err(r.error_at_divergence),
                 "–" if r.error_at_divergence is None else ("yes" if r.error_at_divergence.decisive else "no"),
                 err(r.first_token_error)] for r in g.rows]
        first = 100 * sum(r.engine_ids[:1] == r.reference_ids[:1] for r in g.rows) / len(g.rows)
        mean = 100 * sum(r.match_rate for r in g.rows) / len(g.rows)
        t = Table(["prompt", "first token", f"{g.num_tokens}-token match", "first divergence",
                   "ref. top-1/top-2 gap there", "max |logit err| there", "decisive there",
                   "max |logit err| at the first token"],
                  rows, caption=f"Greedy decoding: engine ({g.engine_dtype or self.dtype}) vs fp32 CPU reference: "
                                f"first-token agreement "
                                f"{first:.0f} %, mean match {mean:.0f} %")
        if all(r.first_divergence is None for r in g.rows):
            t.note = "Every sequence is identical." + self.same_arithmetic_note(g.engine_dtype)
        else:
            t.note = ("Where the gap at the divergence point is below the engine's error there, the flip is "
                      "rounding at a near-tie; above it, an arithmetic difference. After the first different token "
                      "the two continue from different texts.")
        t.note += self.method_note("greedy")
        return t

    def greedy_verdict(self) -> Verdict | None:
        """The greedy-agreement verdict against the card's thresholds (None when it has none)."""
        g = self.need("greedy_agreement")
        return self.verdict(g.checks, self.stand_in_caveat) if g.checks else None

    def greedy_plot(self):
        """Per prompt, how many greedy tokens agree with the reference."""
        g = self.need("greedy_agreement")
        return plots.greedy_agreement(g.rows, f"{self.card.name}: greedy {g.num_tokens} tokens, "
                                              f"{self.backend} engine vs fp32 CPU")


class TaskViews(BaseViews):
    """Task scores: the report's questions, GSM-style problems, and the e2e accuracy config (``show.tasks``)."""

    def _task_table(self, key: str, caption: str) -> Table:
        s = self.need(key)
        rows = [[r.question, r.expected, r.output, "correct" if r.correct else "wrong"] for r in s.rows]
        notes = []
        if not s.meaningful_for_model_quality:
            notes.append("Stand-in weights: this score measures nothing about the model; "
                         "it shows the pipeline runs.")
        if s.truncated:
            notes.append(f"{s.truncated} of {s.total} answers were cut off at {s.max_tokens} new tokens, "
                         "which limits the score as well.")
        return Table(["question", "expected", "engine output", "result"], rows,
                     caption=f"{caption}: {s.correct} / {s.total} correct", note=" ".join(notes))

    def qa_table(self) -> Table:
        """The report's questions, the engine's answers and whether each is correct."""
        t = self._task_table("qa", "Chinese QA")
        rep = self.reported("qa")
        if rep:
            t.caption += f" (reported: {rep['correct']} / {rep['total']})"
        return t

    def gsm_examples(self, n: int = 2) -> Table:
        """The first problems of the GSM-style set this build scored."""
        s = self.need("gsm")
        return Table(["question", "answer"], [[r.question, r.expected] for r in s.rows[:n]],
                     caption=f"The first problems of the set ({s.source})")

    def gsm_table(self) -> Table:
        """The GSM-style score beside the report's GSM8K figure."""
        s = self.need("gsm")
        rep = self.reported("gsm8k")
        rows = [["problems", s.source, "GSM8K, first 20"],
                ["answered correctly", f"{s.correct} / {s.total}", f"{rep.get('correct')} / {rep.get('total')}"],
                ["accuracy", f"{100 * s.correct / s.total:.1f} %", f"{rep.get('accuracy_pct')} %"],
                ["max new tokens", s.max_tokens, "–"], ["answers cut off at the limit", s.truncated, "–"]]
        notes = []
        if not s.meaningful_for_model_quality:
            notes.append("Stand-in weights: the score says nothing about the model; the pipeline (problems, "
                         "generation, answer extraction, scoring) is what ran.")
        if s.truncated:
            notes.append(f"{s.truncated} answers reached the {s.max_tokens}-token limit: the cut-off limits this "
                         "score too, not only the weights.")
        notes.append(self.cite)
        return Table(["", "this build", f"reported ({self.card.reported.hardware})"], rows,
                     caption="GSM-style math word problems, greedy", note=" ".join(notes))

    def e2e_config(self) -> str:
        """The vllm-ascend e2e accuracy config generated for this model."""
        return self.need("e2e_config")
