from __future__ import annotations

import datetime as dt
import json

import pytest
from pydantic import BaseModel, ValidationError

import evaltrace.schema as schema
from evaltrace.schema import (
    ComparisonReport,
    EvalCase,
    EvaluatorRollup,
    EvaluatorVariantRollup,
    ExpectedBehavior,
    FileDiff,
    FileEntry,
    FileManifest,
    FilesystemArtifact,
    RunSummary,
    RunVariant,
    ToolCall,
    ToolResult,
    Trace,
    TraceError,
    TraceMessage,
    TraceMetrics,
    TraceOutput,
    VariantDelta,
    VariantSummary,
)

T0 = dt.datetime(2026, 5, 3, 10, 30, tzinfo=dt.UTC)


def make_trace(**overrides: object) -> Trace:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "case_id": "case-1",
        "variant_name": "baseline",
        "started_at": T0,
        "finished_at": T0 + dt.timedelta(seconds=1, microseconds=234_999),
        "input": {"question": "Weather in Paris?"},
        "output": TraceOutput(final_answer="Rainy.", thinking="Check the tool.", structured={"temp": 57}),
        "messages": [
            TraceMessage(role="system", content="Be brief."),
            TraceMessage(role="user", content="Weather in Paris?"),
            TraceMessage(
                role="assistant",
                thinking="Check the tool.",
                tool_call=ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}, started_at=T0),
            ),
            TraceMessage(role="tool", name="get_weather", tool_call_id="call_1", content={"sky": "rainy"}),
            TraceMessage(role="assistant", content="Rainy."),
        ],
        "metrics": TraceMetrics(token_input=10, token_output=5, cost_usd=0.01, custom={"k": 1}),
        "extra": {"trace_id": "a" * 32, "span_id": "b" * 16},
    }
    fields.update(overrides)
    return Trace.model_validate(fields)


def test_schema_all_is_sorted_and_complete() -> None:
    assert schema.__all__ == sorted(schema.__all__)
    for name in schema.__all__:
        assert hasattr(schema, name)


def test_latency_is_computed_in_whole_ms_and_supplied_value_is_ignored() -> None:
    trace = make_trace(latency_ms=99999)
    assert trace.latency_ms == 1234
    assert json.loads(trace.model_dump_json())["latency_ms"] == 1234


def test_naive_datetimes_are_utc_and_order_is_enforced() -> None:
    trace = make_trace(started_at=dt.datetime(2026, 1, 1), finished_at="2026-01-01T02:00:00+02:00")
    assert trace.started_at.tzinfo is dt.UTC
    assert trace.finished_at == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert trace.latency_ms == 0
    with pytest.raises(ValidationError, match="before started_at"):
        make_trace(finished_at=T0 - dt.timedelta(milliseconds=1))


def test_tool_views_are_derived_from_messages() -> None:
    trace = make_trace()
    assert trace.tool_calls == [ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}, started_at=T0)]
    assert trace.tool_results == [ToolResult(tool_call_id="call_1", name="get_weather", content={"sky": "rainy"})]


def test_tool_message_without_id_uses_answered_call_and_empty_content() -> None:
    call = ToolCall(id="c9", name="lookup")
    trace = make_trace(messages=[TraceMessage(role="tool", tool_call=call)])
    assert trace.tool_calls == []
    assert trace.tool_results == [ToolResult(tool_call_id="c9", name="lookup", content="")]


def test_supplied_tool_views_are_kept() -> None:
    calls = [ToolCall(name="x")]
    trace = make_trace(messages=[], tool_calls=calls)
    assert trace.tool_calls == calls
    assert trace.tool_results == []


def test_a_tool_call_dumps_from_tool_span_only_when_set() -> None:
    """A call a model call recorded dumps as before the field existed (stored traces and hashes unchanged)."""
    recorded = ToolCall(id="c1", name="lookup", arguments={"q": "x"})
    assert "from_tool_span" not in recorded.model_dump()
    assert "from_tool_span" not in json.loads(recorded.model_dump_json())
    assert ToolCall.model_validate_json(recorded.model_dump_json()) == recorded
    spanned = ToolCall(id="c1", name="lookup", from_tool_span=True)
    assert spanned.model_dump()["from_tool_span"] is True
    assert json.loads(spanned.model_dump_json())["from_tool_span"] is True
    assert ToolCall.model_validate_json(spanned.model_dump_json()) == spanned
    trace = make_trace(tool_calls=[spanned, recorded])
    assert [("from_tool_span" in c) for c in json.loads(trace.model_dump_json())["tool_calls"]] == [True, False]
    assert Trace.model_validate_json(trace.model_dump_json()).tool_calls == [spanned, recorded]


