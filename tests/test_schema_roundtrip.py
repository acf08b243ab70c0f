"""Every model in ``evaltrace.schema`` survives model_dump_json -> model_validate_json unchanged."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import BaseModel

import evaltrace.schema as schema
from evaltrace.schema import (
    DEFAULT_AGENT_RUBRIC,
    BatchMetadata,
    ComparisonReport,
    Conversation,
    EvalCase,
    Evaluation,
    EvaluationBatch,
    EvaluationConfig,
    EvaluationErrorInfo,
    EvaluationResult,
    EvaluatorRollup,
    EvaluatorVariantRollup,
    ExpectedBehavior,
    FactualAccuracyEvaluation,
    FileDiff,
    FileEntry,
    FileManifest,
    FilesystemArtifact,
    LengthEvaluation,
    LlmStep,
    MultiEvaluationResult,
    QualityEvaluation,
    RelevanceEvaluation,
    RetryConfig,
    Rubric,
    RubricDimension,
    RubricResult,
    RunSummary,
    RunVariant,
    Score,
    ScoreCategory,
    ScoreConfig,
    SimulatedUser,
    StopWhen,
    ToolCall,
    ToolResult,
    ToxicityEvaluation,
    Trace,
    TraceError,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
    Turn,
    VariantDelta,
    VariantSummary,
    WorkspaceSpec,
)

T0 = dt.datetime(2026, 5, 3, 10, 30, 0, 123456, tzinfo=dt.UTC)
CALL = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris", "days": [1, 2]}, started_at=T0)
METRICS = TraceMetrics(
    token_input=1,
    token_output=2,
    token_thinking=3,
    cost_usd=0.5,
    cost_thinking_usd=0.25,
    latency_first_token_ms=10,
    latency_last_token_ms=20,
    tokens_per_second=33.3,
    stream_chunks=7,
    stream_completed=True,
    custom={"k": [1, "x"]},
)
MESSAGES = [
    TraceMessage(role="user", content={"parts": [{"type": "text", "content": "hi"}]}),
    TraceMessage(role="assistant", content="ok", thinking="hmm", tool_call=CALL),
    TraceMessage(role="tool", name="get_weather", tool_call_id="c1", content="rain"),
]
ERROR_INFO = EvaluationErrorInfo(type="timeout", message="slow", code="E1", context={"after_ms": 5})
EVALUATION = Evaluation(
    target_event_id="b7ad6b7169203331",
    evaluator_name="relevance",
    evaluator_version="v1.2.0",
    score=0.5,
    explanation="ok",
    confidence=0.9,
    criteria={"c": 1},
    metadata={"m": 1},
    timestamp=T0,
    duration_ms=12.5,
    cost_usd=0.01,
    status="failed",
    error=ERROR_INFO,
)
VARIANT_SUMMARY = VariantSummary(
    name="v", cases_total=2, cases_passed=1, cases_errored=1, pass_rate=0.5, avg_latency_ms=3.5
)
DELTA = VariantDelta(variant="v", pass_rate_delta=0.1, avg_latency_delta_ms=-2, regressions=["a"], improvements=["b"])
COMPARISON = ComparisonReport(baseline="base", deltas=[DELTA])
ROLLUP = EvaluatorRollup(evaluator="e", by_variant={"v": EvaluatorVariantRollup(pass_rate=1.0)})
MANIFEST = FileManifest(files={"src/a.py": FileEntry(size=10, mode=0o100644, mtime=1.25, sha256="ab" * 32)})
DIFF = FileDiff(added=["b"], removed=["c"], modified=["src/a.py"], text_diffs={"src/a.py": "@@ -1 +1 @@\n-x\n+y\n"})

_TURN_TRACE = Trace(
    run_id="live",
    case_id="c",
    variant_name="v",
    started_at=T0,
    finished_at=T0 + dt.timedelta(seconds=1),
    messages=[TraceMessage(role="user", content="hi")],
    output=TraceOutput(final_answer="hello"),
    extra={"trace_id": "0" * 31 + "1"},
)

SAMPLES: list[BaseModel] = [
    Turn(index=0, trace=_TURN_TRACE),
    Conversation.from_traces("s-1", [_TURN_TRACE], user_id="ada", revision=2),
    ExpectedBehavior(must_call_tools=["t"], facts={"a": 1}),
    EvalCase(id="c", input={"q": "x"}, expected=ExpectedBehavior(answer_should_include=["x"])),
    StopWhen(phrase="bye"),
    SimulatedUser(persona="p", goal="g", first_message="hi", max_turns=3, stop_when=StopWhen(goal_met=True)),
    EvalCase(id="s", input={"ctx": 1}, simulated_user=SimulatedUser(persona="p", goal="g", stop_when="bye")),
    RunVariant(name="v", adapter="http", config={"url": "http://127.0.0.1:1"}),
    WorkspaceSpec(kind="tempdir_snapshot", path="repo", ignore=["*.pyc"]),
    RunVariant(name="w", adapter="python_function", workspace=WorkspaceSpec(kind="git_branch", path="repo")),
    CALL,
    ToolResult(tool_call_id="c1", name="get_weather", content={"sky": "rain"}),
    *MESSAGES,
    TraceOutput(final_answer="a", thinking="t", structured={"x": 1}),
    METRICS,
    LlmStep(span_id="00f067aa0ba902b7", model="gpt-4o-2024-08-06", request_model="gpt-4o", finish_reasons=["stop"]),
    TraceError(type="adapter_error", message="m", stack="s"),
    Trace(
        run_id="r",
        case_id="c",
        variant_name="v",
        started_at=T0,
        finished_at=T0 + dt.timedelta(seconds=3),
        input={"q": 1},
        output=TraceOutput(final_answer="ok"),
        messages=MESSAGES,
        metrics=METRICS,
        extra={"trace_id": "0" * 32, "span_id": "1" * 16, "enrichment_errors": ["x"]},
    ),
    EvaluationResult(evaluator="e", passed=True, started_at=T0, finished_at=T0 + dt.timedelta(milliseconds=5)),
    ERROR_INFO,
    EVALUATION,
    MultiEvaluationResult(target_event_id="t", evaluations=[EVALUATION], summary_method="minimum"),
    BatchMetadata(batch_size=3, created_at=T0, evaluator_versions={"e": "v1"}, processing_time_ms=1.5),
    EvaluationBatch(evaluations=[EVALUATION], status="processing"),
    QualityEvaluation(target_event_id="t", evaluator_name="quality", score=0.9, dimensions={"clarity": 0.8}),
    RelevanceEvaluation(target_event_id="t", evaluator_name="relevance", query_intent_match=0.9, topic_alignment=0.5),
    FactualAccuracyEvaluation(
        target_event_id="t",
        evaluator_name="factual_accuracy",
        factual_claims=[{"claim": "c", "verified": False}],
        citation_accuracy=0.5,
    ),
    ToxicityEvaluation(target_event_id="t", evaluator_name="toxicity", toxicity_categories={"hate": 0.1}),
    LengthEvaluation(target_event_id="t", evaluator_name="length", word_count=3, length_appropriateness="too_short"),
    RetryConfig(max_retries=5, backoff_multiplier=1.5, initial_delay_ms=10),
    EvaluationConfig(evaluators=["e"], timeout_ms=100),
    VARIANT_SUMMARY,
    EvaluatorVariantRollup(pass_rate=0.5, avg_score=0.25),
    ROLLUP,
    DELTA,
    COMPARISON,
    RunSummary(
        run_id="r",
        started_at=T0,
        finished_at=T0,
        config_path="eval.yaml",
        config_hash="h",
        cases_total=2,
        variants=[VARIANT_SUMMARY],
        by_evaluator=[ROLLUP],
        comparison=COMPARISON,
    ),
    MANIFEST.files["src/a.py"],
    MANIFEST,
    DIFF,
    FilesystemArtifact(
        case_id="c",
        variant_name="v",
        workspace_kind="git_branch",
        before_manifest=MANIFEST,
        after_manifest=FileManifest(),
        diff=DIFF,
        artifacts_path="p",
    ),
    ScoreCategory(label="good", value=1),
    ScoreConfig(name="q", data_type="NUMERIC", min_value=0, max_value=1, description="d", is_archived=True),
    Score(name="s", value=0.5, session_id="sess", comment="c", source="ANNOTATION", config_id="cfg", timestamp=T0),
    Score(name="s", string_value="good", value=1, data_type="CATEGORICAL", dataset_run_id="d"),
    RubricDimension(name="d", weight=0.5, description="x"),
    DEFAULT_AGENT_RUBRIC,
    Rubric(name="r", dimensions=[RubricDimension(name="d", weight=1)], threshold=0.5),
    RubricResult(overall=0.5, passed=False, dimension_scores={"d": 0.5}),
]


@pytest.mark.parametrize("model", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert again.model_dump_json() == text


def test_every_schema_model_has_a_sample() -> None:
    models = {
        obj for name in schema.__all__ if isinstance(obj := getattr(schema, name), type) and issubclass(obj, BaseModel)
    }
    assert models - {type(m) for m in SAMPLES} == set()
