"""``evaltrace worker``: a foreign model span that answered with tool calls only is not judged (skip ``no_answer``).

Issue 24: through the worker, OpenLLMetry, OpenInference and official GenAI spans of a tool-call step were
judged on the last assistant text of their prompt history (and an OpenInference span's ``output.value``, the raw
response body, became the Trace's structured output). Spans are sent over OTLP/HTTP to a real worker on
127.0.0.1; each carries the same step: an earlier answer with an e-mail address, then a tool-calls-only reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from otlp_receivers import poll

from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluators import ContainsText, NoPII
from evaltrace.schema import Trace
from evaltrace.worker import EvaluationWorker

EARLIER = "Write to support.desk@example.com and we will answer within a day."
CALL_ARGS = '{"location": "Seattle, WA"}'
# What openinference-instrumentation-openai writes as output.value: the response body, as JSON.
RAW_BODY = json.dumps(
    {
        "id": "chatcmpl-ASYMU9Ntix7ePttk0MSuerJstef6U",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": []}}],
    }
)

OPENINFERENCE = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "gpt-4o-mini",
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "How do I reach support?",
    "llm.input_messages.1.message.role": "assistant",
    "llm.input_messages.1.message.content": EARLIER,
    "llm.input_messages.2.message.role": "user",
    "llm.input_messages.2.message.content": "Weather in Seattle?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_current_weather",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": CALL_ARGS,
    "input.value": json.dumps({"messages": [{"role": "user", "content": "Weather in Seattle?"}]}),
    "input.mime_type": "application/json",
    "output.value": RAW_BODY,
    "output.mime_type": "application/json",
}
OPENLLMETRY = {
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.prompt.0.role": "user",
    "gen_ai.prompt.0.content": "How do I reach support?",
    "gen_ai.prompt.1.role": "assistant",
    "gen_ai.prompt.1.content": EARLIER,
    "gen_ai.prompt.2.role": "user",
    "gen_ai.prompt.2.content": "Weather in Seattle?",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.finish_reason": "tool_calls",
    "gen_ai.completion.0.tool_calls.0.id": "call_1",
    "gen_ai.completion.0.tool_calls.0.name": "get_current_weather",
    "gen_ai.completion.0.tool_calls.0.arguments": CALL_ARGS,
}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


# The official GenAI conventions (opentelemetry-instrumentation-openai-v2 with content capture on): messages as
# gen_ai.input.messages / gen_ai.output.messages attributes, no evaltrace.* attribute.
GENAI = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.input.messages": json.dumps(
        [
            {"role": "user", "parts": [_text("How do I reach support?")]},
            {"role": "assistant", "parts": [_text(EARLIER)]},
            {"role": "user", "parts": [_text("Weather in Seattle?")]},
        ]
    ),
    "gen_ai.output.messages": json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "call_1", "name": "get_current_weather", "arguments": CALL_ARGS}],
                "finish_reason": "tool_call",
            }
        ]
    ),
}
# The older GenAI conventions: the same content as span events (gen_ai.user.message, ..., gen_ai.choice).
GENAI_EVENTS_SPAN = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"}
GENAI_EVENTS = [
    Event("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": "How do I reach support?"})}),
    Event("gen_ai.assistant.message", {"gen_ai.event.content": json.dumps({"content": EARLIER})}),
    Event("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": "Weather in Seattle?"})}),
    Event(
        "gen_ai.choice",
        {
            "gen_ai.event.content": json.dumps(
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_current_weather", "arguments": CALL_ARGS},
                            }
                        ],
                    },
                }
            )
        },
    ),
]

seen: list[Trace] = []


@evaluator(name="sees_step")
def sees_step(trace: Trace) -> bool:
    seen.append(trace)
    return True


@pytest.fixture
def exported() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def worker(exported: InMemorySpanExporter, tmp_path: Path) -> Iterator[EvaluationWorker]:
    specs = [EvaluatorSpec(e, span_kinds={"llm"}) for e in (NoPII(), ContainsText("Seattle"), sees_step)]
    options = {"dead_letter_dir": None, "emit_log_events": False, "hold_timeout_s": 60.0}
    with EvaluationWorker(
        specs, [], [exported], port=0, grpc_port=0, batch=False, evaluation_options=options
    ) as running:  # fmt: skip
        yield running


@pytest.mark.parametrize(
    ("attributes", "events"),
    [
        pytest.param(OPENINFERENCE, [], id="openinference"),
        pytest.param(OPENLLMETRY, [], id="openllmetry"),
        pytest.param(GENAI, [], id="genai-messages"),
        pytest.param(GENAI_EVENTS_SPAN, GENAI_EVENTS, id="genai-events"),
    ],
)
def test_foreign_tool_call_step_is_not_judged_on_the_earlier_answer(
    worker: EvaluationWorker, exported: InMemorySpanExporter, attributes: dict[str, Any], events: list[Event]
) -> None:
    seen.clear()
    context = SpanContext(0x6B8EFFF798038103D269B633813FC60C, 0x1EE19B7EC3C1B175, False, TraceFlags(1))
    span = ReadableSpan(
        name="chat gpt-4o-mini",
        context=context,
        resource=Resource({"service.name": "foreign-app"}),
        attributes=attributes,
        events=events,
        kind=SpanKind.CLIENT,
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_000_500_000_000,
    )
    sender = HttpExporter(endpoint=worker.url + "/v1/traces")
    assert sender.export([span]) is SpanExportResult.SUCCESS
    sender.shutdown()
    poll(lambda: len(exported.get_finished_spans()) == 1)
    assert worker.force_flush(10_000)

    (trace,) = seen
    assert trace.output.final_answer is None  # not the earlier turn's text
    assert trace.output.structured is None  # never the raw response body
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("get_current_weather", {"location": "Seattle, WA"})]
    (enriched,) = exported.get_finished_spans()
    attrs = enriched.attributes or {}
    for name in ("pii_leakage", "contains_text"):
        assert attrs[f"evaltrace.eval.{name}.outcome"] == "not_evaluated", name
        assert attrs[f"evaltrace.eval.{name}.skip_reason"] == "no_answer", name
