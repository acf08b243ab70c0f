from __future__ import annotations

import datetime as dt
import uuid

import pytest
from pydantic import BaseModel, ValidationError

from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema import (
    DEFAULT_AGENT_RUBRIC,
    BatchMetadata,
    Evaluation,
    EvaluationBatch,
    EvaluationConfig,
    EvaluationErrorInfo,
    EvaluationResult,
    MultiEvaluationResult,
    RetryConfig,
    Rubric,
    RubricDimension,
    RubricLevel,
    Score,
    ScoreCategory,
    ScoreConfig,
    TraceError,
    score_id,
)

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"


# --- EvaluationResult ------------------------------------------------------------------------------------


def test_result_from_judgement_only_then_stamped() -> None:
    result = EvaluationResult(evaluator="tool_called", passed=True, score=1.0, reason="called", detail={"n": 1})
    assert (result.run_id, result.case_id, result.variant_name) == ("", "", "")
    assert result.started_at == result.finished_at
    assert result.latency_ms == 0
    assert result.evaluation_id.startswith("eval_")
    uuid.UUID(result.evaluation_id.removeprefix("eval_"))
    assert result.status == "completed"

    stamped = result.stamped(
        run_id="r",
        case_id="c",
        variant_name="v",
        started_at=dt.datetime(2026, 5, 3, 10, 30),
        finished_at=T0 + dt.timedelta(milliseconds=250, microseconds=900),
        evaluator_version="v1.0.0",
    )
    assert (stamped.run_id, stamped.case_id, stamped.variant_name) == ("r", "c", "v")
    assert stamped.started_at == T0
    assert stamped.latency_ms == 250
    assert stamped.evaluator_version == "v1.0.0"
    assert stamped.evaluation_id == result.evaluation_id
    assert result.run_id == ""  # unchanged


def test_result_single_timestamp_and_order() -> None:
    only_start = EvaluationResult(evaluator="e", passed=False, started_at=T0)
    assert only_start.finished_at == T0
    with pytest.raises(ValidationError, match="before started_at"):
        EvaluationResult(evaluator="e", passed=False, started_at=T0, finished_at=T0 - dt.timedelta(seconds=1))
    with pytest.raises(ValidationError, match="confidence"):
        EvaluationResult(evaluator="e", passed=False, confidence=1.5)


def test_result_to_evaluation() -> None:
    result = EvaluationResult(
        evaluator="judge",
        passed=False,
        reason="wrong city",
        started_at=T0,
        finished_at=T0 + dt.timedelta(milliseconds=40),
        error=TraceError(type="timeout", message="judge timed out", stack="tb"),
        evaluator_version="v2",
        confidence=0.9,
        criteria={"c": 1},
        metadata={"m": 2},
        cost_usd=0.002,
        status="failed",
    )
    evaluation = result.to_evaluation(SPAN_ID)
    assert evaluation == Evaluation(
        evaluation_id=result.evaluation_id,
        target_event_id=SPAN_ID,
        evaluator_name="judge",
        evaluator_version="v2",
        score=False,
        explanation="wrong city",
        confidence=0.9,
        criteria={"c": 1},
        metadata={"m": 2},
        timestamp=T0 + dt.timedelta(milliseconds=40),
        duration_ms=40.0,
        cost_usd=0.002,
        status="failed",
        error=EvaluationErrorInfo(type="timeout", message="judge timed out", context={"stack": "tb"}),
    )


def test_result_to_score_numeric_boolean_and_deterministic_id() -> None:
    numeric = EvaluationResult(evaluator="relevance", passed=True, score=0.82, reason="ok", evaluator_version="v1")
    score = numeric.to_score(trace_id=TRACE_ID, observation_id=SPAN_ID)
    assert score.id == score_id(TRACE_ID, SPAN_ID, "relevance", "v1")
    assert score.id == numeric.to_score(trace_id=TRACE_ID, observation_id=SPAN_ID).id
    assert (score.data_type, score.value, score.string_value, score.comment) == ("NUMERIC", 0.82, None, "ok")
    assert (score.source, score.target) == ("EVAL", "observation")

    boolean = EvaluationResult(evaluator="no_pii", passed=False).to_score(trace_id=TRACE_ID)
    assert (boolean.data_type, boolean.value, boolean.string_value, boolean.comment) == ("BOOLEAN", 0.0, "False", None)
    assert boolean.target == "trace"


