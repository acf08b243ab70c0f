"""Answer-quality evaluators: correctness against the expected answer, relevancy to the question, similarity."""

from __future__ import annotations

from typing import Any

from evaltrace.evaluators._base import (
    DEFAULT_FIELD,
    MissingInputError,
    Verdict,
    expected_answer,
    passes,
    question_text,
)
from evaltrace.evaluators._judged import (
    NOT_GIVEN,
    EmbeddingEvaluator,
    JudgeEvaluator,
    embed_or_fail,
    embedder_name,
    flag,
    json_object,
    object_list,
)
from evaltrace.evaluators._text import split_sentences
from evaltrace.evaluators.embeddings import Embedder, cosine, default_embedder
from evaltrace.evaluators.judge import Judge
from evaltrace.schema import EvalCase, Trace


def statement_f1(tp: int, fp: int, fn: int) -> float:
    """Return TP / (TP + 0.5 (FP + FN)); 0.0 when there is no statement at all."""
    denominator = tp + 0.5 * (fp + fn)
    return tp / denominator if denominator else 0.0


class AnswerCorrectness(JudgeEvaluator):
    """0.75 × statement F1 + 0.25 × semantic similarity of the answer to the expected answer.

    The judge classifies statements as TP (in both), FP (only in the answer), FN (only in the expected answer);
    F1 = TP / (TP + 0.5 (FP + FN)). Similarity is the cosine of the two embeddings. Weights are configurable;
    with a similarity weight of 0 no embedding is made. Threshold 0.75, higher is better.
    """

    name = "answer_correctness"
    prompt_name = "answer_correctness"

    def __init__(
        self,
        judge: Judge | None = None,
        *,
        embedder: Embedder | None = None,
        weights: tuple[float, float] = (0.75, 0.25),
        expected: str | None = None,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the evaluator.

        Args:
            judge: The judge.
            embedder: For the similarity part; default the shared OpenAI embedder (unused when its weight is 0).
            weights: (F1 weight, similarity weight).
            expected: The expected answer; default the case's.
            threshold: Override of 0.75.
            field: Dotted path of the Trace judged as the answer (default ``output.final_answer``).
        """
        super().__init__(judge, threshold=threshold, field=field)
        self.weights = weights
        self.expected = expected
        self.embedder: Embedder | None = embedder if embedder is not None or not weights[1] else default_embedder()

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """Question, answer and expected answer."""
        try:
            question = question_text(trace)
        except MissingInputError:
            question = NOT_GIVEN
        return {
            "question": question,
            "answer": self.answer(trace),
            "expected_answer": expected_answer(case, self.expected),
        }

    def parse(self, text: str) -> dict[str, list[dict[str, Any]]]:
        """Require the TP, FP and FN lists."""
        data = json_object(text)
        return {key: object_list(data, key) for key in ("TP", "FP", "FN")}

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Combine F1 and similarity."""
        tp, fp, fn = (len(parsed[key]) for key in ("TP", "FP", "FN"))
        f1 = statement_f1(tp, fp, fn)
        similarity, model = None, None
        if self.weights[1] and self.embedder is not None:
            a, e = await embed_or_fail(self.embedder, [self.answer(trace), expected_answer(case, self.expected)])
            similarity = cosine(a, e)
            model = embedder_name(self.embedder)
        w_f1, w_sim = self.weights
        score = f1 if similarity is None else (w_f1 * f1 + w_sim * similarity) / (w_f1 + w_sim)
        detail = {
            "f1": f1,
            "similarity": similarity,
            "weights": list(self.weights),
            "statements": parsed,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "embedding_model": model,
        }
        reason = f"F1 {f1:.2f} (TP {tp}, FP {fp}, FN {fn})" + (
            "" if similarity is None else f", similarity {similarity:.2f}"
        )
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)