def test_error_type_must_be_one_of_four() -> None:
    assert make_trace(error=TraceError(type="http_5xx", message="502")).error is not None
    with pytest.raises(ValidationError, match="timeout"):
        TraceError.model_validate({"type": "oops", "message": "m"})


def test_non_dict_input_is_wrapped() -> None:
    assert make_trace(input="hello").input == {"input": "hello"}


def test_schema_version_2_is_rejected_and_1x_extra_fields_ignored() -> None:
    data = json.loads(make_trace().model_dump_json())
    with pytest.raises(ValidationError, match=r"unsupported schema_version '2.0' for Trace.*reads 1.x"):
        Trace.model_validate({**data, "schema_version": "2.0"})
    newer = {**data, "schema_version": "1.4", "new_field": 1, "output": {**data["output"], "audio": "x"}}
    loaded = Trace.model_validate(newer)
    assert loaded.schema_version == "1.0"
    assert loaded == make_trace()
    assert "new_field" not in loaded.model_dump()


def test_thinking_is_not_part_of_final_answer() -> None:
    trace = make_trace()
    assert trace.output.thinking == "Check the tool."
    assert "Check the tool" not in (trace.output.final_answer or "")


ROUND_TRIP: list[BaseModel] = [
    make_trace(error=TraceError(type="exception", message="boom", stack="Traceback")),
    EvalCase(
        id="c1",
        input={"q": 1},
        metadata={"tags": ["x"]},
        expected=ExpectedBehavior(
            must_call_tools=["get_weather"],
            answer_should_include=["rain"],
            answer_should_not_include=["snow"],
            facts={"city": "Paris"},
            must_modify_files=["a.py"],
            must_not_modify_files=["b.py"],
        ),
    ),
    RunVariant(name="v1", adapter="python_function", config={"callable": "m:f"}, metadata={"m": 1}),
    RunSummary(
        run_id="2026-05-03T10-30-00_eval",
        started_at=T0,
        finished_at=T0 + dt.timedelta(minutes=1),
        config_path="eval.yaml",
        config_hash="abc",
        cases_total=2,
        variants=[
            VariantSummary(
                name="v1",
                cases_total=2,
                cases_passed=1,
                cases_errored=0,
                pass_rate=0.5,
                avg_latency_ms=12.5,
                avg_cost_usd=0.1,
                avg_tokens_input=3.0,
                avg_tokens_output=4.0,
            )
        ],
        by_evaluator=[
            EvaluatorRollup(evaluator="e", by_variant={"v1": EvaluatorVariantRollup(pass_rate=0.5, avg_score=0.7)})
        ],
        comparison=ComparisonReport(
            baseline="v0",
            deltas=[
                VariantDelta(
                    variant="v1", pass_rate_delta=-0.5, avg_latency_delta_ms=3, regressions=["c1"], improvements=[]
                )
            ],
            kind="drift",
            baseline_run_id="old",
            regressions_count=1,
            improvements_count=0,
        ),
    ),
    FilesystemArtifact(
        case_id="c1",
        variant_name="v1",
        workspace_kind="tempdir_snapshot",
        before_manifest=FileManifest(files={"a.py": FileEntry(size=1, mode=0o644, mtime=1.5, sha256="00")}),
        after_manifest=FileManifest(),
        diff=FileDiff(removed=["a.py"], text_diffs={"a.py": "-x\n"}),
        artifacts_path="runs/r/artifacts/c1/v1",
    ),
]


@pytest.mark.parametrize("model", ROUND_TRIP, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model
    assert again.model_dump_json() == model.model_dump_json()


def test_persisted_models_carry_schema_version() -> None:
    for model in ROUND_TRIP:
        assert json.loads(model.model_dump_json())["schema_version"] == "1.0"
    with pytest.raises(ValidationError, match="unsupported schema_version"):
        EvalCase.model_validate({"id": "x", "schema_version": "2.1"})


def test_non_finite_numbers_are_rejected() -> None:
    with pytest.raises(ValidationError, match="finite number"):
        TraceMetrics(cost_usd=float("nan"))


def test_schema_has_no_opentelemetry_imports() -> None:
    from pathlib import Path

    package = Path(schema.__file__).parent
    for source in package.glob("*.py"):
        assert "opentelemetry" not in source.read_text(), source.name
