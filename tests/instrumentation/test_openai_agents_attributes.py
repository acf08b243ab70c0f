"""The Agents SDK span data the replayed runs do not produce, through the real SDK classes, to span attributes.

The model outputs below are recorded responses (tests/fixtures/openai-agents-cassettes and openai-cassettes), as
the SDK's LiteLLM / any-llm models and its Chat Completions model store them on their spans.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.tracing.span_data import (
    CustomSpanData,
    GenerationSpanData,
    HandoffSpanData,
    MCPListToolsSpanData,
    ResponseSpanData,
    SpeechSpanData,
    TranscriptionSpanData,
)

from cassettes import FIXTURES, load_cassette
from evaltrace._internal import semconv as sc
from evaltrace.instrumentation.openai_agents import _attributes as attributes

AGENTS = FIXTURES / "openai-agents-cassettes" / "logfire" / "test_openai_agents"


def _recorded_response() -> dict[str, Any]:
    """The final answer of the recorded handoff run (a Responses API body)."""
    body: dict[str, Any] = load_cassette(AGENTS / "test_responses.yaml")[1].response_json()
    return body


def _messages(attrs: dict[str, Any], key: str) -> Any:
    return json.loads(attrs[key])


def test_a_litellm_generation_span_is_an_llm_span_of_its_provider() -> None:
    data = GenerationSpanData(
        input=[{"role": "user", "content": "Generate a random number"}],
        output=[_recorded_response()],  # LiteLLM's model stores the Response it converted to
        model="claude-sonnet-4",
        model_config={"model_impl": "litellm", "temperature": 0.2},
        usage={"input_tokens": 89, "output_tokens": 18},
    )
    assert attributes.calls_openai_client(data) is False  # never left to instrument_openai()
    name, start = attributes.span_start(data)
    assert (name, start[sc.EVALTRACE_SPAN_KIND]) == ("chat claude-sonnet-4", sc.KIND_LLM)
    _, attrs = attributes.span_end(data, True, 10_000)
    assert attrs[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.2
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == 89
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    output = _messages(attrs, sc.GEN_AI_OUTPUT_MESSAGES)
    assert output[0]["parts"][0]["content"].startswith("The random number generated is 4")
    assert _messages(attrs, sc.GEN_AI_INPUT_MESSAGES)[0]["parts"][0]["content"] == "Generate a random number"


def test_a_chat_completions_generation_with_a_tool_call() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    }
    data = GenerationSpanData(
        input=[{"role": "user", "content": "Weather?"}],
        output=[message],
        model="gpt-4o",
        model_config={"base_url": "https://api.openai.com/v1/"},
        usage={"input_tokens": 43, "output_tokens": 14},
    )
    assert attributes.calls_openai_client(data) is True
    _, attrs = attributes.span_end(data, True, 10_000)
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "openai"
    # The SDK's span records no finish reason: none is made up for the span (see the truncated-answer test).
    assert sc.GEN_AI_RESPONSE_FINISH_REASONS not in attrs
    (part,) = _messages(attrs, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"]
    assert part == {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}
    assert attributes.prompt_of(data) == "Weather?"


def test_a_generation_without_finish_reasons_gets_none_invented() -> None:
    """An answer cut off by max_tokens: the SDK's span has the text and no finish reason, so the span has none."""
    data = GenerationSpanData(
        input=[{"role": "user", "content": "Tell me a story"}],
        output=[{"role": "assistant", "content": "Once upon a ti"}],
        model="gpt-4o",
        model_config={"base_url": "https://api.openai.com/v1/"},
        usage={"input_tokens": 5, "output_tokens": 4},
    )
    _, attrs = attributes.span_end(data, True, 10_000)
    assert sc.GEN_AI_RESPONSE_FINISH_REASONS not in attrs
    assert _messages(attrs, sc.GEN_AI_OUTPUT_MESSAGES)[0]["parts"] == [{"type": "text", "content": "Once upon a ti"}]


