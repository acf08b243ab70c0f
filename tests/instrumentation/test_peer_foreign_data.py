"""Every datum a real peer OpenAI instrumentation records reaches the Trace (issue 26, "Foreign spans").

The peers (OpenInference, OpenLLMetry, the official OTel ``openai-v2``) wrap the real openai client, which talks
HTTP to :class:`cassettes.ReplayServer` on 127.0.0.1 serving recorded OpenAI responses; their spans are then
mapped by ``trace_from_spans``. Checked here: stream timings (OpenInference's first-token event, OpenLLMetry's
chunk events), OpenInference's legacy ``function_call`` attributes, image parts, a Responses ``input`` list, and
each model call's model and finish reasons. Peers a test needs skip when missing (installed in CI).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_peer_conventions import PEERS, Peer, peer_env, peer_recording
from tests_paths import cassette

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace.evaluators import FactCheck, Judge, Latency, ToolCalled
from evaltrace.evaluators._base import question_text
from evaltrace.instrumentation.openai import OpenAIInstrumentor
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace
from judge_server import serve_judge

pytestmark = pytest.mark.usefixtures("cassettes", "capture")
__all__ = ["peer_env"]  # the fixture, used by name below

OPENINFERENCE, OPENLLMETRY, OTEL_V2 = (
    next(p for p in PEERS if p.name == n) for n in ("openinference", "openllmetry", "otel-openai-v2")
)
STREAMING = "test_chat_completion_streaming.yaml"
TOOL_CALLS = "test_chat_completion_tool_calls_with_content.yaml"
AGENT_TOOL_ERROR = FIXTURES / "openai-agents-cassettes/logfire/test_openai_agents/test_function_tool_exception.yaml"
# A 1x1 PNG, sent inline as OpenAI's vision guide shows (``data:`` URL with base64).
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

Call = Callable[[openai.OpenAI, Recorded], None]


def chat(client: openai.OpenAI, item: Recorded) -> None:
    """Send the recorded Chat request; drain a stream."""
    request = item.request_json()
    result = client.chat.completions.create(**request)
    if request.get("stream"):
        for _ in result:  # type: ignore[union-attr]
            pass


def responses(client: openai.OpenAI, item: Recorded) -> None:
    """Send the recorded Responses request."""
    client.responses.create(**item.request_json())


def peer_spans(
    peer: Peer, interactions: list[Recorded], env: pytest.MonkeyPatch, call: Call = chat
) -> list[ReadableSpan]:
    """The spans ``peer`` records while the real client sends each recorded request to the replay server."""
    with peer_recording(peer, env) as (tracer_provider, exporter):
        send(interactions, tracer_provider, call)
    return list(exporter.get_finished_spans())


def send(interactions: list[Recorded], tracer_provider: TracerProvider, call: Call) -> None:
    """Send every recorded request through the real client, inside one application span (one trace)."""
    with ReplayServer(interactions) as server, tracer_provider.get_tracer("app").start_as_current_span("answer"):
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        for item in interactions:
            call(client, item)


def own_trace(
    interactions: list[Recorded], provider: TracerProvider, exporter: InMemorySpanExporter, call: Call = chat
) -> Trace:
    """The Trace of evaltrace's own spans of the same calls (``provider`` is evaltrace's)."""
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        send(interactions, provider, call)
    finally:
        instrumentor.uninstrument()
    return trace_from_spans(exporter.get_finished_spans())


def with_request(recorded: Recorded, request: dict[str, Any]) -> Recorded:
    """The recorded response, served to a request of our own (the response shape stays the recorded one)."""
    return Recorded(
        recorded.method,
        recorded.uri,
        json.dumps(request).encode(),
        recorded.status,
        recorded.reason,
        recorded.headers,
        recorded.body,
    )


def ms_after_start(span: ReadableSpan, ns: int) -> int:
    assert span.start_time is not None
    return round((ns - span.start_time) / 1e6)


# --- stream timings ----------------------------------------------------------------------------------------


def test_openinference_first_token_event_gives_the_first_token_latency(
    provider: TracerProvider, peer_env: pytest.MonkeyPatch
) -> None:
    spans = peer_spans(OPENINFERENCE, load_cassette(cassette(STREAMING)), peer_env)
    (llm,) = [s for s in spans if s.name != "answer"]
    (event,) = [e for e in llm.events if e.name == "First Token Stream Event"]
    trace = trace_from_spans(spans)

    assert trace.metrics.latency_first_token_ms == ms_after_start(llm, event.timestamp)
    # A first-token limit applies to OpenInference spans (before, the figure was "not reported": never fired).
    limit = Latency(max_first_token_ms=0.5).evaluate(trace)
    assert "latency_first_token_ms" not in limit.detail.get("not_reported", [])
    if trace.metrics.latency_first_token_ms:  # a whole millisecond or more: over the half-millisecond limit
        assert not limit.passed and limit.detail["over_limit"] == ["latency_first_token_ms"]


def test_openllmetry_chunk_events_give_first_and_last_chunk_latency_chunks_and_rate(
    provider: TracerProvider, peer_env: pytest.MonkeyPatch
) -> None:
    spans = peer_spans(OPENLLMETRY, load_cassette(cassette(STREAMING)), peer_env)
    (llm,) = [s for s in spans if s.name != "answer"]
    chunks = [e.timestamp for e in llm.events if e.name == "gen_ai.content.completion.chunk"]
    assert len(chunks) > 2, "OpenLLMetry records one event per chunk"
    trace = trace_from_spans(spans)

    assert trace.metrics.latency_first_token_ms == ms_after_start(llm, chunks[0])
    assert trace.metrics.latency_last_token_ms == ms_after_start(llm, chunks[-1])
    assert trace.metrics.stream_chunks == len(chunks)
    output_tokens = (llm.attributes or {})["gen_ai.usage.output_tokens"]
    assert trace.metrics.tokens_per_second == pytest.approx(output_tokens / ((chunks[-1] - chunks[0]) / 1e9))


# --- OpenInference's legacy function_call ------------------------------------------------------------------


def function_call_turns() -> list[Recorded]:
    """A pre-tools ``functions`` conversation: the model calls ``get_weather``, then answers from its result.

    No recording of a ``function_call`` response exists in the fixture sets: the first response is the recorded
    completion of ``test_chat_completion_with_content.yaml`` with its message replaced by a ``function_call``
    as ``openai.types.chat.ChatCompletionMessage`` defines it (``finish_reason`` ``function_call``); the second
    is that recorded completion as it is.
    """
    (answer,) = load_cassette(cassette("test_chat_completion_with_content.yaml"))
    body = json.loads(answer.body)
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    body["choices"][0]["finish_reason"] = "function_call"
    functions = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    call = with_request(answer, {"model": "gpt-4o-mini", "messages": ask, "functions": functions})
    call.body = json.dumps(body).encode()
    history = [
        *ask,
        {"role": "assistant", "content": None, "function_call": body["choices"][0]["message"]["function_call"]},
        {"role": "function", "name": "get_weather", "content": "rainy"},
    ]
    return [call, with_request(answer, {"model": "gpt-4o-mini", "messages": history, "functions": functions})]


def conversation(trace: Trace) -> list[tuple[Any, ...]]:
    return [
        (m.role, m.content, m.tool_call and (m.tool_call.name, m.tool_call.arguments), m.name) for m in trace.messages
    ]


def test_openinference_legacy_function_call_is_a_tool_call(
    provider: TracerProvider, exporter: InMemorySpanExporter, peer_env: pytest.MonkeyPatch
) -> None:
    spans = peer_spans(OPENINFERENCE, function_call_turns(), peer_env)
    attributes = next(s.attributes or {} for s in spans if s.name != "answer")
    assert attributes["llm.output_messages.0.message.function_call_name"] == "get_weather"
    trace = trace_from_spans(spans)

    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert ToolCalled("get_weather", arguments={"city": "Paris"}).evaluate(trace).passed
    # Input side (the second call's history: assistant function_call, function result) and output side give
    # the conversation evaltrace's own spans of the same calls give.
    assert conversation(trace) == conversation(own_trace(function_call_turns(), provider, exporter))
    assert conversation(trace)[1:3] == [
        ("assistant", None, ("get_weather", {"city": "Paris"}), None),
        ("tool", "rainy", None, "get_weather"),
    ]


# --- image parts -------------------------------------------------------------------------------------------


def image_question() -> list[Recorded]:
    """A vision question (text + inline PNG). No recorded vision exchange exists in the fixture sets: the request
    follows OpenAI's vision guide, the response is the recorded ``test_chat_completion_with_content`` one."""
    (answer,) = load_cassette(cassette("test_chat_completion_with_content.yaml"))
    content = [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    return [with_request(answer, {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]})]


