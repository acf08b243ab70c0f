"""Manual LLM spans (``evaltrace.llm_call``, ``@evaltrace.llm`` + ``current_llm_call``) carry what the
auto-instrumentations write: exact attributes per input shape, and the same Trace as the OpenAI instrumentation
gives for the same recorded calls, replayed through the real openai client."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import evaltrace
from evaltrace import pricing
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import ToolCall, Trace, TraceMessage

CASSETTES = Path(__file__).resolve().parent / "fixtures" / "openai-cassettes" / "otel-contrib"


@pytest.fixture(autouse=True)
def capture(provider: TracerProvider) -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    yield
    settings.replace(previous)


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def json_attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return json.loads(str(span.attributes[key]))


# --- input message shapes -> exact gen_ai.input.messages ------------------------------------------------

MESSAGE_CASES: list[tuple[str, list[Any], list[dict[str, Any]]]] = [
    (
        "openai",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        ],
        [
            {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}}],
            },
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "rain"}]},
        ],
    ),
    (
        "anthropic",
        [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Use the tool.", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "rain"}]},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                ],
            },
        ],
        [
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "Use the tool."},
                    {"type": "reasoning", "content": "", "redacted": True},
                    {"type": "tool_call", "id": "tu1", "name": "weather", "arguments": {"city": "Paris"}},
                ],
            },
            {"role": "tool", "parts": [{"type": "tool_call_response", "id": "tu1", "response": "rain"}]},
            {
                "role": "user",
                "parts": [
                    {
                        "type": "uri",
                        "modality": "image",
                        "uri": "data:image/png;base64,<omitted 4 bytes>",
                        "mime_type": "image/png",
                    }
                ],
            },
        ],
    ),
    (
        "trace_message",
        [
            TraceMessage(role="user", content="Weather in Paris?"),
            TraceMessage(
                role="assistant",
                thinking="Use the tool.",
                tool_call=ToolCall(id="c1", name="weather", arguments={"city": "Paris"}),
            ),
            TraceMessage(role="tool", name="weather", tool_call_id="c1", content={"sky": "rain"}),
        ],
        [
            {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "Use the tool."},
                    {"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}},
                ],
            },
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": "c1", "response": {"sky": "rain"}}],
                "name": "weather",
            },
        ],
    ),
    (
        "genai_parts_kept",
        [{"role": "user", "parts": [{"type": "text", "content": "as is"}]}],
        [{"role": "user", "parts": [{"type": "text", "content": "as is"}]}],
    ),
    (
        "deepseek_reasoning_content",
        [{"role": "assistant", "content": "42", "reasoning_content": "think"}],
        [
            {
                "role": "assistant",
                "parts": [{"type": "reasoning", "content": "think"}, {"type": "text", "content": "42"}],
            }
        ],
    ),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES])
def test_input_message_shapes(exporter: InMemorySpanExporter, messages: list[Any], expected: list[Any]) -> None:
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(messages=messages)
    assert json_attr(only_span(exporter), "gen_ai.input.messages") == expected


def test_a_message_of_search_results_alone_is_read_as_anthropic_shaped(exporter: InMemorySpanExporter) -> None:
    result = {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]}
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(messages=[{"role": "user", "content": [result]}])
    (user,) = json_attr(only_span(exporter), "gen_ai.input.messages")
    assert user["parts"] == [{"type": "search_result", "source": "s", "title": "t", "content": "x"}]


def test_tool_result_content_may_hold_strings_and_openai_style_blocks(exporter: InMemorySpanExporter) -> None:
    content = ["a", {"type": "input_text", "text": "b"}, {"type": "image_url", "image_url": {"url": "https://i/x.png"}}]
    message = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": content}]}
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(messages=[message])
    (tool,) = json_attr(only_span(exporter), "gen_ai.input.messages")
    assert tool["parts"][0]["response"] == [
        {"type": "text", "content": "a"},
        {"type": "text", "content": "b"},
        {"type": "uri", "modality": "image", "uri": "https://i/x.png"},
    ]


ANTHROPIC_BLOCKS_CONVERSATION: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {
                "type": "search_result",
                "source": "https://example.invalid/policy",
                "title": "Refund policy",
                "content": [{"type": "text", "text": "Refunds within 30 days."}],
            },
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Store credit after."}},
            {"type": "text", "text": "Can I get a refund?"},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "compaction", "content": "The user asks about refunds."},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "refunds"}},
            {
                "type": "mcp_tool_use",
                "id": "mcptoolu_1",
                "name": "search_docs",
                "server_name": "docs",
                "input": {"q": "refund"},
            },
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order": 7}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "order 7: paid"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "is_error": True,
                "content": [{"type": "text", "text": "order 8: "}, {"type": "text", "text": "not found"}],
            },
            {"type": "text", "text": "What now?"},
        ],
    },
]


def test_anthropic_blocks_are_recorded_as_the_anthropic_instrumentation_records_them(
    exporter: InMemorySpanExporter,
) -> None:
    # Before, the manual converter had its own copy of Anthropic's blocks: a server tool call was a plain tool
    # call, a plain-text document a data: URI, and search results and compaction bare types.
    from evaltrace._internal.anthropic.request import input_messages

    with evaltrace.llm_call(model="claude-sonnet-4-6", provider="anthropic") as call:
        call.record(messages=ANTHROPIC_BLOCKS_CONVERSATION)
    recorded = json_attr(only_span(exporter), "gen_ai.input.messages")
    assert recorded == json.loads(json.dumps(input_messages({"messages": ANTHROPIC_BLOCKS_CONVERSATION})))
    assistant = recorded[1]["parts"]
    assert [p["type"] for p in assistant] == ["compaction", "server_tool_call", "server_tool_call", "tool_call"]
    # A plain-text document: its text, marked a document (the RAG evaluators' context).
    assert recorded[0]["parts"][1] == {"type": "text", "content": "Store credit after.", "document": True}
    tool, user = recorded[2:]  # the tool results first, in one tool message, as the instrumentation writes them
    assert tool == {
        "role": "tool",
        "parts": [
            {"type": "tool_call_response", "id": "toolu_1", "response": "order 7: paid"},
            {"type": "tool_call_response", "id": "toolu_2", "response": "order 8: not found", "is_error": True},
        ],
    }
    assert user == {"role": "user", "parts": [{"type": "text", "content": "What now?"}]}


# --- output, thinking, tool calls, finish reasons ---------------------------------------------------------

OUTPUT_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], tuple[str, ...] | None]] = [
    (
        "text_and_thinking_kwarg",
        {"output": "Rainy.", "thinking": "Check the sky.", "finish_reason": "end_turn"},
        [{"type": "reasoning", "content": "Check the sky."}, {"type": "text", "content": "Rainy."}],
        ("end_turn",),
    ),
    (
        "anthropic_blocks",
        {
            "output": [
                {"type": "thinking", "thinking": "Need the tool."},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "tu1", "name": "weather", "input": {"city": "Paris"}},
            ],
            "finish_reason": "tool_use",
        },
        [
            {"type": "reasoning", "content": "Need the tool."},
            {"type": "text", "content": "Checking."},
            {"type": "tool_call", "id": "tu1", "name": "weather", "arguments": {"city": "Paris"}},
        ],
        ("tool_use",),
    ),
    (
        "tool_calls_kwarg_any_shape",
        {
            "tool_calls": [
                ToolCall(id="a", name="one", arguments={"x": 1}),
                {"id": "b", "type": "function", "function": {"name": "two", "arguments": '{"y": 2}'}},
                {"type": "tool_use", "id": "c", "name": "three", "input": {}},
                {"id": "d", "name": "four", "arguments": {"z": 3}},
            ]
        },
        [
            {"type": "tool_call", "id": "a", "name": "one", "arguments": {"x": 1}},
            {"type": "tool_call", "id": "b", "name": "two", "arguments": {"y": 2}},
            {"type": "tool_call", "id": "c", "name": "three", "arguments": {}},
            {"type": "tool_call", "id": "d", "name": "four", "arguments": {"z": 3}},
        ],
        None,
    ),
    (
        "openai_message_think_tags",
        {"output": {"role": "assistant", "content": "<think>hmm</think>Yes."}, "finish_reason": "stop"},
        [{"type": "reasoning", "content": "hmm"}, {"type": "text", "content": "Yes."}],
        ("stop",),
    ),
    (
        "think_tags_moved_out_of_text",
        {"output": "<think>hidden</think>Answer."},
        [{"type": "reasoning", "content": "hidden"}, {"type": "text", "content": "Answer."}],
        None,
    ),
]


@pytest.mark.parametrize(
    ("record", "parts", "reasons"), [c[1:] for c in OUTPUT_CASES], ids=[c[0] for c in OUTPUT_CASES]
)
def test_output_shapes(
    exporter: InMemorySpanExporter, record: dict[str, Any], parts: list[Any], reasons: tuple[str, ...] | None
) -> None:
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(**record)
    span = only_span(exporter)
    [message] = json_attr(span, "gen_ai.output.messages")
    assert message["parts"] == parts
    mapped = {"end_turn": "stop", "tool_use": "tool_call", "stop": "stop"}
    inferred = "tool_call" if any(p["type"] == "tool_call" for p in parts) else "stop"
    assert message["finish_reason"] == (mapped[reasons[0]] if reasons else inferred)
    assert span.attributes is not None
    assert span.attributes.get("gen_ai.response.finish_reasons") == reasons


# --- usage shapes -> exact token attributes and Langfuse usage_details ------------------------------------

USAGE_CASES: list[tuple[str, Any, dict[str, int], dict[str, int]]] = [
    (
        "ours",
        {"input_tokens": 100, "output_tokens": 30, "cache_read_tokens": 40, "cache_creation_tokens": 10, "reasoning_tokens": 20},
        {"input_tokens": 100, "output_tokens": 30, "cache_read.input_tokens": 40, "cache_creation.input_tokens": 10, "reasoning.output_tokens": 20},
        {"input": 50, "input_cached_tokens": 40, "input_cache_creation": 10, "output": 10, "output_reasoning_tokens": 20},
    ),
    (
        "openai_chat",
        {
            "prompt_tokens": 100,
            "completion_tokens": 30,
            "total_tokens": 130,
            "prompt_tokens_details": {"cached_tokens": 40, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 20},
        },
        {"input_tokens": 100, "output_tokens": 30, "cache_read.input_tokens": 40, "reasoning.output_tokens": 20},
        {"input": 60, "input_cached_tokens": 40, "output": 10, "output_reasoning_tokens": 20},
    ),
    (
        "openai_responses",
        {
            "input_tokens": 100,
            "output_tokens": 30,
            "total_tokens": 130,
            "input_tokens_details": {"cached_tokens": 40},
            "output_tokens_details": {"reasoning_tokens": 20},
        },
        {"input_tokens": 100, "output_tokens": 30, "cache_read.input_tokens": 40, "reasoning.output_tokens": 20},
        {"input": 60, "input_cached_tokens": 40, "output": 10, "output_reasoning_tokens": 20},
    ),
    (
        "anthropic_input_excludes_cache",
        {
            "input_tokens": 50,
            "output_tokens": 30,
            "cache_read_input_tokens": 40,
            "cache_creation_input_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 10},
            "service_tier": "standard",
        },
        {"input_tokens": 100, "output_tokens": 30, "cache_read.input_tokens": 40, "cache_creation.input_tokens": 10},
        {"input": 50, "input_cached_tokens": 40, "input_cache_creation": 10, "output": 30},
    ),
    (
        "gemini_thoughts_added_to_output",
        {"prompt_token_count": 100, "candidates_token_count": 10, "thoughts_token_count": 20, "cached_content_token_count": 40},
        {"input_tokens": 100, "output_tokens": 30, "cache_read.input_tokens": 40, "reasoning.output_tokens": 20},
        {"input": 60, "input_cached_tokens": 40, "output": 10, "output_reasoning_tokens": 20},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("usage", "tokens", "details"), [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_usage_shapes(
    exporter: InMemorySpanExporter, usage: Any, tokens: dict[str, int], details: dict[str, int]
) -> None:
    with evaltrace.llm_call(model="m", provider="custom") as call:
        call.record(usage=usage)
    span = only_span(exporter)
    assert span.attributes is not None
    written = {k.removeprefix("gen_ai.usage."): v for k, v in span.attributes.items() if k.startswith("gen_ai.usage.")}
    assert written == tokens
    # As on instrumented spans: no usage_details; Langfuse derives the details from the counts (conventions 4.2).
    assert "langfuse.observation.usage_details" not in span.attributes
    assert _sibling("openai_langfuse_usage").langfuse_usage(span.attributes) == details


def test_usage_sdk_objects_are_read() -> None:
    openai_types = pytest.importorskip("openai.types")
    usage = openai_types.CompletionUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
    from evaltrace._internal.usage_shapes import parse_usage

    parsed = parse_usage(usage)
    assert (parsed.input_tokens, parsed.output_tokens) == (7, 3)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"usage": {"input": 3}}, r"unknown key\(s\) \['input'\]"),
        ({"usage": {"input_tokens": -1}}, "non-negative integer"),
        ({"usage": {"input_tokens": True}}, "non-negative integer"),
        ({"messages": [{"content": "no role"}]}, r"messages\[0\] has no valid role"),
        ({"messages": "hi"}, "must be a list of messages"),
        ({"tool_calls": [{"id": "x"}]}, r"tool_calls\[0\] has no tool name"),
        ({"cost_usd": "free"}, "non-negative number"),
        ({"thinking": ["a"]}, r"record\(thinking=...\) must be a string"),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{}]}]}]},
            r"messages\[0\]\.content\[0\]\.content\[0\] is not a content block",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "a"}]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "b"},
                            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": 5}]},
                        ],
                    },
                ]
            },
            r"messages\[1\]\.content\[1\]\.content\[0\] is a text block without a string 'text'",
        ),
        ({"output": [{"type": "thinking", "thinking": "a"}], "thinking": "b"}, "thinking was given twice"),
        (
            {"output": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}], "tool_calls": [{"name": "f"}]},
            "given twice",
        ),
    ],
)
def test_bad_input_is_our_error(exporter: InMemorySpanExporter, record: dict[str, Any], message: str) -> None:
    """Our suite sets EVALTRACE_RAISE_INTERNAL_ERRORS=1: the boundary re-raises, so the message is checked.

    Nothing of the bad record is written.
    """
    with evaltrace.llm_call(model="m", provider="custom") as call:
        with pytest.raises((ValueError, TypeError), match=message):
            call.record(**record)
    span = only_span(exporter)
    assert span.attributes is not None
    assert "gen_ai.input.messages" not in span.attributes
    assert "gen_ai.output.messages" not in span.attributes
    assert span.status.status_code is StatusCode.UNSET


def test_bad_input_is_logged_not_raised_outside_tests(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        with evaltrace.llm_call(model="m", provider="custom") as call:
            call.record(usage={"inputs": 3})
            call.record(output="still recorded")
    assert "unknown key(s) ['inputs']" in caplog.text
    assert json_attr(only_span(exporter), "gen_ai.output.messages")[0]["parts"] == [
        {"type": "text", "content": "still recorded"}
    ]


def test_bad_request_parameter_is_our_error_and_the_span_still_records(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad: Any = "hot"
    with pytest.raises(ValueError, match=r"llm_call\(temperature=...\) must be a number, got 'hot'"):
        with evaltrace.llm_call(model="m", provider="custom", temperature=bad):
            pass
    exporter.clear()
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        with evaltrace.llm_call(model="m", provider="custom", temperature=bad, max_tokens=5) as call:
            call.record(output="ok")
    assert "must be a number" in caplog.text
    attrs = only_span(exporter).attributes or {}
    assert attrs["gen_ai.request.model"] == "m"
    assert "gen_ai.request.temperature" not in attrs
    assert "gen_ai.output.messages" in attrs


# --- request attributes, cost, timing ---------------------------------------------------------------------


def test_request_attributes_and_priced_cost(exporter: InMemorySpanExporter) -> None:
    pricing.set_model_price("acme-1", input=1.0, output=4.0, cached_input=0.5, cache_write=2.0)
    try:
        with evaltrace.llm_call(
            model="acme-1",
            provider="acme",
            system=[{"type": "text", "text": "Be brief."}],
            tools=[{"name": "weather", "description": "Weather", "input_schema": {"type": "object"}}],
            temperature=0,
            top_k=5,
            max_tokens=256,
            stop_sequences=["END"],
            stream=True,
            server_address="llm.internal",
            server_port=8443,
        ) as call:
            call.record(
                usage={"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 200, "cache_creation_tokens": 100, "reasoning_tokens": 40},
                response_id="r-1",
                response_model="acme-1-2026-01-01",
            )  # fmt: skip
    finally:
        pricing.clear_model_prices()
    span = only_span(exporter)
    assert span.name == "chat acme-1"
    attrs = dict(span.attributes or {})
    cost = json.loads(attrs.pop("langfuse.observation.cost_details"))
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "acme",
        "gen_ai.request.model": "acme-1",
        "evaltrace.span.kind": "llm",
        "langfuse.observation.type": "generation",
        "openinference.span.kind": "LLM",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.request.top_k": 5,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.request.stream": True,
        "server.address": "llm.internal",
        "server.port": 8443,
        "langfuse.observation.model.parameters": '{"temperature":0,"top_k":5,"max_tokens":256,"stop_sequences":"[\\"END\\"]","stream":true}',
        "gen_ai.system_instructions": '[{"type":"text","content":"Be brief."}]',
        "gen_ai.tool.definitions": '[{"type":"function","name":"weather","description":"Weather","parameters":{"type":"object"}}]',
        "gen_ai.response.id": "r-1",
        "gen_ai.response.model": "acme-1-2026-01-01",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 100,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.cache_creation.input_tokens": 100,
        "gen_ai.usage.reasoning.output_tokens": 40,
        # 700 * 1.0 + 200 * 0.5 + 100 * 2.0 + 100 * 4.0, per 1M (the dated response model matches the override)
        "evaltrace.cost_usd": pytest.approx(1400 / 1e6),
        "evaltrace.cost_thinking_usd": pytest.approx(160 / 1e6),
    }  # fmt: skip
    assert cost["total"] == pytest.approx(1400 / 1e6)
    assert cost["input_cache_creation"] == pytest.approx(200 / 1e6)
    assert _sibling("openai_langfuse_usage").langfuse_usage(attrs) == {
        "input": 700, "input_cached_tokens": 200, "input_cache_creation": 100, "output": 60, "output_reasoning_tokens": 40
    }  # fmt: skip


def test_priced_cost_without_reasoning_tokens_writes_no_thinking_cost(exporter: InMemorySpanExporter) -> None:
    """As the OpenAI and Anthropic builders: the thinking cost only with reasoning tokens; a Trace reads 0.0."""
    pricing.set_model_price("acme-1", input=1.0, output=4.0)
    try:
        with evaltrace.llm_call(model="acme-1", provider="acme") as call:
            call.record(usage={"input_tokens": 1000, "output_tokens": 100})
    finally:
        pricing.clear_model_prices()
    span = only_span(exporter)
    attrs = span.attributes or {}
    assert attrs["evaltrace.cost_usd"] == pytest.approx(1400 / 1e6)
    assert "evaltrace.cost_thinking_usd" not in attrs
    assert trace_from_spans([span]).metrics.cost_thinking_usd == 0.0


def test_given_cost_wins_and_record_merges(exporter: InMemorySpanExporter) -> None:
    with evaltrace.llm_call(model="gpt-4o-mini", provider="openai") as call:
        call.record(usage={"input_tokens": 10, "output_tokens": 5}, output="first")
        call.record(cost_usd=0.25)
        call.record(thinking="why")  # the earlier output is kept, the thinking added
    attrs = only_span(exporter).attributes or {}
    assert attrs["evaltrace.cost_usd"] == 0.25
    assert "evaltrace.cost_thinking_usd" not in attrs
    assert json.loads(str(attrs["langfuse.observation.cost_details"])) == {"total": 0.25}
    assert attrs["gen_ai.usage.input_tokens"] == 10
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "reasoning", "content": "why"},
        {"type": "text", "content": "first"},
    ]


def test_a_given_cost_with_reasoning_tokens_leaves_the_thinking_cost_unknown(exporter: InMemorySpanExporter) -> None:
    """A cost the user gave has no known thinking share: the trace never says its reasoning tokens cost 0.0."""
    with evaltrace.llm_call(provider="openai", model="o1") as call:
        call.record(
            output="ok", usage={"input_tokens": 100, "output_tokens": 500, "reasoning_tokens": 400}, cost_usd=0.05
        )
    metrics = trace_from_spans([only_span(exporter)]).metrics
    assert metrics.token_thinking == 400 and metrics.cost_usd == pytest.approx(0.05)
    assert metrics.cost_thinking_usd is None


def test_first_token_timing(exporter: InMemorySpanExporter) -> None:
    with evaltrace.llm_call(model="m", provider="custom", stream=True) as call:
        call.first_token()
        call.first_token()  # only the first counts
    span = only_span(exporter)
    attrs = span.attributes or {}
    ttfc = attrs["gen_ai.response.time_to_first_chunk"]
    assert isinstance(ttfc, float)
    assert span.end_time is not None and span.start_time is not None
    assert 0 <= ttfc <= (span.end_time - span.start_time) / 1e9
    assert str(attrs["langfuse.observation.completion_start_time"]).endswith("+00:00")
    assert trace_from_spans([span]).metrics.latency_first_token_ms is not None


def test_content_capture_off_keeps_counts_drops_content(exporter: InMemorySpanExporter) -> None:
    settings.replace(settings.CaptureSettings(capture_content=False))
    with evaltrace.llm_call(model="m", provider="custom", system="secret") as call:
        call.record(messages=[{"role": "user", "content": "secret"}], output="secret", usage={"input_tokens": 1})
    attrs = only_span(exporter).attributes or {}
    assert "secret" not in json.dumps(dict(attrs))
    assert attrs["gen_ai.usage.input_tokens"] == 1


# --- errors, nesting, async, @llm -------------------------------------------------------------------------


class Boom(Exception):
    pass


def test_exception_marks_span_and_propagates_unchanged(exporter: InMemorySpanExporter) -> None:
    error = Boom("rate limited")
    with pytest.raises(Boom) as raised:
        with evaltrace.llm_call(model="m", provider="custom") as call:
            call.record(messages=[{"role": "user", "content": "hi"}])
            raise error
    assert raised.value is error
    span = only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == f"{__name__}.Boom"
    assert [e.name for e in span.events] == ["exception"]
    assert "gen_ai.input.messages" in (span.attributes or {})
    trace = trace_from_spans([span])
    assert trace.error is not None


def test_span_is_current_and_nests(exporter: InMemorySpanExporter) -> None:
    @evaltrace.tool
    def weather(city: str) -> str:
        evaltrace.current_llm_call().record(finish_reason="tool_use")  # under a child span: still this call
        return "rain"

    @evaltrace.agent
    def answer() -> str:
        with evaltrace.llm_call(model="m", provider="custom") as call:
            assert evaltrace.current_llm_call() is call
            weather("Paris")
            call.record(output="done")
        return "done"

    answer()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    agent, llm, tool = spans["invoke_agent answer"], spans["chat m"], spans["execute_tool weather"]
    assert llm.parent is not None and agent.context is not None and llm.parent.span_id == agent.context.span_id
    assert tool.parent is not None and llm.context is not None and tool.parent.span_id == llm.context.span_id
    assert (llm.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_use",)


async def test_async_with(exporter: InMemorySpanExporter) -> None:
    async def one(n: int) -> None:
        async with evaltrace.llm_call(model=f"m{n}", provider="custom") as call:
            await asyncio.sleep(0)
            assert evaltrace.current_llm_call() is call
            call.record(output=f"answer {n}")

    await asyncio.gather(one(1), one(2))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"chat m1", "chat m2"}
    for n in (1, 2):
        assert json_attr(spans[f"chat m{n}"], "gen_ai.output.messages")[0]["parts"][0]["content"] == f"answer {n}"
        assert spans[f"chat m{n}"].parent is None


def test_llm_decorator_records_through_current_llm_call(exporter: InMemorySpanExporter) -> None:
    @evaltrace.llm(name="call_model")
    def call_model(question: str) -> str:
        call = evaltrace.current_llm_call()
        call.record(model="gpt-4o-mini", provider="openai", messages=[{"role": "user", "content": question}])
        evaltrace.current_llm_call().record(
            output="Rainy.", thinking="Look outside.", usage={"input_tokens": 10, "output_tokens": 4}
        )
        return "Rainy."

    assert call_model("Weather?") == "Rainy."
    span = only_span(exporter)
    attrs = span.attributes or {}
    assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["evaltrace.cost_usd"] == pytest.approx((10 * 0.15 + 4 * 0.6) / 1e6)
    trace = trace_from_spans([span])
    assert trace.output.final_answer == "Rainy."
    assert trace.output.thinking == "Look outside."
    assert [m.role for m in trace.messages] == ["user", "assistant"]


def test_current_llm_call_finds_the_block_after_an_llm_function_returned(exporter: InMemorySpanExporter) -> None:
    @evaltrace.llm
    def inner() -> None:
        evaltrace.current_llm_call().record(output="inner")

    with evaltrace.llm_call(model="m", provider="custom") as call:
        inner()
        assert evaltrace.current_llm_call() is call
        call.record(output="outer")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert json_attr(spans["inner"], "gen_ai.output.messages")[0]["parts"][0]["content"] == "inner"
    assert json_attr(spans["chat m"], "gen_ai.output.messages")[0]["parts"][0]["content"] == "outer"


def test_llm_decorator_exception_path(exporter: InMemorySpanExporter) -> None:
    @evaltrace.llm
    def failing() -> None:
        evaltrace.current_llm_call().record(output="partial")
        raise Boom("down")

    with pytest.raises(Boom):
        failing()
    span = only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert "gen_ai.output.messages" in (span.attributes or {})


def test_current_llm_call_outside_any_llm_span_reports_misuse(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError, match="no LLM span is current"):
        evaltrace.current_llm_call().record(output="lost")
    assert exporter.get_finished_spans() == ()


# --- same Trace as the OpenAI instrumentation for the same recorded calls ---------------------------------


def _openai_replay() -> ModuleType:
    """The instrumentation tests' replay helper."""
    pytest.importorskip("openai")
    return _sibling("openai_replay")