class AnswerRelevancy(JudgeEvaluator):
    """The judge writes N questions the answer would answer; score = mean cosine(question, generated question).

    A noncommittal answer scores 0. Needs an embedder. Threshold 0.75, higher is better.
    """

    name = "answer_relevancy"
    prompt_name = "answer_relevancy"

    def __init__(
        self,
        judge: Judge | None = None,
        *,
        embedder: Embedder | None = None,
        n: int = 3,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the evaluator.

        Args:
            judge: The judge.
            embedder: Embeds the questions; default the shared OpenAI embedder.
            n: Questions to generate.
            threshold: Override of 0.75.
            field: Dotted path of the Trace judged as the answer (default ``output.final_answer``).
        """
        super().__init__(judge, threshold=threshold, field=field)
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self.n = n

    def variables(self, trace: Trace, case: EvalCase | None) -> dict[str, str]:
        """The answer and N (the question is compared later, not shown to the judge)."""
        question_text(trace)  # fail early (skipped) when there is no question to compare with
        return {"answer": self.answer(trace), "n": str(self.n)}

    def parse(self, text: str) -> dict[str, Any]:
        """Require a non-empty list of question strings and the noncommittal flag."""
        data = json_object(text)
        questions = data["questions"]
        if not isinstance(questions, list) or not questions or not all(isinstance(q, str) for q in questions):
            raise TypeError("'questions' must be a non-empty list of strings")
        return {"questions": questions, "noncommittal": flag(data, "noncommittal") if "noncommittal" in data else False}

    async def verdict(self, parsed: Any, trace: Trace, case: EvalCase | None) -> Verdict:
        """Mean cosine of the original question to the generated ones."""
        question = question_text(trace)
        vectors = await embed_or_fail(self.embedder, [question, *parsed["questions"]])
        similarities = [cosine(vectors[0], v) for v in vectors[1:]]
        mean = sum(similarities) / len(similarities)
        score = 0.0 if parsed["noncommittal"] else mean
        detail = {
            "generated_questions": parsed["questions"],
            "similarities": similarities,
            "noncommittal": parsed["noncommittal"],
            "embedding_model": embedder_name(self.embedder),
        }
        reason = "noncommittal answer" if parsed["noncommittal"] else f"mean question similarity {mean:.2f}"
        return Verdict(passes(score, self.threshold, self.direction), score, reason, detail)


class AnswerRelevancySentences(EmbeddingEvaluator):
    """Max over answer sentences of cosine(emb(question), emb(sentence)). Threshold 0.75, higher is better."""

    name = "answer_relevancy_sentences"

    async def measure(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Embed the question and each answer sentence."""
        question = question_text(trace)
        sentences = split_sentences(self.answer(trace)) or [self.answer(trace)]
        vectors = await embed_or_fail(self.embedder, [question, *sentences])
        similarities = [cosine(vectors[0], v) for v in vectors[1:]]
        best = max(similarities)
        detail = {"similarities": similarities, "best_sentence_index": similarities.index(best)}
        return Verdict(
            passes(best, self.threshold, self.direction), best, f"best sentence similarity {best:.2f}", detail
        )


class SemanticSimilarity(EmbeddingEvaluator):
    """Cosine of the embeddings of the answer and the expected answer. Threshold 0.75, higher is better.

    With ``sentences=True`` (or :class:`SemanticSimilaritySentences`): for each answer sentence the best cosine to
    an expected-answer sentence; score = mean of those, ``detail.min`` the weakest.
    """

    name = "semantic_similarity"

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        expected: str | None = None,
        sentences: bool = False,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the evaluator.

        Args:
            embedder: Any embedder; default the shared OpenAI embedder.
            expected: The expected answer; default the case's.
            sentences: Compare sentence by sentence.
            threshold: Override of 0.75.
            field: Dotted path of the Trace compared as the answer (default ``output.final_answer``).
        """
        super().__init__(embedder, threshold=threshold, field=field)
        self.expected = expected
        self.sentences = sentences
        if sentences:
            self.name = "semantic_similarity_sentences"

    async def measure(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Embed and compare."""
        answer, expected = self.answer(trace), expected_answer(case, self.expected)
        if not self.sentences:
            a, e = await embed_or_fail(self.embedder, [answer, expected])
            score = cosine(a, e)
            return Verdict(passes(score, self.threshold, self.direction), score, f"similarity {score:.2f}", {})
        mine = split_sentences(answer) or [answer]
        theirs = split_sentences(expected) or [expected]
        vectors = await embed_or_fail(self.embedder, [*mine, *theirs])
        best = [max(cosine(v, w) for w in vectors[len(mine) :]) for v in vectors[: len(mine)]]
        mean, low = sum(best) / len(best), min(best)
        detail = {"mean": mean, "min": low, "per_sentence": best}
        return Verdict(passes(mean, self.threshold, self.direction), mean, f"mean {mean:.2f}, min {low:.2f}", detail)


class SemanticSimilaritySentences(SemanticSimilarity):
    """Sentence variant of :class:`SemanticSimilarity` (mean and min over sentence pairs)."""

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        expected: str | None = None,
        threshold: float | None = None,
        field: str = DEFAULT_FIELD,
    ) -> None:
        """Configure the evaluator (see :class:`SemanticSimilarity`)."""
        super().__init__(embedder, expected=expected, sentences=True, threshold=threshold, field=field)
