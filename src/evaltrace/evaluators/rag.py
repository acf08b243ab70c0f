"""Retrieval (RAG) evaluators: the answer against the context, and the retrieved context itself.

Faithfulness, groundedness and hallucination judge the answer; precision, recall, relevancy and MRR the context.
"""

from __future__ import annotations

import abc
from typing import Any

from evaltrace.evaluators._base import (
    MissingInputError,
    Verdict,
    context_chunks,
    expected_answer,
    passes,
    question_text,
)
from evaltrace.evaluators._judged import (
    NOT_GIVEN,
    EmbeddingEvaluator,
    JudgeEvaluator,
    embed_or_fail,
    flag,
    json_object,
    numbered,
    object_list,
)
from evaltrace.evaluators._text import split_sentences
from evaltrace.evaluators.embeddings import cosine
from evaltrace.evaluators.judge import Judge
from evaltrace.schema import EvalCase, Trace

_FACT_STATUSES = ("supported", "unsupported", "contradicted")


def _optional_question(trace: Trace) -> str:
    try:
        return question_text(trace)
    except MissingInputError:
        return NOT_GIVEN


class _AnswerAgainstContext(JudgeEvaluator):
    """Judge evaluators that check the answer against the retrieved context."""

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question (if any), numbered context and answer."""
        return {
            "question": _optional_question(trace),
            "context": numbered(context_chunks(trace)),
            "answer": self.answer(trace),
        }


class Faithfulness(_AnswerAgainstContext):
    """Claims in the answer inferable from the retrieved context / claims in the answer.

    An answer without claims scores 1.0. Threshold 0.75, higher is better.
    """

    name = "faithfulness"
    prompt_name = "faithfulness"

    def parse(self, text: str) -> list[dict[str, Any]]:
        """Require claims with a boolean ``supported``."""
        claims = object_list(json_object(text), "claims")
        for claim in claims:
            claim["supported"] = flag(claim, "supported")
        return claims

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Share of supported claims."""
        supported = sum(1 for c in parsed if c["supported"])
        score = supported / len(parsed) if parsed else 1.0
        reason = f"{supported}/{len(parsed)} claims supported by the context" if parsed else "no factual claims"
        return Verdict(passes(score, self.threshold, self.direction), score, reason, {"claims": parsed})


class Hallucination(_AnswerAgainstContext):
    """The judge lists the facts of the answer as supported / unsupported / contradicted by the context.

    Score = 1 − hallucinated facts / facts (higher is better, threshold 0.75); ``detail.hallucination_rate`` is
    the complement and ``detail.hallucinated`` the offending facts.
    """

    name = "hallucination"
    prompt_name = "hallucination"

    def parse(self, text: str) -> list[dict[str, Any]]:
        """Require facts with a known status."""
        facts = object_list(json_object(text), "facts")
        for fact in facts:
            if str(fact.get("status", "")).lower() not in _FACT_STATUSES:
                raise ValueError(f"fact status must be one of {_FACT_STATUSES}, got {fact.get('status')!r}")
            fact["status"] = str(fact["status"]).lower()
        return facts

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Share of facts not hallucinated."""
        bad = [f for f in parsed if f["status"] != "supported"]
        rate = len(bad) / len(parsed) if parsed else 0.0
        score = 1.0 - rate
        detail = {"facts": parsed, "hallucinated": bad, "hallucination_rate": rate, "hallucination_detected": bool(bad)}
        reason = f"{len(bad)}/{len(parsed)} facts unsupported or contradicted" if parsed else "no facts stated"
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)


class Groundedness(EmbeddingEvaluator):
    """Min over answer sentences of the max cosine to any context sentence. Threshold 0.75, higher is better."""

    name = "groundedness"

    async def measure(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Embed answer and context sentences."""
        answer = self.answer(trace)
        mine = split_sentences(answer) or [answer]
        context = [s for chunk in context_chunks(trace) for s in (split_sentences(chunk) or [chunk])]
        vectors = await embed_or_fail(self.embedder, [*mine, *context])
        best = [max(cosine(v, w) for w in vectors[len(mine) :]) for v in vectors[: len(mine)]]
        score = min(best)
        weakest = best.index(score)
        detail = {"per_sentence": best, "weakest_sentence_index": weakest}
        return Verdict(
            passes(score, self.threshold, self.direction), score, f"least grounded sentence {score:.2f}", detail
        )


