"""The default agent rubric as one evaluator: runs its dimension evaluators and reports the weighted overall."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

from evaltrace.evaluators._base import CODE_VERSION, Direction, Verdict, build_result, checked_threshold
from evaltrace.evaluators.grading import CitationAccuracy, Completeness, FactualAccuracy, SourceQuality
from evaltrace.evaluators.judge import Judge
from evaltrace.evaluators.tools import ToolEfficiency
from evaltrace.schema import DEFAULT_AGENT_RUBRIC, EvalCase, EvaluationResult, EvaluationStatus, Rubric, Trace


async def run_evaluator(evaluator: Any, trace: Trace, case: EvalCase | None) -> EvaluationResult:
    """Run a sync or async evaluator and return its result."""
    result = evaluator.evaluate(trace, case)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, EvaluationResult):
        raise TypeError(f"{evaluator!r} returned {type(result).__name__}, not EvaluationResult")
    return result


def _unit_score(result: EvaluationResult) -> float:
    """A dimension's score in [0, 1]: an evaluator scoring on a scale (``llm_judge``) gives its normalised score."""
    normalized = result.detail.get("normalized_score")
    if isinstance(normalized, int | float) and not isinstance(normalized, bool):
        return float(normalized)
    return float(result.score or 0.0)


class AgentRubric:
    """Weighted rubric over dimension evaluators; by default the agent rubric of data-model.md part D.

    Dimensions: factual_accuracy 0.30, completeness 0.25, citation_accuracy 0.15, source_quality 0.10,
    tool_efficiency 0.20. Overall = Σ score·weight / Σ weight over the dimensions that produced a score (a
    skipped or failed dimension is left out and listed); passes when overall ≥ 0.7. Each dimension's result is in
    ``detail["dimensions"]``. Judge costs are summed.
    """

    name = "agent_rubric"
    direction: Direction = "higher"
    evaluator_type = "rubric"

    def __init__(
        self,
        judge: Judge | None = None,
        *,
        rubric: Rubric = DEFAULT_AGENT_RUBRIC,
        evaluators: Mapping[str, Any] | None = None,
        name: str | None = None,
        threshold: float | None = None,
    ) -> None:
        """Configure the rubric.

        Args:
            judge: The judge for the default judged dimensions.
            rubric: Dimensions, weights and pass threshold.
            evaluators: Dimension name to evaluator; default the built-in evaluator of each default dimension.
            name: Evaluator name (default ``agent_rubric``).
            threshold: Lowest passing overall score in [0, 1]; overrides the rubric's (0.7 by default).

        Raises:
            ValueError: A rubric dimension has no evaluator, or a threshold outside [0, 1].
        """
        if threshold is not None:
            rubric = rubric.model_copy(update={"threshold": checked_threshold(threshold)})
        self.rubric = rubric
        self.threshold = rubric.threshold
        self.name = name or self.name
        defaults: dict[str, Any] = (
            {
                "factual_accuracy": FactualAccuracy(judge),
                "completeness": Completeness(judge),
                "citation_accuracy": CitationAccuracy(judge),
                "source_quality": SourceQuality(judge),
                "tool_efficiency": ToolEfficiency(),
            }
            if evaluators is None
            else dict(evaluators)
        )
        missing = [d.name for d in rubric.dimensions if d.name not in defaults]
        if missing:
            raise ValueError(f"no evaluator for rubric dimension(s) {missing}")
        self.evaluators = {d.name: defaults[d.name] for d in rubric.dimensions}

    @property
    def version(self) -> str:
        """Code version plus a short hash of the rubric and every dimension evaluator's version."""
        parts = [
            f"{d.name}:{d.weight}:{getattr(self.evaluators[d.name], 'version', '')}" for d in self.rubric.dimensions
        ]
        digest = hashlib.sha256(f"{self.rubric.threshold}|{'|'.join(parts)}".encode()).hexdigest()[:8]
        return f"{CODE_VERSION}+rubric.{digest}"

    async def evaluate(self, trace: Trace, case: EvalCase | None = None) -> EvaluationResult:
        """Run every dimension concurrently and combine their scores.

        Args:
            trace: What the system did.
            case: The dataset case.

        Returns:
            The overall result.
        """
        names = list(self.evaluators)
        results = await asyncio.gather(*(run_evaluator(self.evaluators[n], trace, case) for n in names))
        scored = {
            n: _unit_score(r)
            for n, r in zip(names, results, strict=True)
            if r.status == "completed" and r.score is not None
        }
        outcome = self.rubric.evaluate(scored)
        left_out = [n for n in names if n not in scored]
        dimensions = {
            n: {
                "score": r.score,
                "passed": r.passed,
                "status": r.status,
                "reason": r.reason,
                "weight": w.weight,
                "version": r.evaluator_version,
            }
            for n, r, w in zip(names, results, self.rubric.dimensions, strict=True)
        }
        costs = [r.cost_usd for r in results if r.cost_usd is not None]
        reason = f"overall {outcome.overall:.2f} over {len(scored)}/{len(names)} dimensions"
        if left_out:
            reason += f" (not scored: {', '.join(left_out)})"
        detail = {"overall": outcome.overall, "dimensions": dimensions, "not_scored": left_out}
        verdict = Verdict(outcome.passed and bool(scored), outcome.overall, reason, detail)
        status: EvaluationStatus = "completed" if scored else "failed"
        return build_result(
            self,
            trace,
            verdict,
            evaluator_type=self.evaluator_type,
            status=status,
            cost_usd=sum(costs) if costs else None,
        )
