"""GPTScore and perplexity: how likely a model finds the answer, from prompt log-probabilities.

Both ask the run's ``judge:`` endpoint for the log-probabilities of a prompt (see :mod:`likelihood`); the endpoint
must be an OpenAI-compatible completions server returning prompt logprobs (vLLM, llama.cpp's server...). Lower is
better for both. With no threshold given (the catalogue's default, infinity) every score passes: the value is
for comparing models and cases.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from evaltrace.evaluators._base import (
    CODE_VERSION,
    DEFAULT_FIELD,
    Direction,
    MissingInputError,
    Subject,
    Verdict,
    answer_text,
    build_result,
    check_field,
    expected_answer,
    passes,
    question_text,
    require_trace,
    skipped_result,
)
from evaltrace.evaluators._judged import failed_result
from evaltrace.evaluators.judge import Judge, JudgeError, default_judge
from evaltrace.evaluators.likelihood import Likelihood, LogprobsError, likelihood
from evaltrace.schema import EvalCase, EvaluationResult, Trace

Variant = Literal["translation", "question_answering", "summarization", "summarization_with_reference"]


@dataclass(frozen=True)
class _Design:
    """One GPTScore variant: what conditions the answer, and the instruction of each aspect (first = primary).

    ``both_ways``: the prompt holds the expected answer and the answer is scored after it, then the roles swap,
    and the two are averaged (the catalogue's rule for reference-based variants).
    """

    source: Literal["expected", "question"]
    both_ways: bool
    aspects: Mapping[str, str]


# The translation instructions are the catalogue's; the other variants follow the same pattern in our words.
VARIANTS: Mapping[str, _Design] = {
    "translation": _Design(
        "expected",
        True,
        {
            "accuracy": "Rewrite the following text with its core information and consistent facts: {source} "
            "In other words,",
            "fluency": "Rewrite the following text to make it more grammatical and well-written: {source} "
            "In other words,",
            "mqm": "Rewrite the following text into high-quality text with its core information: {source} "
            "In other words,",
        },
    ),
    "summarization_with_reference": _Design(
        "expected",
        True,
        {
            "semantic_coverage": "Rewrite the following summary so that it keeps all of its key points: {source} "
            "In other words,",
            "factuality": "Rewrite the following summary keeping its facts consistent: {source} In other words,",
            "informativeness": "Rewrite the following summary into an informative text that keeps its core "
            "information: {source} In other words,",
        },
    ),
    "summarization": _Design(
        "question",
        False,
        {
            "consistency": "Write a summary of the following text that is consistent with its facts: {source} Tl;dr",
            "coherence": "Write a coherent, well-structured summary of the following text: {source} Tl;dr",
            "fluency": "Write a fluent and grammatical summary of the following text: {source} Tl;dr",
            "relevance": "Write a summary of the following text that keeps only its important points: {source} Tl;dr",
        },
    ),
    "question_answering": _Design(
        "question",
        False,
        {
            "accuracy": "Answer the following question correctly and factually: {source} Answer:",
            "relevance": "Answer the following question directly, staying on its topic: {source} Answer:",
            "fluency": "Answer the following question in fluent, well-written language: {source} Answer:",
        },
    ),
}
"""GPTScore variant -> its design."""


def _check_threshold(threshold: float | None) -> float | None:
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or threshold < 0:
        raise ValueError(f"threshold must be a number >= 0 (lower scores are better), got {threshold!r}")
    return float(threshold)


class _LikelihoodEvaluator(abc.ABC):
    """Shared plumbing: the endpoint, the threshold (lower is better), and errors kept apart from verdicts."""

    name = "perplexity"
    direction: Direction = "lower"
    version = f"{CODE_VERSION}+logprobs.v1"
    evaluator_type = "judge"
    subjects: ClassVar[frozenset[str]] = frozenset({"trace"})

    def __init__(self, judge: Judge | None, threshold: float | None, field: str) -> None:
        self.judge = judge if judge is not None else default_judge()
        self.threshold = _check_threshold(threshold)
        self.field = check_field(field)

    @abc.abstractmethod
    async def measure(self, trace: Trace, case: EvalCase | None) -> tuple[Verdict, list[Likelihood]]:
        """The verdict on ``trace`` and the likelihoods it was computed from."""

    async def evaluate(self, trace: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Score the answer; missing inputs give ``skipped``, an endpoint failure ``failed`` (never a score).

        Args:
            trace: What the system did.
            case: The dataset case.

        Returns:
            The result.

        Raises:
            WrongSubjectError: Given a session's Conversation.
        """
        one = require_trace(self, trace)
        try:
            verdict, parts = await self.measure(one, case)
        except MissingInputError as exc:
            return skipped_result(self, one, exc, evaluator_type=self.evaluator_type)
        except JudgeError as exc:
            return failed_result(self, one, str(exc), {"judge": exc.call.as_detail()}, error_type=exc.error_type)
        except LogprobsError as exc:
            return failed_result(self, one, f"{exc} ({self.judge.url}, model {self.judge.model})", {})
        costs = [p.call.cost_usd for p in parts if p.call.cost_usd is not None]
        verdict.detail["model"] = self.judge.model
        return build_result(
            self, one, verdict, evaluator_type=self.evaluator_type, cost_usd=sum(costs) if costs else None
        )

    def decide(self, score: float) -> bool:
        """Pass unless a threshold is set and the score is above it."""
        return True if self.threshold is None else passes(score, self.threshold, self.direction)


class GPTScore(_LikelihoodEvaluator):
    """GPTScore: average negative log-likelihood of the answer after an aspect's instruction; lower is better.

    ``variant`` picks what conditions the answer: ``translation`` and ``summarization_with_reference`` use the
    expected answer and average both directions; ``question_answering`` and ``summarization`` use the question
    (for summarization, the text summarised). Each aspect is one metric in ``detail["aspects"]``; the first one
    asked for is the score.
    """

    name = "gptscore"
    variant: Variant = "question_answering"

    def __init__(
        self,
        judge: Judge | None = None,
        *,
        variant: Variant | None = None,
        aspects: Sequence[str] | None = None,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the variant.

        Args:
            judge: The completions endpoint returning prompt logprobs (the run's ``judge:`` block).
            variant: ``translation``, ``question_answering`` (default), ``summarization`` or
                ``summarization_with_reference``.
            aspects: The aspects to score, first = the score; default all of the variant's.
            threshold: Highest passing score; default none (the catalogue's infinity: every score passes).
            field: Dotted path of the Trace scored as the answer (default ``output.final_answer``).

        Raises:
            ValueError: Unknown variant or aspect, or a negative threshold.
        """
        chosen = variant if variant is not None else self.variant
        if chosen not in VARIANTS:
            raise ValueError(f"unknown GPTScore variant {chosen!r}; known: {', '.join(VARIANTS)}")
        self.variant = chosen
        self.design = VARIANTS[chosen]
        known = list(self.design.aspects)
        if aspects is None:
            self.aspects = known
        else:
            if isinstance(aspects, str) or not aspects:
                raise ValueError(f"aspects must be a non-empty list of: {', '.join(known)}")
            unknown = [a for a in aspects if a not in self.design.aspects]
            if unknown:
                raise ValueError(f"unknown aspect(s) {unknown} for GPTScore {chosen}; known: {', '.join(known)}")
            self.aspects = list(dict.fromkeys(aspects))
        super().__init__(judge, threshold, field)

    def _source(self, trace: Trace, case: EvalCase | None) -> str:
        if self.design.source == "expected":
            return expected_answer(case)
        return question_text(trace)

    async def _aspect(self, aspect: str, source: str, answer: str) -> tuple[float, list[Likelihood]]:
        template = self.design.aspects[aspect]
        if not self.design.both_ways:
            one = await likelihood(self.judge, template.format(source=source), answer)
            return one.mean_nll, [one]
        forward, backward = await asyncio.gather(
            likelihood(self.judge, template.format(source=source), answer),
            likelihood(self.judge, template.format(source=answer), source),
        )
        return (forward.mean_nll + backward.mean_nll) / 2, [forward, backward]

    async def measure(self, trace: Trace, case: EvalCase | None) -> tuple[Verdict, list[Likelihood]]:
        """Score every aspect (concurrently) and report the first."""
        answer = answer_text(trace, self.field)
        source = self._source(trace, case)
        scored = await asyncio.gather(*(self._aspect(a, source, answer) for a in self.aspects))
        values = {a: value for a, (value, _) in zip(self.aspects, scored, strict=True)}
        parts = [p for _, calls in scored for p in calls]
        score = values[self.aspects[0]]
        reason = f"{self.aspects[0]} {score:.3f} (average negative log-likelihood, lower is better)"
        detail: dict[str, Any] = {"variant": self.variant, "aspects": values, "primary": self.aspects[0]}
        return Verdict(self.decide(score), score, reason, detail), parts


class GPTScoreTranslation(GPTScore):
    """GPTScore, machine translation variant (accuracy, fluency, MQM against the expected answer)."""

    name = "gptscore_translation"
    variant: Variant = "translation"


class GPTScoreQuestionAnswering(GPTScore):
    """GPTScore, question answering variant (accuracy, relevance, fluency of the answer to the question)."""

    name = "gptscore_question_answering"
    variant: Variant = "question_answering"


class GPTScoreSummarization(GPTScore):
    """GPTScore, summarization without a reference (the question holds the text summarised)."""

    name = "gptscore_summarization"
    variant: Variant = "summarization"


class GPTScoreSummarizationWithReference(GPTScore):
    """GPTScore, summarization against a reference summary (the expected answer), both directions averaged."""

    name = "gptscore_summarization_with_reference"
    variant: Variant = "summarization_with_reference"


class Perplexity(_LikelihoodEvaluator):
    """Perplexity of the answer: ``exp`` of its average negative log-likelihood under the model; lower is better."""

    name = "perplexity"

    def __init__(
        self, judge: Judge | None = None, *, threshold: float | None = None, field: str = DEFAULT_FIELD
    ) -> None:
        """Configure the endpoint.

        Args:
            judge: The completions endpoint returning prompt logprobs (the run's ``judge:`` block).
            threshold: Highest passing perplexity (>= 1 to be meaningful); default none: every score passes.
            field: Dotted path of the Trace scored (default ``output.final_answer``).

        Raises:
            ValueError: A negative threshold.
        """
        super().__init__(judge, threshold, field)

    async def measure(self, trace: Trace, case: EvalCase | None) -> tuple[Verdict, list[Likelihood]]:
        """Score the answer on its own (its first token has no probability and is not counted)."""
        scored = await likelihood(self.judge, "", answer_text(trace, self.field))
        score = scored.perplexity
        detail: dict[str, Any] = {"mean_nll": scored.mean_nll, "tokens": scored.tokens}
        reason = f"perplexity {score:.2f} over {scored.tokens} tokens"
        return Verdict(self.decide(score), score, reason, detail), [scored]