class _SoftContextRelevancy(EmbeddingEvaluator):
    """Shared measure: question sentences against context sentences, matched by best cosine both ways.

    Soft recall averages, over question sentences, the best cosine to any context sentence (is every part of
    the question covered?); soft precision averages, over context sentences, the best cosine to any question
    sentence (is every retrieved sentence about the question?). Both land in ``detail``; the subclass picks
    which one is the score.
    """

    metric_key = "soft_recall"

    async def measure(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Embed question and context sentences once and score both directions."""
        question = question_text(trace)
        asked = split_sentences(question) or [question]
        context = [s for chunk in context_chunks(trace) for s in (split_sentences(chunk) or [chunk])]
        vectors = await embed_or_fail(self.embedder, [*asked, *context])
        q_vectors, c_vectors = vectors[: len(asked)], vectors[len(asked) :]
        similarity = [[cosine(q, c) for c in c_vectors] for q in q_vectors]
        per_question = [max(row) for row in similarity]
        per_context = [max(row[j] for row in similarity) for j in range(len(c_vectors))]
        metrics = {
            "soft_recall": sum(per_question) / len(per_question),
            "soft_precision": sum(per_context) / len(per_context),
        }
        score = metrics[self.metric_key]
        detail: dict[str, Any] = {**metrics, "per_question_sentence": per_question, "per_context_sentence": per_context}
        reason = f"{self.metric_key.replace('_', ' ')} {score:.2f} over {len(asked)} question / {len(context)} context sentences"
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)


class ContextRelevancySoftRecall(_SoftContextRelevancy):
    """Mean over question sentences of the best cosine to a context sentence. Threshold 0.75, higher is better."""

    name = "context_relevancy_soft_recall"
    metric_key = "soft_recall"


class ContextRelevancySoftPrecision(_SoftContextRelevancy):
    """Mean over context sentences of the best cosine to a question sentence. Threshold 0.75, higher is better."""

    name = "context_relevancy_soft_precision"
    metric_key = "soft_precision"


class _ContextRelevance(JudgeEvaluator):
    """Shared judgement: one relevance verdict per retrieved chunk (identical prompt, so one cached call)."""

    prompt_name = "context_relevance"

    def __init__(
        self, judge: Judge | None = None, *, expected: str | None = None, threshold: float | None = None
    ) -> None:
        """Configure the evaluator.

        Args:
            judge: The judge.
            expected: The expected answer, shown to the judge when given (else the case's, if any).
            threshold: Override of 0.75.
        """
        super().__init__(judge, threshold=threshold)
        self.expected = expected

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question, expected answer (optional) and numbered chunks."""
        try:
            expected = expected_answer(case, self.expected)
        except MissingInputError:
            expected = NOT_GIVEN
        return {
            "question": question_text(trace),
            "expected_answer": expected,
            "context": numbered(context_chunks(trace)),
        }

    def parse(self, text: str) -> list[bool]:
        """Require one boolean verdict per chunk, in order (by ``index`` when given)."""
        verdicts = object_list(json_object(text), "verdicts")
        if not verdicts:
            raise ValueError("no verdicts")
        ordered = (
            sorted(verdicts, key=lambda v: int(v.get("index", 0))) if all("index" in v for v in verdicts) else verdicts
        )
        return [flag(v, "relevant") for v in ordered]

    def _relevance(self, parsed: list[bool], trace: Trace) -> list[bool]:
        chunks = len(context_chunks(trace))
        if len(parsed) != chunks:
            # Fewer verdicts than chunks: the missing ones count as not relevant; extra ones are ignored.
            parsed = (parsed + [False] * chunks)[:chunks]
        return parsed

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Compute this evaluator's metric from the relevance list."""
        relevant = self._relevance(parsed, trace)
        score, reason = self.metric(relevant)
        detail = {"relevant": relevant, "relevant_ranks": [i for i, r in enumerate(relevant, 1) if r]}
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)

    @abc.abstractmethod
    def metric(self, relevant: list[bool]) -> tuple[float, str]:
        """Return (score, reason) for the ranked relevance list."""


class ContextPrecision(_ContextRelevance):
    """Average precision of the ranking: mean over relevant ranks k of precision@k (0 with nothing relevant)."""

    name = "context_precision"

    def metric(self, relevant: list[bool]) -> tuple[float, str]:
        """Average precision."""
        hits, total = 0, 0.0
        for k, is_relevant in enumerate(relevant, 1):
            if is_relevant:
                hits += 1
                total += hits / k
        score = total / hits if hits else 0.0
        return score, f"average precision {score:.2f} over {len(relevant)} chunks"


class ContextRelevancy(_ContextRelevance):
    """Share of retrieved chunks relevant to the question."""

    name = "context_relevancy"

    def metric(self, relevant: list[bool]) -> tuple[float, str]:
        """Relevant chunks / chunks."""
        score = sum(relevant) / len(relevant)
        return score, f"{sum(relevant)}/{len(relevant)} chunks relevant"


class ContextMRR(_ContextRelevance):
    """Reciprocal rank of the first relevant chunk (averaged over cases at run level: mean reciprocal rank)."""

    name = "context_mrr"

    def metric(self, relevant: list[bool]) -> tuple[float, str]:
        """1 / rank of the first relevant chunk."""
        rank = next((k for k, r in enumerate(relevant, 1) if r), None)
        return (1.0 / rank, f"first relevant chunk at rank {rank}") if rank else (0.0, "no relevant chunk")


class ContextRecall(JudgeEvaluator):
    """Statements of the expected answer attributable to the retrieved context / statements.

    Threshold 0.75, higher is better.
    """

    name = "context_recall"
    prompt_name = "context_recall"

    def __init__(
        self, judge: Judge | None = None, *, expected: str | None = None, threshold: float | None = None
    ) -> None:
        """Configure the evaluator.

        Args:
            judge: The judge.
            expected: The expected answer; default the case's.
            threshold: Override of 0.75.
        """
        super().__init__(judge, threshold=threshold)
        self.expected = expected

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question (if any), numbered context and expected answer."""
        return {
            "question": _optional_question(trace),
            "context": numbered(context_chunks(trace)),
            "expected_answer": expected_answer(case, self.expected),
        }

    def parse(self, text: str) -> list[dict[str, Any]]:
        """Require statements with a boolean ``attributed``."""
        statements = object_list(json_object(text), "statements")
        for statement in statements:
            statement["attributed"] = flag(statement, "attributed")
        return statements

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Share of attributed statements."""
        attributed = sum(1 for s in parsed if s["attributed"])
        score = attributed / len(parsed) if parsed else 0.0
        reason = f"{attributed}/{len(parsed)} expected statements found in the context"
        return Verdict(passes(score, self.threshold, self.direction), score, reason, {"statements": parsed})