def test_result_to_score_with_config() -> None:
    result = EvaluationResult(evaluator="relevance", passed=True, score=7.0)
    config = ScoreConfig(name="relevance", data_type="NUMERIC", min_value=0, max_value=1)
    with pytest.raises(ScoreValidationError, match=r"value 7.0 is outside the allowed range \[0.0, 1.0\]"):
        result.to_score(trace_id=TRACE_ID, config=config)
    bool_config = ScoreConfig(name="ok", data_type="BOOLEAN")
    score = result.to_score(trace_id=TRACE_ID, config=bool_config)
    assert (score.data_type, score.value, score.string_value, score.config_id) == (
        "BOOLEAN",
        1.0,
        "True",
        bool_config.id,
    )


def test_score_id_is_uuid5_and_sensitive_to_every_part() -> None:
    base = score_id(TRACE_ID, SPAN_ID, "e", "v1")
    assert uuid.UUID(base).version == 5
    others = {
        score_id(TRACE_ID, None, "e", "v1"),
        score_id(TRACE_ID, SPAN_ID, "f", "v1"),
        score_id(TRACE_ID, SPAN_ID, "e", None),
        score_id("1" * 32, SPAN_ID, "e", "v1"),
    }
    assert base not in others and len(others) == 4


# --- Score / ScoreConfig ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ({}, "exactly one target.*got none"),
        ({"trace_id": TRACE_ID, "session_id": "s"}, "exactly one target.*trace_id/observation_id, session_id"),
        ({"observation_id": SPAN_ID}, "needs the observation's trace_id"),
    ],
)
def test_score_needs_exactly_one_target(targets: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Score(name="s", value=1.0, **targets)


def test_score_targets() -> None:
    assert Score(name="s", value=1, session_id="s").target == "session"
    assert Score(name="s", value=1, dataset_run_id="d").target == "dataset_run"


def test_boolean_score_values() -> None:
    assert Score(name="b", data_type="BOOLEAN", value=True, trace_id=TRACE_ID).string_value == "True"
    assert Score(name="b", data_type="BOOLEAN", string_value="False", trace_id=TRACE_ID).value == 0.0
    with pytest.raises(ValidationError, match="BOOLEAN score needs value 0 or 1"):
        Score(name="b", data_type="BOOLEAN", value=0.5, trace_id=TRACE_ID)
    with pytest.raises(ValidationError, match="NUMERIC score needs a value"):
        Score(name="n", trace_id=TRACE_ID)
    with pytest.raises(ValidationError, match="CATEGORICAL score needs"):
        Score(name="c", data_type="CATEGORICAL", trace_id=TRACE_ID)


CATEGORIES = [ScoreCategory(label="bad", value=0), ScoreCategory(label="good", value=1)]


def test_categorical_config_derives_string_value_and_rejects_unknown() -> None:
    config = ScoreConfig(name="quality", data_type="CATEGORICAL", categories=CATEGORIES)
    score = Score.with_config(config, value=1, trace_id=TRACE_ID)
    assert (score.name, score.data_type, score.string_value, score.value) == ("quality", "CATEGORICAL", "good", 1.0)
    by_label = config.validate_score(Score(name="quality", data_type="CATEGORICAL", string_value="bad", trace_id="t"))
    assert by_label.value == 0.0
    with pytest.raises(ScoreValidationError, match=r"'meh' is not one of the categories \(bad=0.0, good=1.0\)"):
        Score.with_config(config, string_value="meh", trace_id=TRACE_ID)
    with pytest.raises(ScoreValidationError, match="is not one of the categories"):
        Score.with_config(config, value=3, trace_id=TRACE_ID)


def test_numeric_config_range_and_type_taken_from_config() -> None:
    config = ScoreConfig(name="rating", data_type="NUMERIC", min_value=1, max_value=5)
    assert Score.with_config(config, value=5, trace_id=TRACE_ID).config_id == config.id
    with pytest.raises(ScoreValidationError, match=r"score 'rating' \(config 'rating'.*0.5 is outside"):
        Score.with_config(config, value=0.5, trace_id=TRACE_ID)
    open_ended = ScoreConfig(name="x", data_type="NUMERIC", min_value=0)
    assert open_ended.validate_score(Score(name="x", value=1e9, trace_id=TRACE_ID)).value == 1e9
    with pytest.raises(ScoreValidationError, match="needs exactly one target"):
        Score.with_config(config, value=3)


def test_boolean_config_and_archived_config() -> None:
    config = ScoreConfig(name="ok", data_type="BOOLEAN")
    with pytest.raises(ScoreValidationError, match="BOOLEAN score needs 0/1"):
        config.validate_score(Score(name="ok", value=0.3, trace_id=TRACE_ID))
    archived = ScoreConfig(name="old", data_type="NUMERIC", is_archived=True)
    with pytest.raises(ScoreValidationError, match="config is archived"):
        archived.validate_score(Score(name="old", value=1, trace_id=TRACE_ID))


def test_score_config_checks_itself() -> None:
    with pytest.raises(ValidationError, match="min_value 2.0 is greater than max_value 1.0"):
        ScoreConfig(name="x", data_type="NUMERIC", min_value=2, max_value=1)
    with pytest.raises(ValidationError, match="needs at least one category"):
        ScoreConfig(name="x", data_type="CATEGORICAL")


# --- Evaluation aggregates ------------------------------------------------------------------------------


def evaluation(name: str, score: float | bool | str | None, status: str = "completed") -> Evaluation:
    return Evaluation.model_validate(
        {"target_event_id": SPAN_ID, "evaluator_name": name, "score": score, "status": status}
    )


EVALUATIONS = [
    evaluation("relevance", 0.9),
    evaluation("toxicity", True),  # counts as 1.0
    evaluation("accuracy", 0.4),
    evaluation("label", "good"),  # not numeric: ignored
    evaluation("broken", 0.0, status="failed"),  # not completed: ignored
]


@pytest.mark.parametrize(
    ("method", "weights", "expected"),
    [
        ("simple_average", None, (0.9 + 1.0 + 0.4) / 3),
        ("minimum", None, 0.4),
        ("weighted_average", {"relevance": 2.0, "toxicity": 1.0, "accuracy": 1.0}, (1.8 + 1.0 + 0.4) / 4),
        ("weighted_average", {"relevance": 3.0}, (2.7 + 1.0 + 0.4) / 5),  # missing weights count 1.0
        ("weighted_average", None, (0.9 + 1.0 + 0.4) / 3),
        ("weighted_average", {"relevance": 0, "toxicity": 0, "accuracy": 0}, None),
    ],
)
def test_multi_evaluation_summary(method: str, weights: dict[str, float] | None, expected: float | None) -> None:
    multi = MultiEvaluationResult.model_validate(
        {"target_event_id": SPAN_ID, "evaluations": EVALUATIONS, "summary_method": method, "weights": weights}
    )
    assert multi.summary_score == pytest.approx(expected) if expected is not None else multi.summary_score is None


def test_multi_evaluation_custom_and_empty() -> None:
    custom = MultiEvaluationResult(
        target_event_id="t", evaluations=EVALUATIONS, summary_method="custom", summary_score=3
    )
    assert custom.summary_score == 3
    # A given summary score is kept as its producer reported it (issue 29); only a missing one is computed.
    assert MultiEvaluationResult(target_event_id="t", summary_score=0.5).summary_score == 0.5
    assert MultiEvaluationResult(target_event_id="t").summary_score is None


def test_evaluation_config_defaults_and_batch_size() -> None:
    config = EvaluationConfig(evaluators=["a"])
    assert config.retry_config == RetryConfig(max_retries=3, backoff_multiplier=2.0, initial_delay_ms=1000)
    assert config.parallel_execution is True
    batch = EvaluationBatch(evaluations=EVALUATIONS[:2])
    assert batch.batch_metadata.batch_size == 2
    assert batch.status == "pending"


def test_evaluation_score_types_survive_json() -> None:
    for value in (True, 3, 0.5, "label", None):
        again = Evaluation.model_validate_json(evaluation("x", value).model_dump_json())
        assert again.score == value and type(again.score) is type(value)
    with pytest.raises(ValidationError):
        Evaluation(target_event_id="t", evaluator_name="x", confidence=-0.1)


# --- Rubric ---------------------------------------------------------------------------------------------


def test_rubric_levels() -> None:
    assert [level.score for level in RubricLevel] == [1.0, 0.8, 0.6, 0.3, 0.0]


def test_default_agent_rubric_weights() -> None:
    weights = {d.name: d.weight for d in DEFAULT_AGENT_RUBRIC.dimensions}
    assert weights == {
        "factual_accuracy": 0.30,
        "completeness": 0.25,
        "citation_accuracy": 0.15,
        "source_quality": 0.10,
        "tool_efficiency": 0.20,
    }
    assert DEFAULT_AGENT_RUBRIC.threshold == 0.7


def test_rubric_overall_all_dimensions() -> None:
    scores = {
        "factual_accuracy": RubricLevel.EXCELLENT,  # 1.0 * .30
        "completeness": RubricLevel.GOOD,  # 0.8 * .25
        "citation_accuracy": RubricLevel.ACCEPTABLE,  # 0.6 * .15
        "source_quality": RubricLevel.POOR,  # 0.3 * .10
        "tool_efficiency": 0.5,  # 0.5 * .20
    }
    result = DEFAULT_AGENT_RUBRIC.evaluate(scores)
    assert result.overall == pytest.approx(0.30 + 0.20 + 0.09 + 0.03 + 0.10)  # 0.72
    assert result.passed is True
    assert result.dimension_scores["completeness"] == 0.8


def test_rubric_overall_missing_dimensions_and_none() -> None:
    partial = DEFAULT_AGENT_RUBRIC.evaluate({"factual_accuracy": 1.0, "completeness": RubricLevel.POOR})
    assert partial.overall == pytest.approx((0.30 + 0.3 * 0.25) / 0.55)  # 0.6818...
    assert partial.passed is False
    empty = DEFAULT_AGENT_RUBRIC.evaluate({})
    assert (empty.overall, empty.passed) == (0.0, False)
    assert DEFAULT_AGENT_RUBRIC.overall({"source_quality": 0.7}) == pytest.approx(0.7)
    assert DEFAULT_AGENT_RUBRIC.evaluate({"source_quality": 0.7}).passed is True


def test_rubric_rejects_unknown_dimension_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="'style' is not a dimension of rubric 'agent'"):
        DEFAULT_AGENT_RUBRIC.evaluate({"style": 1.0})
    with pytest.raises(ValueError, match="must be in"):
        DEFAULT_AGENT_RUBRIC.evaluate({"completeness": 1.2})
    with pytest.raises(ValidationError):
        RubricDimension(name="x", weight=0)


