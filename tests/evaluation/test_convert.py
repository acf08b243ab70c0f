from __future__ import annotations

import pytest

from evaltrace.evaluation import evaluation_event_attributes, result_to_score, span_result_attributes
from evaltrace.evaluation.convert import result_outcome
from evaltrace.evaluation.runner import failed_result, skipped_result
from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema import EvaluationResult, ScoreConfig, score_id

from .helpers import make_trace

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


JUDGE = type("E", (), {"name": "judge", "version": None})()


def test_event_attributes_for_label() -> None:
    labelled = EvaluationResult(evaluator="tone", passed=True, detail={"label": "polite"})
    assert evaluation_event_attributes(labelled)["gen_ai.evaluation.score.label"] == "polite"
    assert "gen_ai.evaluation.score.value" not in evaluation_event_attributes(labelled)


def test_errored_evaluation_event_has_error_type_and_no_verdict() -> None:
    failed = failed_result(JUDGE, "TimeoutError", "slow", timeout=True)
    # Even a score or a label left on an errored result is no verdict: neither goes on the event.
    failed = failed.stamped(score=0.0, detail={**failed.detail, "label": "fail"})
    assert evaluation_event_attributes(failed, response_id="chatcmpl-1") == {
        "gen_ai.evaluation.name": "judge",
        "gen_ai.evaluation.explanation": "evaluator failed: slow",
        "gen_ai.response.id": "chatcmpl-1",
        "error.type": "TimeoutError",
    }


def test_span_attributes() -> None:
    attrs = span_result_attributes(
        [
            EvaluationResult(evaluator="a", passed=True, score=1.0),
            EvaluationResult(evaluator="b", passed=False),
        ]
    )
    assert attrs == {
        "evaltrace.eval.a.outcome": "pass",
        "evaltrace.eval.a.score": 1.0,
        "evaltrace.eval.a.passed": True,
        "evaltrace.eval.b.outcome": "fail",
        "evaltrace.eval.b.passed": False,
        "evaltrace.eval.failed": True,
    }


def test_errored_result_is_not_written_as_a_fail() -> None:
    attrs = span_result_attributes(
        [EvaluationResult(evaluator="a", passed=True), failed_result(JUDGE, "ConnectError", "unreachable")]
    )
    assert attrs == {
        "evaltrace.eval.a.outcome": "pass",
        "evaltrace.eval.a.passed": True,
        "evaltrace.eval.judge.outcome": "error",
        "evaltrace.eval.judge.error_type": "ConnectError",
        "evaltrace.eval.failed": False,
        "evaltrace.eval.errors": ("judge",),
    }


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (EvaluationResult(evaluator="x", passed=True), "pass"),
        (EvaluationResult(evaluator="x", passed=False), "fail"),
        (failed_result(JUDGE, "KeyError", "bug"), "error"),
        (EvaluationResult(evaluator="x", passed=True, status="failed"), "error"),
        (skipped_result(JUDGE, "shutdown"), "not_evaluated"),
        (EvaluationResult(evaluator="x", passed=False, status="pending"), "pending"),
    ],
)
def test_result_outcome(result: EvaluationResult, outcome: str) -> None:
    assert result_outcome(result) == outcome


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
    assert evaluation_event_attributes(skipped) == {
        "gen_ai.evaluation.name": "ref",
        "gen_ai.evaluation.score.label": "not_evaluated",
        "gen_ai.evaluation.explanation": "no reference",
    }
    assert span_result_attributes([skipped]) == {  # no evaltrace.eval.failed: nothing was judged
        "evaltrace.eval.ref.outcome": "not_evaluated",
        "evaltrace.eval.ref.skip_reason": "no reference",
        "evaltrace.eval.not_evaluated": ("ref",),
    }
    assert result_to_score(skipped, TRACE, SPAN) is None


# --- scores a hair outside a config's range (float rounding) are clamped, clear violations rejected ------------

UNIT = ScoreConfig(name="s", data_type="NUMERIC", min_value=0, max_value=1)


@pytest.mark.parametrize(
    ("value", "config", "stored"),
    [
        (1.0000000000000004, UNIT, 1.0),  # sacrebleu's BLEU of identical texts
        (-1e-12, UNIT, 0.0),
        (0.5, UNIT, 0.5),
        (1000 + 1e-7, ScoreConfig(name="s", data_type="NUMERIC", min_value=0, max_value=1000), 1000.0),  # relative
    ],
)
def test_rounding_past_a_bound_is_clamped_not_rejected(value: float, config: ScoreConfig, stored: float) -> None:
    score = result_to_score(EvaluationResult(evaluator="s", passed=True, score=value), TRACE, SPAN, config)
    assert score is not None and score.value == stored and score.config_id == config.id


@pytest.mark.parametrize("value", [1.001, 1 + 1e-6, -1e-6, -0.5])
def test_clearly_out_of_range_is_still_rejected(value: float) -> None:
    with pytest.raises(ScoreValidationError, match="outside the allowed range"):
        result_to_score(EvaluationResult(evaluator="s", passed=True, score=value), TRACE, SPAN, UNIT)


def test_bleu_of_identical_texts_is_stored_as_one() -> None:
    pytest.importorskip("sacrebleu", reason="the metrics extra (sacrebleu) is not installed")
    from evaltrace.evaluators import Bleu

    text = "The cat sat on the mat today."
    result = Bleu(references=[text]).evaluate(make_trace(text))
    assert result.score is not None and result.score >= 1.0  # 1.0000000000000004 with sacrebleu 2.x
    score = result_to_score(
        result, TRACE, SPAN, ScoreConfig(name="bleu", data_type="NUMERIC", min_value=0, max_value=1)
    )
    assert score is not None and score.value == 1.0
