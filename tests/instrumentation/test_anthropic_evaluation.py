"""Anthropic spans map to the Trace schema, and a live evaluator sees Claude's thinking apart from its answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from anthropic_replay import MODEL, Reply, client, fixture_json
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import JsonlScoreSink
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace

THINKING = fixture_json("thinking.json")["content"][0]["thinking"]
ANSWER = fixture_json("thinking.json")["content"][2]["text"]


@pytest.fixture
def configured(tmp_path: Path) -> Iterator[tuple[InMemorySpanExporter, Path, Any]]:
    """evaltrace configured with an in-memory exporter, a JSONL score sink and the Anthropic instrumentation."""
    saved = settings.current
    exporter = InMemorySpanExporter()
    scores = tmp_path / "scores.jsonl"
    handle = evaltrace.configure(
        exporters=[exporter], local_store=False, batch=False, capture_content=True, sinks=[JsonlScoreSink(scores)]
    )
    evaltrace.instrument_anthropic()
    try:
        yield exporter, scores, handle
    finally:
        evaltrace.uninstrument_anthropic()
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def test_thinking_maps_to_thinking_fields_not_the_answer(configured: tuple[InMemorySpanExporter, Path, Any]) -> None:
    exporter, _, _ = configured
    api, _ = client([Reply("thinking.json")])

    @evaltrace.agent(name="thinker")
    def answer(question: str) -> str:
        message = api.messages.create(
            model=MODEL,
            max_tokens=2048,
            thinking={"type": "adaptive"},
            messages=[{"role": "user", "content": question}],
        )
        return "".join(block.text for block in message.content if block.type == "text")

    assert answer("Are there infinitely many primes n with n mod 4 == 3?") == ANSWER
    trace = trace_from_spans(exporter.get_finished_spans())
    assistant = trace.messages[-1]
    assert assistant.role == "assistant"
    assert assistant.content == ANSWER
    assert assistant.thinking == THINKING  # the redacted block adds no text
    assert trace.output.final_answer == ANSWER
    assert trace.output.thinking == THINKING
    assert trace.metrics.token_thinking is None  # Anthropic reports no thinking token count
    assert trace.metrics.token_input == 58 and trace.metrics.token_output == 412


def test_live_evaluator_sees_thinking_apart_from_the_answer(
    configured: tuple[InMemorySpanExporter, Path, Any],
) -> None:
    _, scores, handle = configured
    seen: list[tuple[Any, Any]] = []

    @evaltrace.evaluator
    def thinking_kept_apart(trace: Trace) -> bool:
        seen.append((trace.output.final_answer, trace.output.thinking))
        return THINKING not in (trace.output.final_answer or "")

    api, _ = client([Reply("stream_thinking.sse")])

    @evaltrace.agent(name="thinker", evaluators=[thinking_kept_apart])
    def answer(question: str) -> str:
        with api.messages.stream(
            model=MODEL,
            max_tokens=2048,
            thinking={"type": "adaptive"},
            messages=[{"role": "user", "content": question}],
        ) as stream:
            return stream.get_final_text()

    assert answer("GCD of 1071 and 462?") == "The greatest common divisor of 1071 and 462 is 21."
    handle.force_flush()  # waits for the evaluators and the score sink
    assert seen == [
        (
            "The greatest common divisor of 1071 and 462 is 21.",
            "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.",
        )
    ]
    (score,) = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]
    assert (score["name"], score["value"]) == ("thinking_kept_apart", 1.0)
