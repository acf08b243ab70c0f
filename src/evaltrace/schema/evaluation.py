"""The Evaluation record and its aggregates (data-model.md part B)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, model_validator

from evaltrace.schema._base import SchemaModel, UtcDatetime, utcnow

EvaluationStatus = Literal["completed", "failed", "skipped", "pending"]
SummaryMethod = Literal["weighted_average", "simple_average", "minimum", "custom"]
BatchStatus = Literal["pending", "processing", "completed", "failed"]


def new_evaluation_id() -> str:
    """Return a fresh evaluation id, ``"eval_"`` followed by a uuid4."""
    return f"eval_{uuid.uuid4()}"


class EvaluationErrorInfo(SchemaModel):
    """Why an evaluation failed."""

    type: str
    message: str
    code: str | None = None
    context: dict[str, Any] | None = None


class Evaluation(SchemaModel):
    """One evaluator's judgement of one span or trace, with its metadata.

    Fields this model (or the typed record being loaded, e.g. :class:`QualityEvaluation`) does not know are kept in
    ``metadata`` under their own names rather than dropped: a custom evaluator's ``risk_level`` or a newer
    release's field survives a load and a save. A key already in ``metadata`` wins over a loose field of the same
    name.
    """

    evaluation_id: str = Field(default_factory=new_evaluation_id)
    target_event_id: str
    """Span or trace id that was evaluated."""
    evaluator_name: str
    evaluator_version: str | None = None
    """Semantic version, e.g. ``"v1.2.0"``."""
    score: bool | int | float | str | None = None
    explanation: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    criteria: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    timestamp: UtcDatetime = Field(default_factory=utcnow)
    duration_ms: float | None = None
    cost_usd: float | None = None
    status: EvaluationStatus = "completed"
    error: EvaluationErrorInfo | None = None

    @model_validator(mode="before")
    @classmethod
    def _keep_unknown_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        loose = {k: v for k, v in data.items() if k not in known}
        if not loose:
            return data
        metadata = data.get("metadata")
        kept = {**loose, **metadata} if isinstance(metadata, dict) else loose
        return {**{k: v for k, v in data.items() if k in known}, "metadata": kept}

    @property
    def numeric_score(self) -> float | None:
        """The score as a number (booleans as 1.0/0.0), or None for text or missing scores."""
        if isinstance(self.score, bool):
            return 1.0 if self.score else 0.0
        if isinstance(self.score, int | float):
            return float(self.score)
        return None


class MultiEvaluationResult(SchemaModel):
    """Several evaluations of one target and their summary score.

    A ``summary_score`` that is given is kept as given (it is what its producer reported, whatever its method).
    When it is missing, it is computed on validation for every method except ``"custom"``, over the evaluations
    with a numeric or boolean score whose status is ``"completed"`` (:meth:`compute_summary`):

    * ``weighted_average``: sum(weight * score) / sum(weight); an evaluator missing from ``weights`` (or all
      of them when ``weights`` is None) has weight 1.0; None when the total weight is 0;
    * ``simple_average``: the arithmetic mean;
    * ``minimum``: the lowest score.

    With no scored evaluation the summary is None.

    Each evaluation is loaded as its typed record (:func:`~evaltrace.schema.evaluation_types.evaluation_record`),
    and one written without ``target_event_id`` (as in a compact listing) takes the result's own.
    """

    target_event_id: str
    evaluations: list[SerializeAsAny[Evaluation]] = Field(default_factory=list)
    summary_score: float | None = None
    summary_method: SummaryMethod = "weighted_average"
    weights: dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _typed_evaluations(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("evaluations"), list):
            target = data.get("target_event_id")
            data = {**data, "evaluations": [_typed(item, target) for item in data["evaluations"]]}
        return data

    @model_validator(mode="after")
    def _summarise(self) -> MultiEvaluationResult:
        if self.summary_score is None and self.summary_method != "custom":
            self.summary_score = self.compute_summary()
        return self

    def compute_summary(self) -> float | None:
        """Return the summary score for ``summary_method`` (None for ``"custom"`` or nothing to summarise)."""
        scored = [
            (e.evaluator_name, s)
            for e in self.evaluations
            if e.status == "completed" and (s := e.numeric_score) is not None
        ]
        if not scored or self.summary_method == "custom":
            return None
        values = [s for _, s in scored]
        if self.summary_method == "minimum":
            return min(values)
        if self.summary_method == "simple_average":
            return sum(values) / len(values)
        weights = self.weights or {}
        pairs = [(weights.get(name, 1.0), s) for name, s in scored]
        total = sum(w for w, _ in pairs)
        return sum(w * s for w, s in pairs) / total if total else None


class BatchMetadata(SchemaModel):
    """Bookkeeping of an evaluation batch."""

    batch_size: int | None = None
    """Defaults to the number of evaluations in the batch."""
    created_at: UtcDatetime = Field(default_factory=utcnow)
    evaluator_versions: dict[str, str] = Field(default_factory=dict)
    processing_time_ms: float | None = None


class EvaluationBatch(SchemaModel):
    """Evaluations processed together."""

    batch_id: str = Field(default_factory=lambda: f"batch_{uuid.uuid4()}")
    evaluations: list[SerializeAsAny[Evaluation]] = Field(default_factory=list)
    batch_metadata: BatchMetadata = Field(default_factory=BatchMetadata)
    status: BatchStatus = "pending"

    @model_validator(mode="before")
    @classmethod
    def _typed_evaluations(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("evaluations"), list):
            data = {**data, "evaluations": [_typed(item, None) for item in data["evaluations"]]}
        return data

    @model_validator(mode="after")
    def _fill_size(self) -> EvaluationBatch:
        if self.batch_metadata.batch_size is None:
            self.batch_metadata.batch_size = len(self.evaluations)
        return self


class RetryConfig(SchemaModel):
    """Retry policy for evaluators: delay = initial_delay_ms * backoff_multiplier ** attempt."""

    max_retries: int = Field(default=3, ge=0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)
    initial_delay_ms: int = Field(default=1000, ge=0)


class EvaluationConfig(SchemaModel):
    """Which evaluators run, with what settings, in parallel or not, with what timeout and retries."""

    evaluators: list[str] = Field(default_factory=list)
    evaluator_configs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    parallel_execution: bool = True
    timeout_ms: int | None = None
    retry_config: RetryConfig | None = Field(default_factory=RetryConfig)
    """None disables retries."""


def _typed(item: Any, target: Any) -> Any:
    """``item`` as the typed record of its evaluator (the target filled in when missing), as a load would make it.

    A plain Evaluation of a typed kind is converted too, so a result built in Python equals itself read back.
    """
    from evaltrace.schema.evaluation_types import evaluation_record, record_class

    if type(item) is Evaluation and record_class(item.evaluator_name) is not Evaluation:
        item = item.model_dump()
    if not isinstance(item, dict):
        return item
    if "target_event_id" not in item and isinstance(target, str):
        item = {**item, "target_event_id": target}
    return evaluation_record(item)
