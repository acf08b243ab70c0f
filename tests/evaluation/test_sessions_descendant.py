"""A trace whose session is on a span under its root (the root carries none), as ``evaltrace worker`` receives it.

The spans are made by a real SDK tracer and fed to a real ``EvaluationSpanProcessor``'s ``on_end`` without
``on_start``, as the worker's OTLP receiver feeds them: ``end_session()`` and session sampling must find the
session by the same rule as the conversation the trace joins (the root's, else the first span to end carrying one).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.evaluation.trace_sampling import session_fraction
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation


@pytest.fixture
def made() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def _turn(exporter: InMemorySpanExporter, session: str, answer: str) -> list[ReadableSpan]:
    """A request span (the root, no session) around an agent run carrying the session; the spans in end order."""
    exporter.clear()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("request", attributes={"input.value": "q", "output.value": answer}):
        with tracer.start_as_current_span("tool", attributes={"evaltrace.span.kind": "tool"}):
            pass  # ends first, with no session: the session is the first span *carrying* one
        attributes = {"session.id": session, "evaltrace.span.kind": "agent", "output.value": answer}
        with tracer.start_as_current_span("invoke_agent", attributes=attributes):
            pass
    return list(exporter.get_finished_spans())


def _processor(tmp_path: Path, seen: list[Conversation], **options: float) -> EvaluationSpanProcessor:
    @evaluator(name="coherent")
    def coherent(conversation: Conversation) -> EvaluationResult:
        seen.append(conversation)
        return EvaluationResult(evaluator="coherent", passed=True, score=1.0)

    rate = options.pop("sample_rate", 1.0)
    return EvaluationSpanProcessor(
        downstream=[],
        evaluators=[EvaluatorSpec(coherent, scope="session", sample_rate=rate)],
        dead_letter_dir=tmp_path / "dead-letter",
        **options,
    )


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def test_end_session_completes_the_turns_whose_session_is_under_their_root(
    made: InMemorySpanExporter, tmp_path: Path
) -> None:
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_quiet_period_s=600.0, session_quiet_period_s=600.0)
    try:
        for answer in ("one", "two"):
            for span in _turn(made, "deep", answer):
                processor.on_end(span)
        processor.end_session("deep")
        assert _wait(lambda: len(seen) == 1, timeout=10.0)
        assert seen[0].session_id == "deep"
        assert [turn.final_answer for turn in seen[0].turns] == ["one", "two"]
    finally:
        processor.shutdown()


def test_session_sampling_draws_by_the_session_under_the_root(made: InMemorySpanExporter, tmp_path: Path) -> None:
    """At a rate of 0.5, a session drawn out is left whole, one drawn in judged whole: never turn by turn."""
    out = next(f"s-{n}" for n in range(1000) if session_fraction(f"s-{n}") >= 0.5)
    kept = next(f"s-{n}" for n in range(1000) if session_fraction(f"s-{n}") < 0.5)
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_quiet_period_s=0.0, session_quiet_period_s=600.0, sample_rate=0.5)
    try:
        for _ in range(8):  # by trace id, some of 8 turns of each would be drawn in and some out
            for session in (out, kept):
                for span in _turn(made, session, session):
                    processor.on_end(span)
        processor.force_flush()
        assert [(c.session_id, len(c.turns)) for c in seen] == [(kept, 8)]
        assert processor.stats()["sampled_out"] == 8
    finally:
        processor.shutdown()
