"""Scores on sessions and dataset runs (exactly one target), and ScoreConfigs immutable once created but archivable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evaltrace.exceptions import ScoreValidationError
from evaltrace.schema import (
    EvaluationResult,
    ScoreCategory,
    ScoreConfig,
    dataset_run_score_id,
    score_id,
    session_score_id,
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
RESULT = EvaluationResult(evaluator="helpful", evaluator_version="v2", passed=True, score=0.75, reason="ok")


def test_a_result_scores_a_session_or_a_dataset_run_with_a_stable_id() -> None:
    on_session = RESULT.to_score(session_id="chat-42")
    assert (on_session.target, on_session.session_id, on_session.trace_id) == ("session", "chat-42", None)
    assert on_session.id == session_score_id("chat-42", "helpful", "v2") == RESULT.to_score(session_id="chat-42").id
    on_run = RESULT.to_score(dataset_run_id="run-1/v")
    assert (on_run.target, on_run.dataset_run_id, on_run.value) == ("dataset_run", "run-1/v", 0.75)
    assert on_run.id == dataset_run_score_id("run-1/v", "helpful", "v2")
    on_trace = RESULT.to_score(trace_id=TRACE_ID)
    assert on_trace.id == score_id(TRACE_ID, None, "helpful", "v2")
    assert len({on_session.id, on_run.id, on_trace.id}) == 3


@pytest.mark.parametrize(
    "targets",
    [
        {},
        {"trace_id": TRACE_ID, "session_id": "s"},
        {"session_id": "s", "dataset_run_id": "d"},
        {"observation_id": "00f067aa0ba902b7", "session_id": "s"},
    ],
)
def test_a_score_references_exactly_one_target(targets: dict[str, str]) -> None:
    with pytest.raises(ScoreValidationError, match="exactly one target"):
        RESULT.to_score(**targets)


def test_a_session_score_satisfies_its_config() -> None:
    config = ScoreConfig(name="helpful", data_type="NUMERIC", min_value=0, max_value=1)
    assert RESULT.to_score(session_id="s", config=config).config_id == config.id
    with pytest.raises(ScoreValidationError, match="outside the allowed range"):
        RESULT.model_copy(update={"score": 3.0}).to_score(dataset_run_id="d", config=config)


def test_a_score_config_is_immutable_once_created() -> None:
    config = ScoreConfig(
        name="tone",
        data_type="CATEGORICAL",
        categories=[ScoreCategory(label="rude", value=0), ScoreCategory(label="kind", value=1)],
    )
    for field, value in (("max_value", 10.0), ("data_type", "NUMERIC"), ("is_archived", True), ("name", "x")):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(config, field, value)
    assert config.categories is not None
    with pytest.raises(AttributeError):
        config.categories.append(ScoreCategory(label="meh", value=0.5))  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="frozen"):
        config.categories[0].value = 5  # type: ignore[misc]
    assert [c.label for c in config.categories] == ["rude", "kind"]


def test_a_score_config_is_archived_and_restored_under_the_same_id() -> None:
    config = ScoreConfig(name="helpful", data_type="NUMERIC", min_value=0, max_value=1)
    archived = config.archive()
    assert (archived.id, archived.is_archived, config.is_archived) == (config.id, True, False)
    with pytest.raises(ScoreValidationError, match="config is archived"):
        RESULT.to_score(trace_id=TRACE_ID, config=archived)
    restored = archived.restore()
    assert (restored.id, restored.is_archived) == (config.id, False)
    assert restored == config
    assert RESULT.to_score(trace_id=TRACE_ID, config=restored).config_id == config.id
    # A config read back from JSON is as immutable as the one written.
    loaded = ScoreConfig.model_validate_json(archived.model_dump_json())
    assert loaded == archived
    with pytest.raises(ValidationError, match="frozen"):
        loaded.is_archived = False
