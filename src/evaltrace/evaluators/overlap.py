"""Reference-overlap metrics: BLEU (sacrebleu) and ROUGE (rouge-score), both behind the ``metrics`` extra."""

from __future__ import annotations

from typing import Any, Literal

from evaltrace.evaluators._base import DeterministicEvaluator, Verdict, answer_text, expected_answer, require_extra
from evaltrace.schema import EvalCase, Trace

RougeType = Literal["rouge1", "rouge2", "rougeL"]


class Bleu(DeterministicEvaluator):
    """Sentence BLEU of the answer against the expected answer(s), sacrebleu defaults, scaled to [0, 1].

    Threshold 0.5, higher is better. The ``metrics`` extra (sacrebleu) is checked when the evaluator is created.
    """

    name = "bleu"

    def __init__(
        self, references: list[str] | None = None, *, threshold: float = 0.5, field: str = "output.final_answer"
    ) -> None:
        """Configure the references.

        Args:
            references: Reference texts; when None, the case's expected answer.
            threshold: Minimum BLEU in [0, 1].
            field: Dotted path of the Trace to score.

        Raises:
            MissingExtraError: sacrebleu is not installed.
        """
        self._sacrebleu = require_extra("sacrebleu", "sacrebleu")
        self.references = references
        self.threshold = threshold
        self.field = field

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Score the answer."""
        references = self.references or [expected_answer(case)]
        result = self._sacrebleu.sentence_bleu(answer_text(trace, self.field), references)
        score = float(result.score) / 100.0
        detail: dict[str, Any] = {
            "bleu": score,
            "precisions": [p / 100.0 for p in result.precisions],
            "brevity_penalty": result.bp,
            "hyp_len": result.sys_len,
            "ref_len": result.ref_len,
        }
        return Verdict(score >= self.threshold, score, f"BLEU {score:.3f}", detail)


class Rouge(DeterministicEvaluator):
    """ROUGE-1/2/L F1 (rouge-score, Porter stemming on by default) of the answer against the expected answer.

    The score is the F1 of ``rouge_type`` (``rougeL`` default); all three are in ``detail``. Threshold 0.5,
    higher is better. With several references the best F1 per type is taken.
    """

    name = "rouge"

    def __init__(
        self,
        references: list[str] | None = None,
        *,
        rouge_type: RougeType = "rougeL",
        use_stemmer: bool = True,
        threshold: float = 0.5,
        field: str = "output.final_answer",
    ) -> None:
        """Configure the scorer.

        Args:
            references: Reference texts; when None, the case's expected answer.
            rouge_type: Which F1 decides: ``rouge1``, ``rouge2`` or ``rougeL``.
            use_stemmer: Porter-stem tokens before matching.
            threshold: Minimum F1.
            field: Dotted path of the Trace to score.

        Raises:
            MissingExtraError: rouge-score is not installed.
        """
        scorer_module = require_extra("rouge_score.rouge_scorer", "rouge-score")
        self._scorer = scorer_module.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=use_stemmer)
        self.references = references
        self.rouge_type: RougeType = rouge_type
        self.threshold = threshold
        self.field = field

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Score the answer against each reference."""
        references = self.references or [expected_answer(case)]
        answer = answer_text(trace, self.field)
        best: dict[str, float] = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
        for reference in references:
            scores = self._scorer.score(reference, answer)
            for key in best:
                best[key] = max(best[key], float(scores[key].fmeasure))
        score = best[self.rouge_type]
        return Verdict(
            score >= self.threshold,
            score,
            f"{self.rouge_type} F1 {score:.3f}",
            {"f1": best, "rouge_type": self.rouge_type},
        )
