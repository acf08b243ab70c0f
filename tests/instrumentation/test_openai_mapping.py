"""The recorded two-call tool conversation, traced by the instrumentation, maps to the right Trace."""

from __future__ import annotations

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

mapping = pytest.importorskip("evaltrace.mapping")

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")


async def test_tool_calling_conversation_maps_to_trace(
    is_async: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    interactions = load(cassette("test_chat_completion_tool_calls_with_content.yaml"))
    api, _ = client(interactions, is_async)
    with provider.get_tracer("app").start_as_current_span("answer"):
        for item in interactions:
            result = api.chat.completions.create(**item.request)
            if is_async:
                await result
    spans = exporter.get_finished_spans()
    llm_spans = [s for s in spans if s.name.startswith("chat ")]
    assert len(llm_spans) == 2
    trace = mapping.trace_from_spans(spans)

    roles = [m.role for m in trace.messages]
    assert roles == ["system", "user", "assistant", "assistant", "tool", "tool", "assistant"]
    assert [(c.id, c.name, c.arguments) for c in trace.tool_calls] == [
        ("call_JpNb8OiAkbIbHzDggfpdDHpi", "get_current_weather", {"location": "Seattle, WA"}),
        ("call_vaFQc3zK6hHTRZKXRI5Eo2cJ", "get_current_weather", {"location": "San Francisco, CA"}),
    ]
    assert [(r.tool_call_id, r.content) for r in trace.tool_results] == [
        ("call_JpNb8OiAkbIbHzDggfpdDHpi", "50 degrees and raining"),
        ("call_vaFQc3zK6hHTRZKXRI5Eo2cJ", "70 degrees and sunny"),
    ]
    assert trace.messages[-1].content == (
        "Today, the weather in Seattle is 50 degrees and raining, while in San Francisco, it's 70 degrees and sunny."
    )
    assert trace.metrics.token_input == 75 + 99
    assert trace.metrics.token_output == 51 + 25
    expected_cost = sum(s.attributes["evaltrace.cost_usd"] for s in llm_spans)
    assert trace.metrics.cost_usd == pytest.approx(expected_cost)
    assert trace.metrics.cost_usd == pytest.approx(((75 + 99) * 0.15 + (51 + 25) * 0.6) / 1e6)