ROUND_TRIP: list[BaseModel] = [
    EvaluationResult(
        run_id="r",
        case_id="c",
        variant_name="v",
        evaluator="judge",
        evaluator_type="llm_judge",
        passed=True,
        score=0.75,
        reason="fine",
        detail={"model": "gpt-4o"},
        started_at=T0,
        finished_at=T0 + dt.timedelta(seconds=2),
        error=TraceError(type="exception", message="m"),
        evaluator_version="v1",
        confidence=0.5,
        criteria={"c": True},
        metadata={"m": 1},
        cost_usd=0.01,
        status="failed",
    ),
    evaluation("x", 0.5),
    MultiEvaluationResult(target_event_id="t", evaluations=EVALUATIONS, weights={"relevance": 2}),
    EvaluationBatch(
        evaluations=EVALUATIONS,
        batch_metadata=BatchMetadata(created_at=T0, evaluator_versions={"a": "v1"}, processing_time_ms=3.5),
        status="completed",
    ),
    EvaluationConfig(evaluators=["a"], evaluator_configs={"a": {"k": 1}}, timeout_ms=500, retry_config=None),
    Score(name="s", value=1, data_type="BOOLEAN", trace_id=TRACE_ID, observation_id=SPAN_ID, metadata={"a": 1}),
    ScoreConfig(name="q", data_type="CATEGORICAL", categories=CATEGORIES, description="d"),
    DEFAULT_AGENT_RUBRIC,
    Rubric(dimensions=[RubricDimension(name="a", weight=1)]).evaluate({"a": 0.2}),
]


@pytest.mark.parametrize("model", ROUND_TRIP, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model
    assert again.model_dump_json() == model.model_dump_json()


def test_result_to_score_with_label() -> None:
    labelled = EvaluationResult(evaluator="tone", passed=True, detail={"label": "friendly"})
    score = labelled.to_score(trace_id=TRACE_ID)
    assert (score.data_type, score.string_value, score.value) == ("CATEGORICAL", "friendly", None)
    config = ScoreConfig(name="tone", data_type="CATEGORICAL", categories=[ScoreCategory(label="friendly", value=1)])
    typed = labelled.to_score(trace_id=TRACE_ID, config=config)
    assert (typed.string_value, typed.value, typed.config_id) == ("friendly", 1.0, config.id)
    by_score = EvaluationResult(evaluator="tone", passed=True, score=1).to_score(trace_id=TRACE_ID, config=config)
    assert by_score.string_value == "friendly"
    with pytest.raises(ScoreValidationError, match="'rude' is not one of the categories"):
        EvaluationResult(evaluator="tone", passed=False, detail={"label": "rude"}).to_score(
            trace_id=TRACE_ID, config=config
        )
