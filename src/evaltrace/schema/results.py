"""EvaluationResult: the one result shape every evaluator returns and every store persists."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field, computed_field, model_validator

from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema._base import UtcDatetime, VersionedModel, utcnow, whole_ms
from evaltrace.schema.evaluation import Evaluation, EvaluationErrorInfo, EvaluationStatus, new_evaluation_id
from evaltrace.schema.evaluation_types import record_class, typed_fields
from evaltrace.schema.scores import (
    Score,
    ScoreConfig,
    ScoreSource,
    dataset_run_score_id,
    score_id,
    session_score_id,
)
from evaltrace.schema.trace import TraceError

LABEL_KEY = "label"
"""Key of ``EvaluationResult.detail`` holding an evaluator's categorical label, if it gave one."""


class EvaluationResult(VersionedModel):
    """One evaluator's verdict on one (case, variant) trace: the canonical persisted result.

    Evaluators build it with the judgement only (``evaluator``, ``passed``, ``score``, ``reason``, ``detail``);
    the pipeline then fills ``run_id``/``case_id``/``variant_name`` and the timing with :meth:`stamped`.
    When only one of ``started_at``/``finished_at`` is given the other takes the same value; when neither is,
    both are "now". ``latency_ms`` is computed from them (a supplied value is ignored).

    The optional extras are the Evaluation-record fields (data-model.md part B); :meth:`to_evaluation` and
    :meth:`to_score` convert at the edges.
    """

    run_id: str = ""
    case_id: str = ""
    variant_name: str = ""
    evaluator: str
    evaluator_type: str = ""
    """Free-form kind (e.g. ``"deterministic"``, ``"llm_judge"``); summaries never branch on it."""
    passed: bool
    score: float | None = None
    reason: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)
    started_at: UtcDatetime = Field(default_factory=utcnow)
    finished_at: UtcDatetime = Field(default_factory=utcnow)
    error: TraceError | None = None
    evaluation_id: str = Field(default_factory=new_evaluation_id)
    evaluator_version: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    criteria: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    cost_usd: float | None = None
    status: EvaluationStatus = "completed"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def latency_ms(self) -> int:
        """``finished_at - started_at`` in whole milliseconds."""
        return whole_ms(self.started_at, self.finished_at)

    @model_validator(mode="before")
    @classmethod
    def _pair_timestamps(cls, data: Any) -> Any:
        if isinstance(data, dict):
            started, finished = data.get("started_at"), data.get("finished_at")
            if started is None and finished is None:
                now = utcnow()
                data = {**data, "started_at": now, "finished_at": now}
            elif started is None or finished is None:
                data = {**data, "started_at": started or finished, "finished_at": finished or started}
        return data

    @model_validator(mode="after")
    def _check_order(self) -> EvaluationResult:
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        return self

    def stamped(
        self,
        *,
        run_id: str | None = None,
        case_id: str | None = None,
        variant_name: str | None = None,
        started_at: dt.datetime | None = None,
        finished_at: dt.datetime | None = None,
        **updates: Any,
    ) -> EvaluationResult:
        """Return a validated copy with the pipeline's context filled in (None leaves a field unchanged).

        Args:
            run_id: Run the result belongs to.
            case_id: Evaluated case (the OTel trace id for live traces).
            variant_name: Evaluated variant (the service name for live traces).
            started_at: When the evaluator started.
            finished_at: When it finished.
            **updates: Other fields to replace (e.g. ``evaluator_version``, ``status``).

        Returns:
            The new result; ``self`` is unchanged.
        """
        given = {
            "run_id": run_id,
            "case_id": case_id,
            "variant_name": variant_name,
            "started_at": started_at,
            "finished_at": finished_at,
        }
        data = self.model_dump(exclude={"latency_ms"})
        data.update({k: v for k, v in given.items() if v is not None})
        data.update(updates)
        return type(self).model_validate(data)

    def to_evaluation(self, target_event_id: str, *, kind: str | None = None) -> Evaluation:
        """Convert to the Evaluation record of the span or trace ``target_event_id``, typed by its kind.

        The record type (:mod:`evaltrace.schema.evaluation_types`) follows ``kind`` (a catalogue type such as
        ``factual_accuracy``), else ``evaluator_type``, else the evaluator's name, else what ``detail`` holds
        (``dimensions``: quality; ``factual_claims``: factual accuracy). Its own fields are read from ``detail``:
        a quality record's ``dimensions`` take each dimension's score; a factual-accuracy record's claims are
        ``factual_claims`` (or ``claims``), ``hallucination_detected`` is True when a claim is refuted, and
        ``citation_accuracy``, when the evaluator did not give it, is the share of claims citing a source that
        were not refuted (None when no claim cites one).
        """
        error = None
        if self.error is not None:
            context = {"stack": self.error.stack} if self.error.stack else None
            error = EvaluationErrorInfo(type=self.error.type, message=self.error.message, context=context)
        record = record_class(
            kind,
            self.evaluator_type,
            self.evaluator,
            "quality" if "dimensions" in self.detail else None,
            "factual_accuracy" if "factual_claims" in self.detail else None,
        )
        base = {
            "evaluation_id": self.evaluation_id,
            "target_event_id": target_event_id,
            "evaluator_name": self.evaluator,
            "evaluator_version": self.evaluator_version,
            "score": self.score if self.score is not None else self.passed,
            "explanation": self.reason or None,
            "confidence": self.confidence,
            "criteria": self.criteria,
            "metadata": self.metadata,
            "timestamp": self.finished_at,
            "duration_ms": float(self.latency_ms),
            "cost_usd": self.cost_usd,
            "status": self.status,
            "error": error,
        }
        return record.model_validate({**base, **typed_fields(record, self.detail)})

    def to_score(
        self,
        *,
        trace_id: str | None = None,
        observation_id: str | None = None,
        session_id: str | None = None,
        dataset_run_id: str | None = None,
        config: ScoreConfig | None = None,
        source: ScoreSource = "EVAL",
        metadata: dict[str, Any] | None = None,
    ) -> Score:
        """Convert to a backend Score on exactly one target: a trace or span, a session, or a dataset run.

        The score id is deterministic, so re-sending updates in place: :func:`score_id` of (trace, span,
        evaluator, version) on a trace or observation, :func:`session_score_id` on a session,
        :func:`dataset_run_score_id` on a dataset run. Without a config the score is NUMERIC when ``score`` is
        set, else CATEGORICAL when the evaluator gave a label (``detail["label"]``), else BOOLEAN from
        ``passed``. With a config, the config decides the data type (BOOLEAN from ``passed``; CATEGORICAL from
        the label, else from ``score`` matched to a category; NUMERIC from ``score``) and the score must
        satisfy it.

        Args:
            trace_id: 32-hex OTel trace id (also required with ``observation_id``).
            observation_id: 16-hex span id when the score belongs to one span.
            session_id: The session the score judges (a conversation's ``session.id``).
            dataset_run_id: The dataset run the score describes (an offline run's variant).
            config: Optional ScoreConfig to validate against.
            source: Score source (``"EVAL"`` for evaluator output).
            metadata: Score metadata; defaults to ``{"evaluation_id", "evaluator_version"}``.

        Returns:
            The Score.

        Raises:
            ScoreValidationError: The result does not satisfy ``config``, or the targets are not exactly one.
        """
        targets = [t for t in (trace_id, session_id, dataset_run_id) if t is not None]
        if len(targets) != 1 or (observation_id is not None and trace_id is None):
            raise ScoreValidationError(
                f"score {self.evaluator!r}: give exactly one target: trace_id (with observation_id for a span),"
                " session_id or dataset_run_id"
            )
        if trace_id is not None:
            identity = score_id(trace_id, observation_id, self.evaluator, self.evaluator_version)
        elif session_id is not None:
            identity = session_score_id(session_id, self.evaluator, self.evaluator_version)
        else:
            identity = dataset_run_score_id(str(dataset_run_id), self.evaluator, self.evaluator_version)
        fields: dict[str, Any] = {
            "id": identity,
            "name": self.evaluator,
            "trace_id": trace_id,
            "observation_id": observation_id,
            "session_id": session_id,
            "dataset_run_id": dataset_run_id,
            "comment": self.reason or None,
            "source": source,
            "timestamp": self.finished_at,
            "metadata": metadata
            if metadata is not None
            else {"evaluation_id": self.evaluation_id, "evaluator_version": self.evaluator_version},
        }
        fields.update(self._score_value(config.data_type if config else None))
        return Score(**fields) if config is None else Score.with_config(config, **fields)

    def _score_value(self, data_type: str | None) -> dict[str, Any]:
        """Score value fields for a config's data type (None: chosen from what the result holds)."""
        label = self.detail.get(LABEL_KEY)
        label = label if isinstance(label, str) and label else None
        if data_type is None:
            if self.score is not None:
                return {"data_type": "NUMERIC", "value": self.score}
            if label is not None:
                return {"data_type": "CATEGORICAL", "string_value": label}
            return {"data_type": "BOOLEAN", "value": float(self.passed)}
        if data_type == "BOOLEAN":
            return {"value": float(self.passed)}
        if data_type == "CATEGORICAL" and label is not None:
            return {"string_value": label}
        return {"value": self.score}