def test_openinference_image_is_a_typed_part_and_the_judge_reads_the_text_only(
    provider: TracerProvider, peer_env: pytest.MonkeyPatch
) -> None:
    spans = peer_spans(OPENINFERENCE, image_question(), peer_env)
    trace = trace_from_spans(spans)
    llm = next(s for s in spans if s.name != "answer")
    assert PNG in json.dumps(dict(llm.attributes or {})), "OpenInference records the image inline"

    (user, *_) = trace.messages
    assert user.content == {
        "parts": [
            {"type": "text", "content": "What is in this image?"},
            {"type": "uri", "modality": "image", "uri": f"data:image/png;base64,<omitted {len(PNG)} bytes>",
             "mime_type": "image/png"},
        ]
    }  # fmt: skip
    assert PNG not in trace.model_dump_json()
    assert question_text(trace) == "What is in this image?"
    verdict = {"answer": "A pixel.", "evaluation_score": 1.0, "evaluation_summary": "fine"}
    with serve_judge(lambda body: verdict) as server:
        judge = Judge("gpt-4o-mini", base_url=server.url, api_key="test", max_retries=0)
        result = asyncio.run(FactCheck(judge=judge).evaluate(trace))
    assert result.passed, result.reason
    (request,) = server.requests
    prompt = json.dumps(request["body"]["messages"])
    assert "What is in this image?" in prompt
    assert PNG[:40] not in prompt and "image_url" not in prompt and '"parts"' not in prompt