def _sibling(module: str) -> ModuleType:
    """A helper module of the instrumentation tests (a sibling directory's, not on this file's import path)."""
    name = f"_llm_call_{module}"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parent / "instrumentation" / f"{module}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered first: its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def _instrumented_trace(interactions: list[Any], exporter: InMemorySpanExporter) -> Trace:
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    replay = _openai_replay()
    api, _ = replay.client(interactions, False)

    @evaltrace.agent(name="answer")
    def answer() -> None:
        for item in interactions:
            api.chat.completions.create(**item.request)

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        answer()
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    exporter.clear()
    return trace_from_spans(spans)


def _manual_trace(interactions: list[Any], exporter: InMemorySpanExporter) -> Trace:
    """The same calls through the uninstrumented client, recorded by hand from what the SDK returned."""
    replay = _openai_replay()
    api, _ = replay.client(interactions, False)

    @evaltrace.agent(name="answer")
    def answer() -> None:
        for item in interactions:
            request = item.request
            with evaltrace.llm_call(model=request["model"], provider="openai", tools=request.get("tools")) as call:
                completion = api.chat.completions.create(**request)
                choice = completion.choices[0]
                call.record(
                    messages=request["messages"],
                    output=choice.message,
                    finish_reason=choice.finish_reason,
                    usage=completion.usage,
                    response_id=completion.id,
                    response_model=completion.model,
                )

    answer()
    spans = exporter.get_finished_spans()
    exporter.clear()
    return trace_from_spans(spans)


