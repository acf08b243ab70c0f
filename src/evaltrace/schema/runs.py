"""Run summaries and comparisons (data-model.md part A, ``summary.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaltrace.schema._base import SchemaModel, UtcDatetime, VersionedModel


class VariantSummary(SchemaModel):
    """How one variant did over all cases of a run."""

    name: str
    cases_total: int
    cases_passed: int
    cases_errored: int
    pass_rate: float
    avg_latency_ms: float
    avg_cost_usd: float | None = None
    avg_tokens_input: float | None = None
    avg_tokens_output: float | None = None


class EvaluatorVariantRollup(SchemaModel):
    """One evaluator's figures on one variant."""

    pass_rate: float
    avg_score: float | None = None


class EvaluatorRollup(SchemaModel):
    """One evaluator's figures, per variant name."""

    evaluator: str
    by_variant: dict[str, EvaluatorVariantRollup] = Field(default_factory=dict)


class VariantDelta(SchemaModel):
    """How a variant differs from the baseline; regressions pass on the baseline and fail here."""

    variant: str
    pass_rate_delta: float
    avg_latency_delta_ms: float
    regressions: list[str] = Field(default_factory=list)
    """Case ids."""
    improvements: list[str] = Field(default_factory=list)
    """Case ids."""


class ComparisonReport(SchemaModel):
    """Variants compared with a baseline variant (ad hoc) or with a baseline run (drift)."""

    baseline: str
    """Baseline variant name, or the baseline run id for drift."""
    deltas: list[VariantDelta] = Field(default_factory=list)
    kind: Literal["ad_hoc", "drift"] = "ad_hoc"
    baseline_run_id: str | None = None
    regressions_count: int | None = None
    improvements_count: int | None = None


class RunSummary(VersionedModel):
    """The ``summary.yaml`` of a run; regenerable from traces.jsonl and results.jsonl."""

    run_id: str
    started_at: UtcDatetime
    finished_at: UtcDatetime
    config_path: str
    config_hash: str
    cases_total: int
    variants: list[VariantSummary] = Field(default_factory=list)
    by_evaluator: list[EvaluatorRollup] = Field(default_factory=list)
    comparison: ComparisonReport | None = None
