"""``instrument_mistral()`` on ``fim``, ``agents`` and ``beta.conversations``, through the real ``mistralai`` client.

No FIM, agents or conversations traffic was recorded (tests/fixtures/mistral-cassettes holds chat only):
* ``fim`` and ``agents`` answer with the chat completion types (``FIMCompletionResponse`` and
  ``ChatCompletionResponse`` have the fields of a chat completion; their streams yield the same
  ``CompletionEvent``), so the recorded chat responses and streams are served to them;
* the conversations bodies below are built from the SDK's own types (``ConversationResponse``,
  ``ConversationEvents``: ``MessageOutputEntry``, ``FunctionCallEntry``, ``ToolExecutionEntry``, ...); the SDK
  parses every one of them, so a shape it does not accept fails the test.
The client talks HTTP to ``cassettes.ReplayServer`` on 127.0.0.1 (``server_url``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mistralai")

from mistral_replay import STREAM, THINKING, TOOL_STREAM, call_kwargs, interactions
from mistralai.client import Mistral
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace.instrumentation.mistral import MistralInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[MistralInstrumentor]:
    instrumentor = evaltrace.instrument_mistral()
    yield instrumentor
    evaltrace.uninstrument_mistral()


pytestmark = pytest.mark.usefixtures("instrumented")


def _span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _json(span: ReadableSpan, key: str) -> Any:
    return json.loads(str(_attrs(span)[key]))


def _served(body: dict[str, Any] | str, uri: str, content_type: str = "application/json") -> Recorded:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return Recorded("POST", uri, b"", 200, "OK", [("content-type", content_type)], raw)


def _served_as(recorded: list[Recorded], uri: str) -> list[Recorded]:
    """Recorded chat responses, served for another endpoint of the same response type."""
    return [Recorded(r.method, uri, b"", r.status, r.reason, r.headers, r.body) for r in recorded]


# --- FIM: text_completion -------------------------------------------------------------------------------------

FIM_URI = "https://api.mistral.ai/v1/fim/completions"
FIM_BODY = {  # FIMCompletionResponse: the chat completion's fields (SDK type)
    "id": "fim-1",
    "object": "chat.completion",
    "model": "codestral-2508",
    "created": 1764300000,
    "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "    return a + b\n"}, "finish_reason": "stop"}
    ],
}
FIM_KWARGS: dict[str, Any] = {
    "model": "codestral-latest",
    "prompt": "def add(a, b):\n",
    "suffix": "\nprint(add(1, 2))",
    "temperature": 0.2,
    "max_tokens": 64,
    "random_seed": 7,
    "stop": ["\n\n"],
}


async def test_fim_complete_is_a_text_completion_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_served(FIM_BODY, FIM_URI)]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if is_async:
                result = await client.fim.complete_async(**FIM_KWARGS)
            else:
                result = client.fim.complete(**FIM_KWARGS)
    assert result.choices[0].message.content == "    return a + b\n"
    assert srv.received[0].path == "/v1/fim/completions"
    span = _span(exporter)
    attrs = _attrs(span)
    assert span.name == "text_completion codestral-latest" and span.kind is SpanKind.CLIENT
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "text_completion"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "mistral_ai"
    assert attrs[sc.GEN_AI_REQUEST_MODEL] == "codestral-latest" and attrs[sc.GEN_AI_RESPONSE_MODEL] == "codestral-2508"
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2 and attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert attrs[sc.GEN_AI_REQUEST_SEED] == 7 and list(attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES]) == ["\n\n"]
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "fim-1"
    assert sc.GEN_AI_REQUEST_STREAM not in attrs  # set only when the request streams (conventions.md)
    assert list(attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (12, 9)
    # The prompt is the user's text; the code after the gap is kept apart.
    assert _json(span, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [{"type": "text", "content": "def add(a, b):\n"}]}
    ]
    assert attrs[sc.MISTRAL_FIM_SUFFIX] == "\nprint(add(1, 2))"
    assert _json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"] == [{"type": "text", "content": "    return a + b\n"}]


async def test_fim_stream_span_ends_with_the_stream(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """The recorded chat stream (``CompletionEvent``s, what ``fim.stream`` yields too) served to ``fim.stream``."""
    recorded = interactions(STREAM)
    expected = "".join(
        c["delta"].get("content") or ""
        for line in recorded[0].body.decode().split("\n\n")
        if line.startswith("data: {")
        for c in json.loads(line[6:])["choices"]
    )
    with ReplayServer(_served_as(recorded, FIM_URI)) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            kwargs = {"model": "codestral-latest", "prompt": "The capital of France is", "suffix": "."}
            if is_async:
                stream = await client.fim.stream_async(**kwargs)
                text = "".join([e.data.choices[0].delta.content or "" async for e in stream])
            else:
                text = "".join(e.data.choices[0].delta.content or "" for e in client.fim.stream(**kwargs))
    assert text == expected and srv.received[0].json()["stream"] is True
    span = _span(exporter)
    attrs = _attrs(span)
    assert span.name == "text_completion codestral-latest"
    assert attrs[sc.GEN_AI_REQUEST_STREAM] is True
    assert attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    assert list(attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert _json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"] == [{"type": "text", "content": expected}]
    assert attrs[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_EXHAUSTED


# --- agents: chat with gen_ai.agent.id ------------------------------------------------------------------------

AGENTS_URI = "https://api.mistral.ai/v1/agents/completions"
AGENT_ID = "ag_0199d1c2d3e4f5"


async def test_agents_complete_is_a_chat_span_with_the_agent_id(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """The recorded magistral answer (thinking, then text) served to ``agents.complete``."""
    (recorded,) = interactions(THINKING)
    messages = call_kwargs(recorded)["messages"]
    with ReplayServer(_served_as([recorded], AGENTS_URI)) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if is_async:
                await client.agents.complete_async(agent_id=AGENT_ID, messages=messages, max_tokens=512)
            else:
                client.agents.complete(agent_id=AGENT_ID, messages=messages, max_tokens=512)
    assert srv.received[0].path == "/v1/agents/completions"
    span = _span(exporter)
    attrs = _attrs(span)
    # No request model (the agent's preset has it): the span is named by the operation alone.
    assert span.name == "chat" and attrs[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert sc.GEN_AI_REQUEST_MODEL not in attrs
    assert attrs[sc.GEN_AI_AGENT_ID] == AGENT_ID and sc.GEN_AI_REQUEST_STREAM not in attrs
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == recorded.response_json()["model"]
    assert attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 512
    assert len(_json(span, sc.GEN_AI_INPUT_MESSAGES)) == len(messages)
    parts = _json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == recorded.response_json()["usage"]["prompt_tokens"]


async def test_agents_stream_keeps_the_tool_call(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """The recorded streamed tool call served to ``agents.stream`` / ``stream_async``."""
    recorded = interactions(TOOL_STREAM)
    messages = call_kwargs(recorded[0])["messages"]
    with ReplayServer(_served_as(recorded, AGENTS_URI)) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if is_async:
                events = [e async for e in await client.agents.stream_async(agent_id=AGENT_ID, messages=messages)]
            else:
                events = list(client.agents.stream(agent_id=AGENT_ID, messages=messages))
    assert events
    span = _span(exporter)
    attrs = _attrs(span)
    assert span.name == "chat" and attrs[sc.GEN_AI_AGENT_ID] == AGENT_ID
    assert attrs[sc.GEN_AI_REQUEST_STREAM] is True
    assert list(attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == ["tool_calls"]
    (call,) = [p for p in _json(span, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"] if p["type"] == "tool_call"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "San Francisco"}


# --- beta.conversations: invoke_agent -------------------------------------------------------------------------

CONVERSATIONS_URI = "https://api.mistral.ai/v1/conversations"
CONVERSATION_ID = "conv_0199d1c2aa"
WEB_SEARCH_ANSWER = {  # ConversationResponse: a built-in tool the server ran, then the answer with its source
    "object": "conversation.response",
    "conversation_id": CONVERSATION_ID,
    "outputs": [
        {
            "object": "entry",
            "type": "tool.execution",
            "id": "tool_exec_1",
            "name": "web_search",
            "arguments": '{"query": "capital of France"}',
            "info": {},
        },
        {
            "object": "entry",
            "type": "message.output",
            "id": "msg_1",
            "role": "assistant",
            "model": "mistral-medium-2505",
            "agent_id": AGENT_ID,
            "content": [
                {"type": "text", "text": "Paris is the capital of France."},
                {"type": "tool_reference", "tool": "web_search", "title": "France", "url": "https://example.org"},
            ],
        },
    ],
    "usage": {"prompt_tokens": 40, "completion_tokens": 11, "total_tokens": 51, "connector_tokens": 120},
}
FUNCTION_CALL = {  # ConversationResponse: the agent asks the client to run one of its function tools
    "object": "conversation.response",
    "conversation_id": CONVERSATION_ID,
    "outputs": [
        {
            "object": "entry",
            "type": "function.call",
            "id": "fc_1",
            "tool_call_id": "call_42",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "model": "mistral-medium-2505",
        }
    ],
    "usage": {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38},
}


async def test_conversation_start_is_an_invoke_agent_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_served(WEB_SEARCH_ANSWER, CONVERSATIONS_URI)]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            kwargs: dict[str, Any] = {
                "agent_id": AGENT_ID,
                "inputs": "What is the capital of France?",
                "completion_args": {"temperature": 0.3, "max_tokens": 100},
            }
            if is_async:
                response = await client.beta.conversations.start_async(**kwargs)
            else:
                response = client.beta.conversations.start(**kwargs)
    assert response.conversation_id == CONVERSATION_ID
    span = _span(exporter)
    attrs = _attrs(span)
    assert span.name == "invoke_agent" and span.kind is SpanKind.CLIENT
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attrs[sc.GEN_AI_AGENT_ID] == AGENT_ID and attrs[sc.GEN_AI_CONVERSATION_ID] == CONVERSATION_ID
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == "mistral-medium-2505" and sc.GEN_AI_REQUEST_STREAM not in attrs
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.3 and attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 100
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (40, 11)
    assert sc.GEN_AI_RESPONSE_FINISH_REASONS not in attrs  # the API has none: never invented
    assert _json(span, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is the capital of France?"}]}
    ]
    (message,) = _json(span, sc.GEN_AI_OUTPUT_MESSAGES)
    assert message["finish_reason"] == "stop"
    assert [p["type"] for p in message["parts"]] == ["server_tool_call", "text", "tool_reference"]
    assert message["parts"][0]["name"] == "web_search"
    assert message["parts"][0]["server_tool_call"]["arguments"] == '{"query": "capital of France"}'
    assert message["parts"][1]["content"] == "Paris is the capital of France."


async def test_conversation_append_with_a_tool_result_and_a_model(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``append`` gives the conversation id (no agent id, no model); ``start`` with a model names the span."""
    with ReplayServer(
        [_served(FUNCTION_CALL, CONVERSATIONS_URI), _served(WEB_SEARCH_ANSWER, CONVERSATIONS_URI)]
    ) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            start: dict[str, Any] = {
                "model": "mistral-medium-latest",
                "instructions": "Answer briefly.",
                "inputs": [{"role": "user", "content": "Weather in Paris?"}],
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}},
                    },
                    {"type": "web_search"},
                ],
            }
            result = {"type": "function.result", "tool_call_id": "call_42", "result": "sunny"}
            append: dict[str, Any] = {"conversation_id": CONVERSATION_ID, "inputs": [result]}
            if is_async:
                await client.beta.conversations.start_async(**start)
                await client.beta.conversations.append_async(**append)
            else:
                client.beta.conversations.start(**start)
                client.beta.conversations.append(**append)
    assert srv.received[1].path == f"/v1/conversations/{CONVERSATION_ID}"
    first, second = exporter.get_finished_spans()
    assert first.name == "invoke_agent mistral-medium-latest"
    assert _json(first, sc.GEN_AI_SYSTEM_INSTRUCTIONS) == [{"type": "text", "content": "Answer briefly."}]
    tools = _json(first, sc.GEN_AI_TOOL_DEFINITIONS)
    assert [t.get("name") for t in tools] == ["get_weather", None] and tools[1]["type"] == "web_search"
    (asked,) = _json(first, sc.GEN_AI_OUTPUT_MESSAGES)
    assert asked["finish_reason"] == "tool_call"
    assert asked["parts"] == [
        {"type": "tool_call", "id": "call_42", "name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert second.name == "invoke_agent" and _attrs(second)[sc.GEN_AI_CONVERSATION_ID] == CONVERSATION_ID
    assert _json(second, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_42", "response": "sunny"}]}
    ]


def _sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


STREAMED = [  # ConversationEvents, by their data's type (SDK types)
    {"type": "conversation.response.started", "conversation_id": CONVERSATION_ID},
    {"type": "tool.execution.started", "id": "tool_exec_1", "name": "web_search", "arguments": "{}"},
    {"type": "tool.execution.done", "id": "tool_exec_1", "name": "web_search", "info": {}},
    {"type": "message.output.delta", "id": "msg_1", "model": "mistral-medium-2505", "content": "Paris is "},
    {"type": "message.output.delta", "id": "msg_1", "model": "mistral-medium-2505", "content": "the capital."},
    {
        "type": "function.call.delta",
        "id": "fc_1",
        "name": "get_weather",
        "tool_call_id": "call_9",
        "arguments": '{"city": ',
    },
    {
        "type": "function.call.delta",
        "id": "fc_1",
        "name": "get_weather",
        "tool_call_id": "call_9",
        "arguments": '"Paris"}',
    },
    {"type": "conversation.response.done", "usage": {"prompt_tokens": 50, "completion_tokens": 14, "total_tokens": 64}},
]


async def test_conversation_stream_accumulates_text_calls_and_usage(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    body = _served(_sse(STREAMED), CONVERSATIONS_URI + "#stream", "text/event-stream")
    with ReplayServer([body]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            kwargs: dict[str, Any] = {"agent_id": AGENT_ID, "inputs": "Capital of France, and its weather?"}
            if is_async:
                stream = await client.beta.conversations.start_stream_async(**kwargs)
                events = [e async for e in stream]
            else:
                events = list(client.beta.conversations.start_stream(**kwargs))
    assert len(events) == len(STREAMED)
    span = _span(exporter)
    attrs = _attrs(span)
    assert span.name == "invoke_agent" and attrs[sc.GEN_AI_CONVERSATION_ID] == CONVERSATION_ID
    assert attrs[sc.GEN_AI_RESPONSE_MODEL] == "mistral-medium-2505" and attrs[sc.GEN_AI_REQUEST_STREAM] is True
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (50, 14)
    assert attrs[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_EXHAUSTED
    assert attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] >= 0
    (message,) = _json(span, sc.GEN_AI_OUTPUT_MESSAGES)
    assert message["finish_reason"] == "tool_call"
    assert message["parts"] == [  # in the order the server produced them, as in a ConversationResponse
        {
            "type": "server_tool_call",
            "id": "tool_exec_1",
            "name": "web_search",
            "server_tool_call": {"type": "web_search", "arguments": "{}"},  # as a whole response's entry records it
        },
        {"type": "text", "content": "Paris is the capital."},
        {"type": "tool_call", "id": "call_9", "name": "get_weather", "arguments": {"city": "Paris"}},
    ]


@pytest.mark.parametrize("method", ["append_stream", "append_stream_async", "restart_stream", "restart_stream_async"])
async def test_every_conversation_stream_method_marks_its_span_streamed(
    method: str, exporter: InMemorySpanExporter
) -> None:
    """``append`` and ``restart`` streams (sync and async): ``gen_ai.request.stream``, as on ``start_stream``."""
    body = _served(_sse(STREAMED), CONVERSATIONS_URI + "#stream", "text/event-stream")
    kwargs: dict[str, Any] = {"conversation_id": CONVERSATION_ID, "inputs": "and its weather?"}
    if method.startswith("restart"):
        kwargs["from_entry_id"] = "msg_1"
    with ReplayServer([body]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            called = getattr(client.beta.conversations, method)(**kwargs)
            events = [e async for e in await called] if method.endswith("_async") else list(called)
    assert len(events) == len(STREAMED) and srv.received[0].json()["stream"] is True
    attrs = _attrs(_span(exporter))
    assert attrs[sc.GEN_AI_OPERATION_NAME] == "invoke_agent" and attrs[sc.GEN_AI_REQUEST_STREAM] is True
    assert attrs[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_EXHAUSTED


def test_a_conversation_stream_error_event_fails_the_span(exporter: InMemorySpanExporter) -> None:
    events = [
        {"type": "conversation.response.started", "conversation_id": CONVERSATION_ID},
        {"type": "conversation.response.error", "message": "Agent not found", "code": 404},
    ]
    with ReplayServer([_served(_sse(events), CONVERSATIONS_URI + "#stream", "text/event-stream")]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            assert len(list(client.beta.conversations.append_stream(conversation_id=CONVERSATION_ID, inputs="hi"))) == 2
    span = _span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert _attrs(span)[sc.ERROR_TYPE] == "404"
    assert _attrs(span)[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_TRUNCATED


def test_a_conversation_stream_left_early_ends_its_span_once(exporter: InMemorySpanExporter) -> None:
    body = _served(_sse(STREAMED), CONVERSATIONS_URI + "#stream", "text/event-stream")
    with ReplayServer([body]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            with client.beta.conversations.start_stream(agent_id=AGENT_ID, inputs="hi") as stream:
                for _ in stream:
                    break
    span = _span(exporter)
    assert _attrs(span)[sc.EVALTRACE_STREAM_END_REASON] == sc.STREAM_END_CLOSED


def test_content_stays_out_when_capture_is_off(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """With content capture off: no prompt, suffix, inputs or outputs; the usage and ids are still recorded."""
    from evaltrace._internal import settings

    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([_served(FIM_BODY, FIM_URI), _served(WEB_SEARCH_ANSWER, CONVERSATIONS_URI)]) as srv:
            with Mistral(api_key="x", server_url=srv.url) as client:
                client.fim.complete(**FIM_KWARGS)
                client.beta.conversations.restart(
                    conversation_id=CONVERSATION_ID, from_entry_id="msg_0", inputs="again"
                )
    finally:
        settings.replace(previous)
    fim, conversation = exporter.get_finished_spans()
    for span in (fim, conversation):
        attrs = _attrs(span)
        assert not {sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES, sc.MISTRAL_FIM_SUFFIX} & set(attrs)
        assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert conversation.name == "invoke_agent" and _attrs(conversation)[sc.GEN_AI_CONVERSATION_ID] == CONVERSATION_ID
