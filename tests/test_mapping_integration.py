"""End to end: the real decorators and OpenAI instrumentation emit spans, mapping reads them back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

openai = pytest.importorskip("openai")

import evaltrace  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402
from evaltrace.schema import ToolCall, ToolResult, TraceMessage  # noqa: E402

TOOL_CALL_RESPONSE = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
}
FINAL_RESPONSE = {
    "id": "chatcmpl-2",
    "object": "chat.completion",
    "created": 2,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "It is rainy in Paris."},
        }
    ],
    "usage": {"prompt_tokens": 80, "completion_tokens": 7, "total_tokens": 87},
}


@pytest.fixture
def instrumented(provider: TracerProvider) -> Iterator[None]:
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()
    settings.replace(previous)


def make_client() -> Any:
    responses = [TOOL_CALL_RESPONSE, FINAL_RESPONSE]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=responses.pop(0))

    http = httpx.Client(transport=httpx.MockTransport(handler))
    return openai.OpenAI(api_key="test", base_url="https://api.openai.com/v1", http_client=http, max_retries=0)


@pytest.mark.usefixtures("instrumented")
def test_agent_with_tool_loop_maps_to_trace(exporter: InMemorySpanExporter) -> None:
    client = make_client()

    @evaltrace.tool
    def get_weather(city: str) -> dict[str, Any]:
        return {"city": city, "sky": "rainy"}

    @evaltrace.agent
    def answer(question: str) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": question},
        ]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        call = first.choices[0].message.tool_calls[0]
        result = get_weather(**json.loads(call.function.arguments))
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        final = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return str(final.choices[0].message.content)

    assert answer("Weather in Paris?") == "It is rainy in Paris."
    spans = exporter.get_finished_spans()
    trace = trace_from_spans(spans)

    tool_span = next(s for s in spans if s.name == "execute_tool get_weather")
    assert trace.input == {"question": "Weather in Paris?"}
    assert trace.output.final_answer == "It is rainy in Paris."
    assert [(m.role, m.content) for m in trace.messages] == [
        ("system", "Be brief."),
        ("user", "Weather in Paris?"),
        ("assistant", None),
        ("tool", '{"city": "Paris", "sky": "rainy"}'),
        ("assistant", "It is rainy in Paris."),
    ]
    assert trace.messages[2] == TraceMessage(
        role="assistant",
        tool_call=ToolCall(
            id="call_abc", name="get_weather", arguments={"city": "Paris"}, started_at=trace.tool_calls[0].started_at
        ),
    )
    assert trace.tool_calls[0].started_at is not None
    assert int(trace.tool_calls[0].started_at.timestamp() * 1e6) == (tool_span.start_time or 0) // 1000
    assert trace.tool_results == [
        ToolResult(tool_call_id="call_abc", name="get_weather", content='{"city": "Paris", "sky": "rainy"}')
    ]
    assert (trace.metrics.token_input, trace.metrics.token_output) == (130, 17)
    assert trace.metrics.cost_usd is not None and trace.metrics.cost_usd > 0
    assert trace.error is None
    assert trace.run_id == "live"
    assert trace.extra.get("enrichment_errors") is None


@pytest.mark.usefixtures("provider")
def test_decorated_error_maps_to_trace_error(exporter: InMemorySpanExporter) -> None:
    @evaltrace.agent
    def broken(question: str) -> str:
        raise KeyError(question)

    with pytest.raises(KeyError):
        broken("x")
    trace = trace_from_spans(exporter.get_finished_spans())
    assert trace.error is not None
    assert (trace.error.type, trace.error.message) == ("exception", "KeyError: 'x'")
    assert trace.error.stack is not None and "raise KeyError(question)" in trace.error.stack
    assert trace.input == {"question": "x"}


def sse(chunks: list[dict[str, Any]]) -> bytes:
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta or finish else [],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@pytest.mark.usefixtures("instrumented")
def test_streamed_call_with_reasoning_maps_to_metrics(exporter: InMemorySpanExporter) -> None:
    body = sse(
        [
            chunk({"role": "assistant", "reasoning_content": "Think first."}),
            chunk({"content": "Hel"}),
            chunk({"content": "lo."}),
            chunk({}, finish="stop"),
            chunk({}, usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}),
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = openai.OpenAI(
        api_key="test", http_client=httpx.Client(transport=httpx.MockTransport(handler)), max_retries=0
    )

    @evaltrace.agent
    def greet() -> str:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    assert greet() == "Hello."
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [(m.role, m.content, m.thinking) for m in trace.messages] == [
        ("user", "Say hello", None),
        ("assistant", "Hello.", "Think first."),
    ]
    assert trace.output.final_answer == "Hello."
    assert trace.output.thinking == "Think first."
    metrics = trace.metrics
    assert (metrics.token_input, metrics.token_output) == (5, 4)
    assert metrics.stream_completed is True
    assert metrics.stream_chunks == 5
    assert metrics.latency_first_token_ms is not None and metrics.latency_last_token_ms is not None
    assert metrics.latency_first_token_ms <= metrics.latency_last_token_ms