def _comparable(trace: Trace) -> dict[str, Any]:
    return {
        "messages": [m.model_dump() for m in trace.messages],
        "tool_calls": [c.model_dump() for c in trace.tool_calls],
        "tool_results": [r.model_dump() for r in trace.tool_results],
        "output": trace.output.model_dump(),
        "metrics": trace.metrics.model_dump(include={"token_input", "token_output", "token_thinking", "cost_usd", "cost_thinking_usd"}),
    }  # fmt: skip


def test_same_trace_as_openai_instrumentation_for_recorded_tool_conversation(exporter: InMemorySpanExporter) -> None:
    cassette = CASSETTES / "test_chat_completion_tool_calls_with_content.yaml"
    interactions = _openai_replay().load(cassette)
    reference = _instrumented_trace(interactions, exporter)
    manual = _manual_trace(_openai_replay().load(cassette), exporter)
    assert reference.tool_calls and reference.metrics.cost_usd  # the reference is not trivially empty
    assert _comparable(manual) == _comparable(reference)


def test_same_trace_as_openai_instrumentation_for_reasoning(exporter: InMemorySpanExporter) -> None:
    """Thinking (DeepSeek-style ``reasoning_content``) lands in messages[].thinking and output.thinking alike."""
    replay = _openai_replay()
    body = {
        "id": "chatcmpl-r1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "4", "reasoning_content": "2 + 2 is 4."},
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 9,
            "total_tokens": 21,
            "completion_tokens_details": {"reasoning_tokens": 6},
        },
    }
    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "2 + 2?"}]}
    reference = _instrumented_trace([replay.json_interaction("/v1/chat/completions", body, request)], exporter)
    manual = _manual_trace([replay.json_interaction("/v1/chat/completions", body, request)], exporter)
    assert reference.output.thinking == "2 + 2 is 4."
    assert reference.metrics.token_thinking == 6
    assert _comparable(manual) == _comparable(reference)


