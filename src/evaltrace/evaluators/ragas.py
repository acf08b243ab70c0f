"""Ragas: one score from faithfulness, answer relevancy, context precision and context recall, our own parts."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, ClassVar

from evaltrace.evaluators._base import (
    CODE_VERSION,
    Direction,
    Subject,
    Verdict,
    build_result,
    passes,
    require_trace,
    skipped_result,
)
from evaltrace.evaluators._judged import failed_result
from evaltrace.evaluators.answer import AnswerRelevancy
from evaltrace.evaluators.composite import run_evaluator
from evaltrace.evaluators.embeddings import Embedder
from evaltrace.evaluators.judge import Judge
from evaltrace.evaluators.rag import ContextPrecision, ContextRecall, Faithfulness
from evaltrace.schema import EvalCase, EvaluationResult, Trace

PARTS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
"""The four metrics Ragas combines, in the order they are reported."""


def harmonic_mean(values: list[float]) -> float:
    """Return the harmonic mean of scores in [0, 1]; any zero makes it 0 (a part that failed outright)."""
    if any(v <= 0.0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


class Ragas:
    """Harmonic mean of faithfulness, answer relevancy, context precision and context recall. Threshold 0.75.

    Each part is our own evaluator, run concurrently (identical judge prompts are shared through the judge's
    cache). The combination needs all four: a part not evaluated (no question, context or expected answer) makes
    Ragas not evaluated, and a part whose judge or embedder failed makes Ragas an error, never a low score. The
    four part results are in ``detail["parts"]``; judge costs are summed.
    """

    name = "ragas"
    threshold = 0.75
    direction: Direction = "higher"
    evaluator_type = "judge"
    subjects: ClassVar[frozenset[str]] = frozenset({"trace"})

    def __init__(
        self, judge: Judge | None = None, *, embedder: Embedder | None = None, threshold: float | None = None
    ) -> None:
        """Configure the parts.

        Args:
            judge: The judge shared by the four parts.
            embedder: Embeds answer relevancy's generated questions; default the shared OpenAI embedder.
            threshold: Override of 0.75 for the combined score (each part keeps its own).

        Raises:
            ValueError: ``threshold`` is outside [0, 1].
        """
        if threshold is not None:
            if not 0.0 <= threshold <= 1.0:
                raise ValueError(f"threshold must be within [0, 1], got {threshold!r}")
            self.threshold = threshold
        relevancy = AnswerRelevancy(judge, embedder=embedder)
        self.embedder = relevancy.embedder  # the one answer relevancy uses (what eval.yaml's `embedder:` set)
        self.parts: dict[str, Any] = {
            "faithfulness": Faithfulness(judge),
            "answer_relevancy": relevancy,
            "context_precision": ContextPrecision(judge),
            "context_recall": ContextRecall(judge),
        }

    @property
    def version(self) -> str:
        """Code version plus a short hash of the parts' versions (a new prompt changes it)."""
        parts = "|".join(f"{n}:{getattr(e, 'version', '')}" for n, e in self.parts.items())
        return f"{CODE_VERSION}+ragas.{hashlib.sha256(parts.encode()).hexdigest()[:8]}"

    async def evaluate(self, trace: Subject, case: EvalCase | None = None) -> EvaluationResult:
        """Run the four parts and combine their scores.

        Args:
            trace: What the system did.
            case: The dataset case (context recall needs its expected answer).

        Returns:
            The combined result; ``skipped`` or ``failed`` as described on the class.

        Raises:
            WrongSubjectError: Given a session's Conversation.
        """
        one: Trace = require_trace(self, trace)
        results = await asyncio.gather(*(run_evaluator(self.parts[n], one, case) for n in PARTS))
        by_name = dict(zip(PARTS, results, strict=True))
        parts = {
            n: {"score": r.score, "passed": r.passed, "status": r.status, "reason": r.reason}
            for n, r in by_name.items()
        }
        costs = [r.cost_usd for r in results if r.cost_usd is not None]
        cost = sum(costs) if costs else None
        failed = [
            n for n, r in by_name.items() if r.status == "failed" or (r.status == "completed" and r.score is None)
        ]
        if failed:
            errors = "; ".join(f"{n}: {by_name[n].reason}" for n in failed)
            return failed_result(self, one, f"ragas part(s) errored: {errors}", {"parts": parts}, cost_usd=cost)
        skipped = [n for n, r in by_name.items() if r.status != "completed"]
        if skipped:
            why = "; ".join(f"{n}: {by_name[n].reason}" for n in skipped)
            return skipped_result(self, one, f"ragas needs all four parts; not evaluated: {why}")
        scores = {n: float(r.score) for n, r in by_name.items() if r.score is not None}
        score = harmonic_mean([scores[n] for n in PARTS])
        weakest = min(PARTS, key=lambda n: scores[n])
        reason = f"harmonic mean {score:.2f} of {len(PARTS)} parts (weakest {weakest} {scores[weakest]:.2f})"
        passed = passes(score, self.threshold, self.direction)
        verdict = Verdict(passed, score, reason, {"parts": parts, "weakest": weakest})
        return build_result(self, one, verdict, evaluator_type=self.evaluator_type, cost_usd=cost)

    def __repr__(self) -> str:
        return f"Ragas(threshold={self.threshold!r})"