def test_a_finish_reason_the_sdk_kept_is_recorded_verbatim() -> None:
    data = GenerationSpanData(
        input=[{"role": "user", "content": "Tell me a story"}],
        output=[{"role": "assistant", "content": "Once upon a ti", "finish_reason": "length"}],
        model="gpt-4o",
    )
    _, attrs = attributes.span_end(data, True, 10_000)
    assert attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("length",)
    assert _messages(attrs, sc.GEN_AI_OUTPUT_MESSAGES)[0]["finish_reason"] == "length"


def test_content_off_keeps_counts_and_drops_messages() -> None:
    data = GenerationSpanData(input=[{"role": "user", "content": "secret"}], output=[], model="gpt-4o")
    _, attrs = attributes.span_end(data, False, 10_000)
    assert sc.GEN_AI_INPUT_MESSAGES not in attrs and sc.GEN_AI_OUTPUT_MESSAGES not in attrs
    assert "secret" not in json.dumps(attrs, default=str)


def test_a_response_span_the_sdk_recorded_without_data() -> None:
    """``trace_include_sensitive_data=False``: the SDK keeps only the usage and (official endpoint) the id."""
    if "usage" not in inspect.signature(ResponseSpanData).parameters:
        pytest.skip("this openai-agents keeps no usage on a response span (ResponseSpanData.usage)")
    data = ResponseSpanData(
        usage={"input_tokens": 11, "output_tokens": 8, "input_tokens_details": {"cached_tokens": 2}}
    )
    data._response_id = "resp_1"
    name, attrs = attributes.span_end(data, True, 10_000)
    assert name is None  # the model is unknown: the span keeps its name
    assert attrs[sc.GEN_AI_RESPONSE_ID] == "resp_1"
    assert (attrs[sc.GEN_AI_USAGE_INPUT_TOKENS], attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]) == (11, 2)
    assert sc.GEN_AI_RESPONSE_FINISH_REASONS not in attrs


def test_a_recorded_response_span() -> None:
    from openai.types.responses import Response

    response = Response.model_construct(**_recorded_response())  # as the client builds it: without validation
    data = ResponseSpanData(response=response, input=[{"role": "user", "content": "Generate"}])
    name, attrs = attributes.span_end(data, True, 10_000)
    assert name == "chat gpt-4o-2024-08-06"
    assert attrs[sc.GEN_AI_RESPONSE_ID] == response.id
    assert attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS]  # the agent's instructions, from the response
    assert attrs[sc.EVALTRACE_COST_USD] > 0


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (CustomSpanData("lookup", {"rows": 3}), "lookup", {sc.OPENAI_AGENTS_CUSTOM_DATA: '{"rows":3}'}),
        (HandoffSpanData("triage", None), "handoff triage", {sc.OPENAI_AGENTS_HANDOFF_FROM: "triage"}),
        (MCPListToolsSpanData(None, None), "mcp list_tools", {}),
        (TranscriptionSpanData(output="hello", model="gpt-4o-transcribe"), "transcription gpt-4o-transcribe", {}),
        (SpeechSpanData(input="hi there", model="gpt-4o-mini-tts"), "speech gpt-4o-mini-tts", {}),
    ],
)
def test_other_span_data_are_task_spans(data: Any, name: str, expected: dict[str, Any]) -> None:
    start_name, start = attributes.span_start(data)
    assert (start_name, start[sc.EVALTRACE_SPAN_KIND], start[sc.OPENAI_AGENTS_SPAN_TYPE]) == (
        name,
        sc.KIND_TASK,
        data.type,
    )
    _, end = attributes.span_end(data, True, 10_000)
    for key, value in expected.items():
        assert end[key] == value
    if data.type == "transcription":
        assert end[sc.OUTPUT_VALUE] == "hello"
    if data.type == "speech":
        assert end[sc.INPUT_VALUE] == "hi there"


def test_an_agents_usage_sums_only_counts_every_call_reported() -> None:
    """A count one call lacks is left out, and a call with no counts leaves the agent with none: never a part sum."""
    inp, out, cached = (
        sc.GEN_AI_USAGE_INPUT_TOKENS,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    )
    both = [{inp: 10, out: 5, cached: 2}, {inp: 7, out: 3}]
    assert attributes.invocation_usage(both) == {inp: 17, out: 8}
    assert attributes.invocation_usage([{inp: 10, out: 5}, None]) == {}
    assert attributes.invocation_usage([]) == {}