# --- live evaluation sees the manual span ----------------------------------------------------------------


@pytest.fixture
def configured_reset() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


def test_live_evaluator_sees_manual_span(configured_reset: None) -> None:
    seen: list[Trace] = []

    @evaluator(name="answer_has_thinking")
    def answer_has_thinking(trace: Trace) -> bool:
        seen.append(trace)
        return trace.output.thinking is not None and trace.metrics.token_output == 4

    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="manual",
        exporters=[exporter],
        local_store=False,
        batch=False,
        capture_content=True,
        evaluators=[EvaluatorSpec(answer_has_thinking, span_kinds={"llm"})],
        evaluation_options={"dead_letter_dir": None},
    )
    with evaltrace.llm_call(model="claude-sonnet-4-5", provider="anthropic") as call:
        call.record(
            messages=[{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            output=[{"type": "thinking", "thinking": "Greet back."}, {"type": "text", "text": "Hello!"}],
            usage={"input_tokens": 8, "output_tokens": 4},
            finish_reason="end_turn",
        )
    assert handle.force_flush(10_000)
    [span] = [s for s in exporter.get_finished_spans() if s.name == "chat claude-sonnet-4-5"]
    assert (span.attributes or {})["evaltrace.eval.answer_has_thinking.passed"] is True
    [trace] = seen
    assert trace.output.final_answer == "Hello!"
    assert trace.messages[-1].thinking == "Greet back."
