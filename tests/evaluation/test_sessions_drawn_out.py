"""What a session-scope evaluator drawn out leaves behind: no job, exact counts, the spans exported as always.

Real SDK pipelines in process (``EvaluationSpanProcessor`` in front of an in-memory exporter), with trace ids made
to draw a chosen way at rate 0.5, so a draw by trace id instead of by session (or the other way) shows in the counts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer, set_span_in_context

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, ExportSampling, evaluator
from evaltrace.evaluation.trace_sampling import session_fraction, trace_fraction
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation

OUT = next(f"s-{n}" for n in range(1000) if session_fraction(f"s-{n}") >= 0.5)  # a session rate 0.5 draws out


class _TraceIds(RandomIdGenerator):
    """Trace ids a draw by trace id at rate 0.5 takes (True) or leaves (False), in the order of ``draws``."""

    def __init__(self, draws: list[bool]) -> None:
        self._draws = list(draws)

    def generate_trace_id(self) -> int:
        inside = self._draws.pop(0)
        while True:
            trace_id = random.getrandbits(128)
            if (trace_fraction(trace_id) < 0.5) == inside:
                return trace_id


@dataclass
class _App:
    processor: EvaluationSpanProcessor
    exporter: InMemorySpanExporter
    tracer: Tracer
    seen: list[Conversation]

    def names(self) -> list[str]:
        return sorted(span.name for span in self.exporter.get_finished_spans())


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[Callable[..., _App]]:
    providers: list[TracerProvider] = []

    def make(draws: list[bool], spec: Callable[[Any], EvaluatorSpec] | None = None, **options: Any) -> _App:
        seen: list[Conversation] = []

        @evaluator(name="coherent")
        def coherent(conversation: Conversation) -> EvaluationResult:
            seen.append(conversation)
            return EvaluationResult(evaluator="coherent", passed=True, score=1.0)

        made = spec(coherent) if spec is not None else EvaluatorSpec(coherent, scope="session", sample_rate=0.5)
        exporter = InMemorySpanExporter()
        options.setdefault("session_quiet_period_s", 600.0)
        processor = EvaluationSpanProcessor(
            downstream=[SimpleSpanProcessor(exporter)],
            evaluators=[made],
            dead_letter_dir=tmp_path / "dead-letter",
            **options,
        )
        provider = TracerProvider(id_generator=_TraceIds(draws))
        provider.add_span_processor(processor)
        providers.append(provider)
        return _App(processor, exporter, provider.get_tracer("app"), seen)

    yield make
    for provider in providers:
        provider.shutdown()


def _wait(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return predicate()


def test_a_turn_whose_session_drew_it_out_queues_no_job(make_app: Callable[..., _App]) -> None:
    """The root ends before the span carrying the session (a stream outliving the request span): the trace is drawn
    by that session once complete. Drawn out, nothing of it is queued (no slot of ``max_queue_size`` taken, never
    counted ``dropped``), and every span is exported as if no evaluator existed."""
    app = make_app([True, True, True], trace_quiet_period_s=0.1, max_queue_size=1)  # by trace id: all in
    for index in range(3):
        root = app.tracer.start_span("request", attributes={"output.value": str(index)})
        agent = app.tracer.start_span("invoke_agent", context=set_span_in_context(root), attributes={"session.id": OUT})
        root.end()
        agent.end()
    assert _wait(lambda: app.processor.stats()["completion"]["completed"] == 3)
    app.processor.force_flush()
    stats = app.processor.stats()
    assert (stats["enqueued"], stats["dropped"], stats["sampled_out"]) == (0, 0, 3)
    assert stats["not_evaluated_by_reason"] == {"sampled_out": 3}
    assert app.names() == ["invoke_agent"] * 3 + ["request"] * 3
    assert app.seen == []


def test_a_turn_without_session_drawn_out_at_its_roots_end_is_exported_at_once(make_app: Callable[..., _App]) -> None:
    """No session anywhere, the trace complete as its root ends: drawn out by trace id there, on the application's
    thread. Nothing is queued and export sampling has no verdict to wait for: the trace is exported now, not
    parked until ``max_age_s`` (and never counted released unsampled)."""
    sampling = ExportSampling(keep_rate=1.0, max_age_s=120.0)
    app = make_app([False, False], trace_quiet_period_s=0.0, export_sampling=sampling)
    for _ in range(2):
        with app.tracer.start_as_current_span("request"):
            with app.tracer.start_as_current_span("tool"):
                pass
    assert _wait(lambda: len(app.exporter.get_finished_spans()) == 4, timeout=5.0)
    app.processor.force_flush()
    stats = app.processor.stats()
    assert (stats["enqueued"], stats["dropped"], stats["sampled_out"]) == (0, 0, 2)
    assert stats["sessions"]["without_session"] == 0
    assert stats["export_sampling"]["parked_spans"] == 0
    assert stats["export_sampling"]["released_unsampled"] == 0
    assert app.names() == ["request", "request", "tool", "tool"]


def test_a_turn_drawn_out_on_a_later_roots_job_releases_the_export_wait(make_app: Callable[..., _App]) -> None:
    """A service called twice in one trace: the first local root ends waiting (export sampling told to wait for
    its verdict), the second, marked ``evaltrace.trace.end``, completes the trace on its own job. No session, the
    trace id drawn out: that job is never queued, and the wait is ended with it, so the trace goes out now."""
    trace_id = next(n for n in range(1, 1000) if trace_fraction(n) >= 0.5)
    remote = SpanContext(trace_id, 0x98, is_remote=True, trace_flags=TraceFlags(1))
    parent = set_span_in_context(NonRecordingSpan(remote))
    sampling = ExportSampling(keep_rate=1.0, max_age_s=120.0)
    app = make_app([], trace_quiet_period_s=600.0, export_sampling=sampling)
    app.tracer.start_span("first call", context=parent).end()
    app.tracer.start_span("second call", context=parent, attributes={"evaltrace.trace.end": True}).end()
    assert _wait(lambda: len(app.exporter.get_finished_spans()) == 2, timeout=5.0)
    stats = app.processor.stats()
    assert (stats["enqueued"], stats["sampled_out"], stats["export_sampling"]["released_unsampled"]) == (0, 1, 0)
    assert app.names() == ["first call", "second call"]


def test_turns_without_any_session_count_each_draw_by_trace_id_exactly(make_app: Callable[..., _App]) -> None:
    """A trace carrying no session id is drawn by its trace id: drawn out, ``sampled_out``; drawn in, it has no
    session to join (``sessions.without_session``). Each trace is counted once, the one way or the other."""
    draws = [True, False, True, True, False]
    app = make_app(draws, trace_quiet_period_s=0.0)
    for _ in draws:
        with app.tracer.start_as_current_span("request"):
            with app.tracer.start_as_current_span("tool"):
                pass
    app.processor.force_flush()
    stats = app.processor.stats()
    assert stats["sampled_out"] == 2
    assert stats["not_evaluated_by_reason"] == {"sampled_out": 2}
    assert stats["sessions"]["without_session"] == 3
    assert stats["enqueued"] == 0  # nothing in any of them to judge
    assert len(app.exporter.get_finished_spans()) == 10


def test_a_given_up_turn_whose_session_drew_it_out_counts_sampled_out(make_app: Callable[..., _App]) -> None:
    """The root ends first, then more spans than ``trace_completion_max_spans``, carrying a session drawn out: the
    trace is given up, and counted as the draw by that session decides (``sampled_out``), not ``trace_incomplete``:
    it would never have been judged."""
    app = make_app([True], trace_quiet_period_s=0.1, trace_completion_max_spans=3)  # by trace id: in
    root = app.tracer.start_span("request")
    children = [
        app.tracer.start_span("step", context=set_span_in_context(root), attributes={"session.id": OUT})
        for _ in range(5)
    ]
    root.end()
    for child in children:
        child.end()
    by_reason = lambda: app.processor.stats()["not_evaluated_by_reason"]  # noqa: E731
    assert _wait(lambda: bool(by_reason()))
    app.processor.force_flush()
    assert by_reason() == {"sampled_out": 1}
    assert app.processor.stats()["sampled_out"] == 1
    assert len(app.exporter.get_finished_spans()) == 6


def test_a_custom_session_sampler_is_asked_once_per_turn(make_app: Callable[..., _App]) -> None:
    """A session-scope evaluator's own ``sampler`` decides at the root's end, once: the turn it admits is not asked
    again when it joins its session (an alternating sampler would draw it out then)."""
    calls: list[bool] = []

    def alternating(attributes: Any) -> bool:
        calls.append(len(calls) % 2 == 0)  # True, False, True, ...
        return calls[-1]

    def spec(judge: Any) -> EvaluatorSpec:
        return EvaluatorSpec(judge, scope="session", sampler=alternating)

    app = make_app([True, False], spec=spec, trace_quiet_period_s=0.0)
    for answer in ("one", "two"):
        attributes = {"session.id": "chat", "input.value": "q", "output.value": answer}
        with app.tracer.start_as_current_span("request", attributes=attributes):
            pass
    app.processor.end_session("chat")
    assert _wait(lambda: len(app.seen) == 1)
    app.processor.force_flush()
    assert calls == [True, False]  # once per turn
    assert [turn.final_answer for turn in app.seen[0].turns] == ["one"]
    assert app.processor.stats()["sampled_out"] == 1
