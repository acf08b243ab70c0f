"""The Cohere v2 codec over the recorded responses, read back through the real ``cohere`` client.

Recordings: tests/fixtures/cohere-cassettes (non-streamed only). No ``chat_stream`` recording exists: the stream
tests serve an SSE body built from the SDK's event types (see cohere_replay.py).
"""

from __future__ import annotations

import pytest
from cohere_replay import client_of, cohere_interactions, stream_interaction, text_stream_events, tool_stream_events

from cassettes import ReplayServer
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Usage
from evaltrace.instrumentation.cohere import codec
from evaltrace.instrumentation.cohere.stream import ChatStreamAccumulator


def _chat(name: str) -> object:
    with ReplayServer(cohere_interactions(name)) as server, client_of(server.url) as client:
        return client.chat(model="command-r7b-12-2024", messages=[{"role": "user", "content": "hello"}])


def test_usage_is_the_billed_units_and_the_model_tokens_and_cache_are_kept_beside() -> None:
    """The model read 2935 input tokens, 2928 of them from the cache; 2406 were billed: the cache is no share of it."""
    response = _chat("test_request_usage_with_cached_tokens.yaml")
    outcome = codec.chat_outcome(response)
    assert outcome.response_id == "0bf8e1a5-2af6-4014-a539-c12363a043a3"
    assert outcome.finish_reasons == ["COMPLETE"]
    assert outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens, outcome.usage.cached_tokens) == (2406, 2, None)
    assert type(outcome.usage.input_tokens) is int  # the SDK types counts as floats
    assert codec.chat_summary(response) == (None, 2406, 2)  # the metric's counts: the span's
    assert codec.usage_attributes(response.usage) == {  # type: ignore[attr-defined]
        sc.COHERE_USAGE_BILLED_INPUT_TOKENS: 2406,
        sc.COHERE_USAGE_BILLED_OUTPUT_TOKENS: 2,
        sc.COHERE_USAGE_TOKENS_INPUT: 2935,
        sc.COHERE_USAGE_TOKENS_OUTPUT: 4,
        sc.COHERE_USAGE_CACHED_TOKENS: 2928,
    }
    assert outcome.output_messages == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hello!"}], "finish_reason": "stop"}
    ]


def test_without_billed_tokens_usage_is_the_model_tokens_with_their_cache_read() -> None:
    usage = {"tokens": {"input_tokens": 40.0, "output_tokens": 3.0}, "cached_tokens": 32.0,
             "billed_units": {"search_units": 1.0}}  # fmt: skip
    assert codec.usage_of(usage) == Usage(input_tokens=40, output_tokens=3, cached_tokens=32)
    assert codec.usage_attributes(usage) == {sc.COHERE_USAGE_BILLED_SEARCH_UNITS: 1}


def test_a_zero_bill_is_a_real_zero_and_each_direction_falls_back_alone() -> None:
    """Per direction: the billed count when billed_units has the field (0 included), else the model's count."""
    tokens = {"tokens": {"input_tokens": 40.0, "output_tokens": 3.0}, "cached_tokens": 32.0}
    assert codec.usage_of({**tokens, "billed_units": {"input_tokens": 0.0, "output_tokens": 0.0}}) == Usage(
        input_tokens=0, output_tokens=0
    )
    # An empty billed_units bills no tokens: the model's counts, with the cache read they include.
    assert codec.usage_of({**tokens, "billed_units": {}}) == Usage(input_tokens=40, output_tokens=3, cached_tokens=32)
    # Input billed, output not: the output is the model's, not dropped; the cache is no share of the billed input.
    assert codec.usage_of({**tokens, "billed_units": {"input_tokens": 5.0}}) == Usage(input_tokens=5, output_tokens=3)
    assert codec.usage_of({**tokens, "billed_units": {"output_tokens": 2.0}}) == Usage(
        input_tokens=40, output_tokens=2, cached_tokens=32
    )
    # An image-only embed bills images, not text tokens: they are not input tokens.
    image = {"billed_units": {"images": 1.0, "image_tokens": 1000.0}}
    assert codec.usage_of(image) == Usage()
    assert codec.usage_of({**image, "tokens": {"input_tokens": 1000.0}}) == Usage(input_tokens=1000)


