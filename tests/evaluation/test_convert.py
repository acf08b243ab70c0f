from __future__ import annotations

import pytest

from evaltrace.evaluation import evaluation_event_attributes, result_to_score, span_result_attributes
from evaltrace.evaluation.runner import failed_result
from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema import EvaluationResult, ScoreConfig, score_id

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def test_event_attributes_follow_the_spec() -> None:
    result = EvaluationResult(evaluator="relevance", passed=True, score=4, reason="cites source")
    attrs = evaluation_event_attributes(result, response_id="chatcmpl-1")
    assert attrs == {
        "gen_ai.evaluation.name": "relevance",
        "gen_ai.evaluation.score.value": 4.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "cites source",
        "gen_ai.response.id": "chatcmpl-1",
    }
    assert isinstance(attrs["gen_ai.evaluation.score.value"], float)


def test_event_attributes_for_label_and_failure() -> None:
    labelled = EvaluationResult(evaluator="tone", passed=True, detail={"label": "polite"})
    assert evaluation_event_attributes(labelled)["gen_ai.evaluation.score.label"] == "polite"
    assert "gen_ai.evaluation.score.value" not in evaluation_event_attributes(labelled)
    failed = failed_result(type("E", (), {"name": "judge", "version": None})(), "TimeoutError", "slow")
    attrs = evaluation_event_attributes(failed)
    assert attrs["error.type"] == "TimeoutError"
    assert attrs["gen_ai.evaluation.score.label"] == "fail"


def test_span_attributes() -> None:
    attrs = span_result_attributes(
        [
            EvaluationResult(evaluator="a", passed=True, score=1.0),
            EvaluationResult(evaluator="b", passed=False),
        ]
    )
    assert attrs == {
        "evaltrace.eval.a.score": 1.0,
        "evaltrace.eval.a.passed": True,
        "evaltrace.eval.b.passed": False,
        "evaltrace.eval.failed": True,
    }


def test_score_conversion_numeric_boolean_categorical() -> None:
    numeric = result_to_score(EvaluationResult(evaluator="rel", passed=True, score=0.8, reason="ok"), TRACE, SPAN)
    assert numeric is not None and (numeric.data_type, numeric.value, numeric.comment) == ("NUMERIC", 0.8, "ok")
    assert numeric.id == score_id(TRACE, SPAN, "rel", None)
    assert numeric.observation_id == SPAN and numeric.trace_id == TRACE
    boolean = result_to_score(EvaluationResult(evaluator="b", passed=False), TRACE, SPAN)
    assert boolean is not None and (boolean.data_type, boolean.value) == ("BOOLEAN", 0.0)
    label = result_to_score(EvaluationResult(evaluator="t", passed=True, detail={"label": "polite"}), TRACE, SPAN)
    assert label is not None and (label.data_type, label.string_value) == ("CATEGORICAL", "polite")
    assert result_to_score(EvaluationResult(evaluator="x", passed=False, status="failed"), TRACE, SPAN) is None


def test_score_config_violation_is_rejected() -> None:
    config = ScoreConfig(name="rel", data_type="NUMERIC", min_value=0, max_value=1)
    with pytest.raises(ScoreValidationError, match="outside the allowed range"):
        result_to_score(EvaluationResult(evaluator="rel", passed=True, score=3.0), TRACE, SPAN, config)
    ok = result_to_score(EvaluationResult(evaluator="rel", passed=True, score=0.5), TRACE, SPAN, config)
    assert ok is not None and ok.config_id == config.id


def test_skipped_results_are_not_verdicts() -> None:
    skipped = EvaluationResult(evaluator="ref", passed=False, status="skipped", reason="no reference")
    assert evaluation_event_attributes(skipped)["gen_ai.evaluation.score.label"] == "skipped"
    assert span_result_attributes([skipped]) == {"evaltrace.eval.failed": False}
    assert result_to_score(skipped, TRACE, SPAN) is None
