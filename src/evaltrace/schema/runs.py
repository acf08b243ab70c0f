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
    cases leave the denominator; with no judged case it is None (``null``: nothing was judged, which is not 0%).
    Summaries written before that gave 0.0 with ``cases_passed + cases_failed == 0``. The four counts are None in
    summaries written before they existed.
    """

    name: str
    cases_total: int
    cases_passed: int
    cases_errored: int
    """Cases where the system itself failed (``Trace.error``); they count as failed."""
    pass_rate: float | None
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
    are counted apart. With nothing judged it is None (older summaries: 0.0 with ``passed + failed == 0``). The
    counts are None in summaries written before they existed.
    """

    pass_rate: float | None
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


CellOutcome = Literal["pass", "fail", "error", "not_evaluated"]
"""The outcome of one evaluation result or one (case, variant); see ``evaltrace.runner.summary``."""


class EvaluatorVerdict(SchemaModel):
    """One evaluator's word on one (case, variant): its outcome, score and reason (or error / skip reason)."""

    evaluator: str
    outcome: CellOutcome
    score: float | None = None
    reason: str = ""
    error_type: str | None = None
    """``error.type`` of an evaluation that errored (``timeout``, ``exception``, ...)."""


class CaseReport(SchemaModel):
    """A (case, variant) that did not pass: what said so, and where its trace is.

    ``evaluators`` holds the results behind the outcome: the failing ones for ``fail``, the errored ones for
    ``error``, every skip for ``not_evaluated`` (empty when no evaluator applies).
    """

    case_id: str
    variant: str
    outcome: CellOutcome
    system_error: str | None = None
    """``"<type>: <message>"`` when the system itself failed (``Trace.error``)."""
    evaluators: list[EvaluatorVerdict] = Field(default_factory=list)
    trace_id: str | None = None
    """The OTel trace id of the case's execution (``Trace.extra.trace_id``)."""
    trace_line: int | None = None
    """1-based line of the case's Trace in the run's ``traces.jsonl``."""


class EvaluatorChange(SchemaModel):
    """How one evaluator's verdict on a case moved between the baseline and now (None: not known there)."""

    evaluator: str
    before: EvaluatorVerdict | None = None
    now: EvaluatorVerdict | None = None


class CaseChange(SchemaModel):
    """A case whose outcome moved against the baseline, and the evaluators that moved it."""

    case_id: str
    kind: Literal["regression", "improvement", "unverified"]
    before: CellOutcome
    now: CellOutcome
    system_error: str | None = None
    """The system's failure now (``Trace.error``), if any."""
    evaluators: list[EvaluatorChange] = Field(default_factory=list)
    """Evaluators whose verdict differs; when the baseline's results are not at hand, ``before`` is None."""
    trace_line: int | None = None
    """Line of the case's Trace (now) in the run's ``traces.jsonl``."""


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
    changes: list[CaseChange] = Field(default_factory=list)
    """What changed in each regressed, improved and unverified case (empty in older summaries)."""


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


class EvaluatorInsightSummary(SchemaModel):
    """What one evaluator says about the run (from :func:`evaltrace.evaluators.run_insights`)."""

    evaluator: str
    best_variant: str | None = None
    hardest_case: str | None = None
    """The case this evaluator failed on the most variants."""
    hardest_case_failures: int = 0
    average_by_variant: dict[str, float | None] = Field(default_factory=dict)


class FailureSplit(SchemaModel):
    """Failed (case, variant) cells by cause.

    ``retrieval``: only context-retrieval evaluators failed it; ``generation``: only the others; ``both``;
    ``system``: the system raised.
    """

    retrieval: int = 0
    generation: int = 0
    both: int = 0
    system: int = 0


class RunInsightsSummary(SchemaModel):
    """Run-level insights: best variant, hardest case, cheapest / fastest variant, and problems.

    ``best_variant`` has the highest case pass rate among variants that judged a case and on which an evaluator
    judged something (ties: faster, then name); ``hardest_case`` failed on the most variants. ``problems`` are averages on the wrong side of an
    evaluator's threshold and verdicts that flip between a case and its perturbation (``metadata.perturbation_of``).
    """

    best_variant: str | None = None
    hardest_case: str | None = None
    hardest_case_failures: int = 0
    cheapest_variant: str | None = None
    most_expensive_variant: str | None = None
    fastest_variant: str | None = None
    evaluators: list[EvaluatorInsightSummary] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    least_accurate_variant: str | None = None
    """The judged variant with the lowest case pass rate (set with two judged variants or more)."""
    slowest_variant: str | None = None
    best_retrieval_variant: str | None = None
    """Highest average score of the context-retrieval (``context_*``) evaluators."""
    worst_retrieval_variant: str | None = None
    retrieval_average_by_variant: dict[str, float] = Field(default_factory=dict)
    failure_split: FailureSplit | None = None
    dimension_averages: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per variant, each rubric dimension's average score (metrics reference ``dimension_averages``)."""
    complexity_distribution: dict[str, int] = Field(default_factory=dict)
    """Cases per ``metadata.complexity``; a case without one counts as ``medium``."""
    explanations: list[str] = Field(default_factory=list)
    """One sentence per insight with the figures behind it."""


class CaseSelection(SchemaModel):
    """Which cases of the dataset a run used (``evaltrace run --case/--tag/--where/--sample/--limit``).

    The criteria are kept as given; ``selected`` lists the chosen case ids in dataset order, so a resume or a
    re-evaluation uses exactly these cases without selecting again.
    """

    cases: list[str] = Field(default_factory=list)
    """Case ids or globs (any of them)."""
    tags: list[str] = Field(default_factory=list)
    """Tags in ``metadata.tags`` (any of them)."""
    where: list[str] = Field(default_factory=list)
    """``dotted.path=value`` conditions into the case (all of them)."""
    sample: int | None = None
    seed: int | None = None
    limit: int | None = None
    cases_total: int = 0
    """How many cases the dataset had."""
    selected: list[str] = Field(default_factory=list)


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
    failed_cases: list[CaseReport] = Field(default_factory=list)
    """Every (case, variant) that failed, with the failing evaluators' reasons or the system's error."""
    eval_error_cases: list[CaseReport] = Field(default_factory=list)
    """Every (case, variant) with no verdict because an evaluation errored."""
    not_evaluated_cases: list[CaseReport] = Field(default_factory=list)
    """Every (case, variant) no evaluator judged, with the skip reasons."""
    insights: RunInsightsSummary | None = None
    selection: CaseSelection | None = None
    """Set when the run used part of the dataset."""
