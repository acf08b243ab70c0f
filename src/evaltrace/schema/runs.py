"""Run summaries and comparisons (data-model.md part A, ``summary.yaml``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaltrace.schema._base import SchemaModel, UtcDatetime, VersionedModel


class VariantSummary(SchemaModel):
    """How one variant did over all cases of a run.

    Each (case, variant) has one outcome: *passed* (judged, nothing failed), *failed* (the system errored or an
    evaluator judged it failed), *eval error* (an evaluation errored and none failed it: no verdict) or *not
    evaluated* (every evaluator skipped). ``pass_rate`` is passed / (passed + failed): errors and not-evaluated
    cases leave the denominator; with no judged case it is 0.0 and ``cases_passed + cases_failed == 0`` says
    "not evaluated". The four counts are None in summaries written before they existed.
    """

    name: str
    cases_total: int
    cases_passed: int
    cases_errored: int
    """Cases where the system itself failed (``Trace.error``); they count as failed."""
    pass_rate: float
    avg_latency_ms: float
    avg_cost_usd: float | None = None
    avg_tokens_input: float | None = None
    avg_tokens_output: float | None = None
    cases_failed: int | None = None
    cases_eval_errors: int | None = None
    cases_not_evaluated: int | None = None
    not_evaluated_reasons: dict[str, int] = Field(default_factory=dict)
    """Why cases were not evaluated (``"evaluator: skip reason"``) -> how many cases."""


class EvaluatorVariantRollup(SchemaModel):
    """One evaluator's figures on one variant.

    ``pass_rate`` is over judged results only (status completed): errored (status failed) and skipped results
    are counted apart. With nothing judged it is 0.0 and ``passed + failed == 0``. The counts are None in
    summaries written before they existed.
    """

    pass_rate: float
    avg_score: float | None = None
    passed: int | None = None
    failed: int | None = None
    errors: int | None = None
    not_evaluated: int | None = None
    skip_reasons: dict[str, int] = Field(default_factory=dict)


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
    unverified: list[str] = Field(default_factory=list)
    """Case ids that passed on the baseline and have no verdict here (evaluation error, not evaluated)."""
    not_evaluated: bool = False
    """One side judged no case: ``pass_rate_delta`` (0.0) means nothing."""


class ComparisonReport(SchemaModel):
    """Variants compared with a baseline variant (ad hoc) or with a baseline run (drift)."""

    baseline: str
    """Baseline variant name, or the baseline run id for drift."""
    deltas: list[VariantDelta] = Field(default_factory=list)
    kind: Literal["ad_hoc", "drift"] = "ad_hoc"
    baseline_run_id: str | None = None
    regressions_count: int | None = None
    improvements_count: int | None = None
    unverified_count: int | None = None


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
