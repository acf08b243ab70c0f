"""A trace whose session is on a span under its root (the root carries none), as ``evaltrace worker`` receives it.

The spans are made by a real SDK tracer and fed to a real ``EvaluationSpanProcessor``'s ``on_end`` without
``on_start``, as the worker's OTLP receiver feeds them: ``end_session()`` and session sampling must find the
session by the same rule as the conversation the trace joins (the root's, else the first span to end carrying one).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import set_span_in_context

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.evaluation.trace_sampling import session_fraction, trace_fraction
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


def _drawn(session: str, drawn_in: bool) -> bool:
    return (session_fraction(session) < 0.5) == drawn_in


def _turn_drawn(made: InMemorySpanExporter, session: str, by_trace_id_in: bool, answer: str) -> list[ReadableSpan]:
    """A turn (as :func:`_turn`) whose trace id a draw by trace id at rate 0.5 would take (or leave)."""
    while True:
        spans = _turn(made, session, answer)
        context = spans[-1].context
        assert context is not None
        if (trace_fraction(context.trace_id) < 0.5) == by_trace_id_in:
            return spans


def test_session_sampling_draws_by_a_session_whose_span_ends_after_the_root(
    made: InMemorySpanExporter, tmp_path: Path
) -> None:
    """The root arrives first (another OTLP batch, another service), its session on a span ending after it.

    The session is not known at the root's end: the draw waits for it, so the session drawn out is judged on no
    turn and the session drawn in on all 8, never the ones a draw by trace id would have taken.
    """
    out = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=False))
    kept = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=True))
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_quiet_period_s=0.2, session_quiet_period_s=600.0, sample_rate=0.5)
    try:
        for index in range(8):  # half the turns of each session are in by trace id, half out
            for session in (out, kept):
                spans = _turn_drawn(made, session, by_trace_id_in=index % 2 == 0, answer=str(index))
                for span in [spans[-1], *spans[:-1]]:  # root first, then the spans under it
                    processor.on_end(span)
        assert _wait(lambda: processor.stats()["sampled_out"] == 8, timeout=10.0)
        processor.force_flush()
        assert [(c.session_id, len(c.turns)) for c in seen] == [(kept, 8)]
        assert [turn.final_answer for turn in seen[0].turns] == [str(index) for index in range(8)]
        assert processor.stats()["sampled_out"] == 8  # the session drawn out: each of its turns, once
    finally:
        processor.shutdown()


def test_a_reevaluated_turn_is_drawn_as_its_first_evaluation_was(made: InMemorySpanExporter, tmp_path: Path) -> None:
    """A late span re-opens a turn whose session was found after its root ended: revision 2 draws by that session.

    Each trace id is drawn the other way than its session, so a draw by trace id at either revision would show.
    """
    out = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=False))
    kept = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=True))
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_quiet_period_s=0.2, session_quiet_period_s=0.2, sample_rate=0.5)
    try:
        turns = [_turn_drawn(made, out, by_trace_id_in=True, answer="o"), _turn_drawn(made, kept, False, "k")]
        for _tool, agent, root in turns:
            processor.on_end(root)
            processor.on_end(agent)  # the session, after the root; the tool span is held back: it comes late
        assert _wait(lambda: len(seen) == 1 and processor.stats()["sampled_out"] == 1, timeout=10.0)
        assert (seen[0].session_id, seen[0].extra["revision"]) == (kept, 1)
        for tool, _, _ in turns:
            processor.on_end(tool)  # within the late window: both turns are evaluated again (revision 2)
        assert _wait(lambda: len(seen) == 2 and processor.stats()["sampled_out"] == 2, timeout=10.0)
        processor.force_flush()
        assert [(c.session_id, len(c.turns), c.extra["revision"]) for c in seen] == [(kept, 1, 1), (kept, 1, 2)]
        assert processor.stats()["sampled_out"] == 2  # the turn drawn out, at each of its revisions
        assert processor.stats()["reevaluations"] == 3  # both turns, and the session judged again
    finally:
        processor.shutdown()


def test_a_given_up_turn_counts_by_the_session_under_its_root(made: InMemorySpanExporter, tmp_path: Path) -> None:
    """In the worker, a turn whose root never arrives is given up: its session (on a span under it) decides the
    count, ``sampled_out`` for a session drawn out, even when a draw by trace id would have taken the trace."""
    out = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=False))
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_max_wait_s=0.3, session_quiet_period_s=600.0, sample_rate=0.5)
    try:
        tool, agent, _ = _turn_drawn(made, out, by_trace_id_in=True, answer="o")
        processor.on_end(tool)
        processor.on_end(agent)  # the root never comes
        by_reason = lambda: processor.stats()["not_evaluated_by_reason"]  # noqa: E731
        assert _wait(lambda: bool(by_reason()), timeout=10.0)
        processor.force_flush()
        assert by_reason() == {"sampled_out": 1}
        assert seen == []
    finally:
        processor.shutdown()


class _TraceIds(RandomIdGenerator):
    """Random trace ids, each drawn until a draw by trace id at rate 0.5 takes it (``inside``) or leaves it."""

    def __init__(self, inside: bool) -> None:
        self._inside = inside

    def generate_trace_id(self) -> int:
        while True:
            trace_id = random.getrandbits(128)
            if (trace_fraction(trace_id) < 0.5) == self._inside:
                return trace_id


@pytest.mark.parametrize("inside", [True, False], ids=["session-in-traces-out", "session-out-traces-in"])
def test_in_process_a_turn_whose_session_span_outlives_its_root_is_drawn_by_that_session(
    tmp_path: Path, inside: bool
) -> None:
    """In process (``on_start`` seen): the user's request span ends while the span carrying the session (a graph
    still streaming its answer) runs on. Each turn's trace id draws the other way than its session."""
    session = next(f"s-{n}" for n in range(1000) if _drawn(f"s-{n}", drawn_in=inside))
    seen: list[Conversation] = []
    processor = _processor(tmp_path, seen, trace_quiet_period_s=0.2, session_quiet_period_s=600.0, sample_rate=0.5)
    provider = TracerProvider(id_generator=_TraceIds(not inside))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    try:
        for index in range(4):
            root = tracer.start_span("request", attributes={"input.value": "q", "output.value": str(index)})
            attributes = {"session.id": session, "evaltrace.span.kind": "agent", "output.value": str(index)}
            agent = tracer.start_span("invoke_agent", context=set_span_in_context(root), attributes=attributes)
            root.end()
            agent.end()  # after its root: the session was not known when the root ended
        assert _wait(lambda: processor.stats()["completion"]["completed"] == 4, timeout=10.0)
        processor.force_flush()
        assert [(c.session_id, len(c.turns)) for c in seen] == ([(session, 4)] if inside else [])
        assert processor.stats()["sampled_out"] == (0 if inside else 4)
    finally:
        provider.shutdown()