# --- Responses input lists ---------------------------------------------------------------------------------


@pytest.mark.parametrize("peer", [OPENINFERENCE, OPENLLMETRY], ids=lambda p: p.name)
def test_a_responses_input_list_becomes_messages_and_the_question(
    peer: Peer, provider: TracerProvider, exporter: InMemorySpanExporter, peer_env: pytest.MonkeyPatch
) -> None:
    """An Agents SDK run (recorded): the model calls a tool, the tool fails, the second request's ``input`` list
    holds the user message, the ``function_call`` and its ``function_call_output``."""
    interactions = load_cassette(AGENT_TOOL_ERROR)
    spans = peer_spans(peer, interactions, peer_env, responses)
    expected = own_trace(load_cassette(AGENT_TOOL_ERROR), provider, exporter, responses)
    second = next(s for s in reversed(spans) if s.name != "answer")
    trace = trace_from_spans(spans, root=second)  # the model call alone: its input is the Responses list

    # OpenInference records the request body (with the raw list) as input.value; OpenLLMetry records none.
    assert trace.input == ({"input": "Call the tool."} if "input.value" in (second.attributes or {}) else {})
    assert question_text(trace) == "Call the tool."
    assert [(m.role, m.content) for m in trace.messages[:1]] == [("user", "Call the tool.")]
    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert trace.messages[2].content == expected.messages[2].content
    assert trace.messages[2].tool_call_id == "call_OpJ32C09GImFzxYLe01MiOOd"


# --- model and finish reasons ------------------------------------------------------------------------------


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
@pytest.mark.parametrize("name", [TOOL_CALLS, STREAMING], ids=["tool_calls", "streaming"])
def test_each_model_call_carries_its_model_and_finish_reasons(
    peer: Peer, name: str, provider: TracerProvider, exporter: InMemorySpanExporter, peer_env: pytest.MonkeyPatch
) -> None:
    interactions = load_cassette(cassette(name))
    own = own_trace(interactions, provider, exporter)
    trace = trace_from_spans(peer_spans(peer, load_cassette(cassette(name)), peer_env))

    def steps(t: Trace) -> list[tuple[Any, ...]]:
        return [(s.model, s.request_model, s.finish_reasons) for s in t.llm_steps]

    assert steps(own) == RECORDED_STEPS[name]  # evaltrace's own spans, from the recorded responses
    expected = RECORDED_STEPS[name]
    if peer is OPENLLMETRY:  # records the GenAI form of OpenAI's reasons (its OPENAI_FINISH_REASON_MAP); kept as is
        expected = [(m, r, ["tool_call" if f == "tool_calls" else f for f in fs]) for m, r, fs in expected]
    assert steps(trace) == expected
    llm = [s for s in trace_from_spans(exporter.get_finished_spans()).llm_steps]
    assert all(s.span_id and len(s.span_id) == 16 for s in llm)


# (response model, requested model, finish reasons) of each recorded call.
RECORDED_STEPS = {
    TOOL_CALLS: [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", ["tool_calls"]),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", ["stop"]),
    ],
    STREAMING: [("gpt-4-0613", "gpt-4", ["stop"])],
}
