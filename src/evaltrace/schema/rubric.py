"""Weighted rubric scoring (data-model.md part D)."""

from __future__ import annotations

import enum
from collections.abc import Mapping

from pydantic import Field

from evaltrace.schema._base import SchemaModel

PASS_THRESHOLD = 0.7
_EPSILON = 1e-9  # 0.7 * 0.1 / 0.1 is 0.6999999999999998 in floating point; that still passes 0.7


class RubricLevel(enum.Enum):
    """Named levels of a dimension; ``.score`` is the level's value in [0, 1]."""

    EXCELLENT = "excellent"
    GOOD = "good"
    ACCEPTABLE = "acceptable"
    POOR = "poor"
    FAILED = "failed"

    @property
    def score(self) -> float:
        """The level's score: excellent 1.0, good 0.8, acceptable 0.6, poor 0.3, failed 0.0."""
        return _LEVEL_SCORES[self]


_LEVEL_SCORES: dict[RubricLevel, float] = {
    RubricLevel.EXCELLENT: 1.0,
    RubricLevel.GOOD: 0.8,
    RubricLevel.ACCEPTABLE: 0.6,
    RubricLevel.POOR: 0.3,
    RubricLevel.FAILED: 0.0,
}


class RubricDimension(SchemaModel):
    """One scored aspect of an answer, with its weight."""

    name: str
    weight: float = Field(gt=0.0)
    description: str = ""


class RubricResult(SchemaModel):
    """A rubric applied to one answer."""

    overall: float
    passed: bool
    dimension_scores: dict[str, float] = Field(default_factory=dict)
    """Scores of the dimensions that were present."""


class Rubric(SchemaModel):
    """Weighted dimensions; overall = sum(score * weight) / sum(weight) over the dimensions scored."""

    name: str = "rubric"
    dimensions: list[RubricDimension]
    threshold: float = PASS_THRESHOLD

    def evaluate(self, scores: Mapping[str, float | RubricLevel]) -> RubricResult:
        """Score an answer from per-dimension scores.

        Dimensions missing from ``scores`` are left out of both sums (they neither help nor hurt); with no
        dimension present the overall score is 0.0. ``passed`` allows for floating-point error (1e-9).

        Args:
            scores: Dimension name to a score in [0, 1] or a RubricLevel.

        Returns:
            The overall score and whether it reaches the threshold.

        Raises:
            ValueError: A name is not a dimension of this rubric, or a score is outside [0, 1].
        """
        known = {d.name: d.weight for d in self.dimensions}
        present: dict[str, float] = {}
        for name, raw in scores.items():
            if name not in known:
                raise ValueError(f"{name!r} is not a dimension of rubric {self.name!r} ({', '.join(known)})")
            value = raw.score if isinstance(raw, RubricLevel) else float(raw)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"score of {name!r} must be in [0, 1], got {value}")
            present[name] = value
        total = sum(known[name] for name in present)
        overall = sum(value * known[name] for name, value in present.items()) / total if total else 0.0
        return RubricResult(overall=overall, passed=overall >= self.threshold - _EPSILON, dimension_scores=present)

    def overall(self, scores: Mapping[str, float | RubricLevel]) -> float:
        """Return the overall score only (see :meth:`evaluate`)."""
        return self.evaluate(scores).overall


DEFAULT_AGENT_RUBRIC = Rubric(
    name="agent",
    dimensions=[
        RubricDimension(name="factual_accuracy", weight=0.30, description="Claims match the ground truth."),
        RubricDimension(name="completeness", weight=0.25, description="Every requested aspect is covered."),
        RubricDimension(name="citation_accuracy", weight=0.15, description="Citations match their sources."),
        RubricDimension(name="source_quality", weight=0.10, description="Primary sources are preferred."),
        RubricDimension(name="tool_efficiency", weight=0.20, description="Right tools, reasonable call count."),
    ],
)
"""The default agent rubric of data-model.md part D."""