def test_thinking_content_is_a_reasoning_part_before_the_answer() -> None:
    outcome = codec.chat_outcome(_chat("test_cohere_model_thinking_part.yaml"))
    assert outcome.output_messages is not None
    parts = outcome.output_messages[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text"]
    assert parts[0]["content"].startswith("Okay, the user is asking how to cross a river")
    assert parts[1]["content"].startswith("Crossing a river safely")


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [("COMPLETE", "stop"), ("MAX_TOKENS", "length"), ("TOOL_CALL", "tool_call"), ("ERROR", "error"),
     ("STOP_SEQUENCE", "stop"), ("TIMEOUT", "error"), ("SOMETHING_NEW", "SOMETHING_NEW"), (None, "error")],
)  # fmt: skip
def test_finish_reasons_map_on_the_message_only(reason: str | None, mapped: str) -> None:
    assert codec.finish_reason(reason) == mapped


def test_request_messages_tool_plan_tool_calls_and_tool_results_become_parts() -> None:
    params = codec.given(
        {
            "model": "command-a",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                {"role": "assistant", "tool_plan": "look it up",
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "sunny"}]},
            ],
            "temperature": 0.2, "p": 0.9, "k": 3, "max_tokens": 50, "seed": 7, "stop_sequences": ["END"],
            "frequency_penalty": ..., "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        }
    )  # fmt: skip
    attrs = codec.request_attributes(params, True, 10_000)
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2
    assert attrs[sc.GEN_AI_REQUEST_TOP_P] == 0.9
    assert attrs[sc.GEN_AI_REQUEST_TOP_K] == 3
    assert attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert attrs[sc.GEN_AI_REQUEST_SEED] == 7
    assert attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] == ["END"]
    assert sc.GEN_AI_REQUEST_FREQUENCY_PENALTY not in attrs  # OMIT (...) is not a value
    messages = codec.input_messages(params["messages"])
    assert messages[2]["parts"] == [
        {"type": "reasoning", "content": "look it up"},
        {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}},
    ]
    assert messages[3] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]}
    assert '"name":"get_weather"' in attrs[sc.GEN_AI_TOOL_DEFINITIONS]


def _stream(events: list[dict[str, object]]) -> ChatStreamAccumulator:
    acc = ChatStreamAccumulator()
    with ReplayServer([stream_interaction(events)]) as server, client_of(server.url) as client:
        for event in client.chat_stream(model="command-a", messages=[{"role": "user", "content": "hi"}]):
            acc.add(event)
    return acc


def test_stream_joins_thinking_and_text_by_content_index() -> None:
    acc = _stream(text_stream_events(["Hel", "lo"], thinking=["Let me ", "think"]))
    outcome = acc.outcome()
    assert outcome.response_id == "stream-id-1"
    assert outcome.finish_reasons == ["COMPLETE"]
    assert outcome.output_messages is not None
    assert outcome.output_messages[0]["parts"] == [
        {"type": "reasoning", "content": "Let me think"},
        {"type": "text", "content": "Hello"},
    ]
    assert outcome.usage is not None and (outcome.usage.input_tokens, outcome.usage.output_tokens) == (5, 7)  # billed
    assert acc.end_reason() == sc.STREAM_END_EXHAUSTED


def test_stream_tool_call_arguments_are_joined_and_the_plan_is_reasoning() -> None:
    outcome = _stream(tool_stream_events()).outcome()
    assert outcome.finish_reasons == ["TOOL_CALL"]
    assert outcome.output_messages is not None
    assert outcome.output_messages[0] == {
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "content": "I will look up the weather."},
            {"type": "tool_call", "id": "get_weather_abc", "name": "get_weather", "arguments": {"city": "Paris"}},
        ],
        "finish_reason": "tool_call",
    }


def test_stream_without_message_end_is_truncated_and_an_error_end_is_a_failure() -> None:
    events = text_stream_events(["a"])
    assert _stream(events[:-1]).end_reason() == sc.STREAM_END_TRUNCATED
    failed = [*events[:-1], {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": "overloaded"}}]
    acc = _stream(failed)
    assert acc.end_reason() == sc.STREAM_END_ERROR
    assert acc.failure() == ("ERROR", "ERROR: overloaded")


def test_stream_delta_without_its_content_start_is_kept() -> None:
    events = [e for e in text_stream_events(["Hel", "lo"], thinking=["hm"]) if e["type"] != "content-start"]
    outcome = _stream(events).outcome()
    assert outcome.output_messages is not None
    assert outcome.output_messages[0]["parts"] == [
        {"type": "reasoning", "content": "hm"},
        {"type": "text", "content": "Hello"},
    ]
