"""``evaltrace worker`` evaluates OpenInference spans sent over OTLP, with kind filters derived from their attributes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from otlp_receivers import poll

from evaltrace._internal import semconv
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.schema import Score
from evaltrace.worker import EvaluationWorker

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
AGENT_ID, LLM_ID, TOOL_ID = 0xEEE19B7EC3C1B174, 0xEEE19B7EC3C1B175, 0xEEE19B7EC3C1B176
seen: dict[str, Any] = {}


@evaluator(name="grounded_answer")
def grounded_answer(trace: Any) -> bool:
    seen["llm"] = trace
    return trace.output.final_answer == "It is rainy in Paris." and trace.metrics.token_input == 40


@evaluator(name="tool_ok")
def tool_ok(trace: Any) -> bool:
    seen["tool"] = trace
    return [r.content for r in trace.tool_results] == ["rainy"]


def openinference_spans() -> list[ReadableSpan]:
    """An agent, its model call and its tool call, as openinference-instrumentation-openai writes them."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    resource = Resource({"service.name": "phoenix-app"})
    agent_ctx = SpanContext(TRACE_ID, AGENT_ID, False, flags)

    def make(span_id: int, name: str, attributes: dict[str, Any], offset: int, parent: bool = True) -> ReadableSpan:
        return ReadableSpan(
            name=name,
            context=SpanContext(TRACE_ID, span_id, False, flags),
            parent=agent_ctx if parent else None,
            resource=resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            start_time=1_700_000_000_000_000_000 + offset,
            end_time=1_700_000_000_500_000_000 + offset,
        )

    llm = make(
        LLM_ID,
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Weather in Paris?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "It is rainy in Paris.",
            "llm.token_count.prompt": 40,
            "llm.token_count.completion": 7,
        },
        1,
    )
    tool = make(
        TOOL_ID,
        "get_weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": '{"city": "Paris"}',
            "output.value": "rainy",
        },  # fmt: skip
        2,
    )
    agent = make(AGENT_ID, "agent", {"openinference.span.kind": "AGENT", "input.value": "Weather?"}, 0, parent=False)
    return [llm, tool, agent]


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def worker(exported: InMemorySpanExporter, tmp_path: Path) -> Iterator[EvaluationWorker]:
    specs = [EvaluatorSpec(grounded_answer, span_kinds={"llm"}), EvaluatorSpec(tool_ok, span_kinds={"tool"})]
    options = {"dead_letter_dir": None, "sink_schedule_delay_s": 0.05, "emit_log_events": False}
    with EvaluationWorker(
        specs, [JsonlScoreSink(tmp_path / "scores.jsonl")], [exported], port=0, grpc_port=0, batch=False,
        evaluation_options=options,
    ) as running:  # fmt: skip
        yield running


def read_scores(path: Path) -> list[Score]:
    if not path.exists():
        return []
    text = path.read_text()
    complete = text[
        : text.rfind("\n") + 1
    ]  # polled while the worker writes: a last line without its newline is unfinished
    return [Score.model_validate_json(line) for line in complete.splitlines() if line.strip()]


def test_openinference_spans_are_evaluated_by_kind(
    worker: EvaluationWorker, exported: InMemorySpanExporter, tmp_path: Path
) -> None:
    seen.clear()
    sender = HttpExporter(endpoint=worker.url + "/v1/traces")
    assert sender.export(openinference_spans()) is SpanExportResult.SUCCESS
    sender.shutdown()
    poll(lambda: len(exported.get_finished_spans()) == 3)
    assert worker.force_flush(10_000)

    scores = poll(lambda: (s := read_scores(tmp_path / "scores.jsonl")) and len(s) == 2 and s)
    by_name = {s.name: s for s in scores}
    assert by_name["grounded_answer"].observation_id == format(LLM_ID, "016x")
    assert by_name["tool_ok"].observation_id == format(TOOL_ID, "016x")
    assert [m.role for m in seen["llm"].messages] == ["user", "assistant"]
    assert seen["tool"].tool_calls[0].arguments == {"city": "Paris"}

    enriched = {s.context.span_id: s for s in exported.get_finished_spans() if s.context is not None}
    assert (enriched[LLM_ID].attributes or {})["evaltrace.eval.grounded_answer.passed"] is True
    assert (enriched[TOOL_ID].attributes or {})["evaltrace.eval.tool_ok.passed"] is True
    assert not [e for e in enriched[AGENT_ID].events if e.name == semconv.GEN_AI_EVALUATION_RESULT_EVENT]
