"""Langfuse is sent LLM spans without input.value/output.value, so it renders their messages as a chat.

Langfuse reads ``input.value`` before ``gen_ai.input.messages`` (conventions.md 4.2); the other exporters keep the
list values (Phoenix's trace list shows them). A real instrumented call, replayed from recorded traffic.
"""

from __future__ import annotations

import json

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace._internal import semconv
from evaltrace.exporters.langfuse_view import LangfuseViewExporter, for_langfuse

pytestmark = pytest.mark.usefixtures("cassettes", "instrumented")


def _replayed_span(exporter: InMemorySpanExporter) -> object:
    interactions = load(cassette("test_chat_completion_with_content.yaml"))
    api, _ = client(interactions, is_async=False)
    api.chat.completions.create(**interactions[0].request)
    (span,) = exporter.get_finished_spans()
    return span


def test_langfuse_gets_the_messages_and_not_the_list_values(exporter: InMemorySpanExporter) -> None:
    span = _replayed_span(exporter)
    original = dict(span.attributes or {})  # type: ignore[attr-defined]
    assert original[semconv.INPUT_VALUE] == "Say this is a test"  # what Phoenix's list view shows

    langfuse = InMemorySpanExporter()
    assert LangfuseViewExporter(langfuse).export([span]) is SpanExportResult.SUCCESS  # type: ignore[list-item]
    (sent,) = langfuse.get_finished_spans()
    attributes = dict(sent.attributes or {})
    for key in (semconv.INPUT_VALUE, semconv.INPUT_MIME_TYPE, semconv.OUTPUT_VALUE, semconv.OUTPUT_MIME_TYPE):
        assert key not in attributes, key
    messages = json.loads(attributes[semconv.GEN_AI_INPUT_MESSAGES])
    assert messages[-1]["parts"][0]["content"] == "Say this is a test"
    assert json.loads(attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["role"] == "assistant"
    # Everything else is what every other exporter gets, and the span handed in is untouched.
    assert {k: v for k, v in original.items() if not k.startswith(("input.", "output."))} == attributes
    assert (sent.context, sent.events, sent.status) == (span.context, span.events, span.status)  # type: ignore[attr-defined]
    assert dict(span.attributes or {})[semconv.INPUT_VALUE] == "Say this is a test"  # type: ignore[attr-defined]


def test_spans_without_messages_keep_their_input_and_output(exporter: InMemorySpanExporter) -> None:
    span = _replayed_span(exporter)
    attributes = {
        k: v
        for k, v in (span.attributes or {}).items()  # type: ignore[attr-defined]
        if k not in (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_OUTPUT_MESSAGES)
    }
    from opentelemetry.sdk.trace import ReadableSpan

    bare = ReadableSpan(name="tool", context=span.context, attributes=attributes)  # type: ignore[attr-defined]
    assert for_langfuse(bare) is bare  # a decorated function or tool: Langfuse shows its input.value
