"""Session-scope evaluation: a session's traces judged together as a Conversation, once idle or ended.

Real SDK pipelines (in-memory span and log exporters), real sinks (JSONL file, Langfuse's HTTP API on 127.0.0.1),
with short quiet periods and generous polling deadlines.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

import evaltrace
from evaltrace._internal.errors import FieldMappingFailed
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, LangfuseScoreSink, PhoenixScoreSink, evaluator
from evaltrace.schema import EvaluationResult, Score
from evaltrace.schema.conversation import Conversation
from evaltrace.schema.scores import session_score_id

from .conftest import Backend, MakePipeline, Pipeline, wait_until
from .log_records import InMemoryLogRecordExporter, event_record

QUIET = 0.5


class Judge:
    """A session evaluator recording each conversation it judged."""

    def __init__(self) -> None:
        self.seen: list[Conversation] = []

    def build(self) -> Any:
        @evaluator(name="coherent")
        def coherent(conversation: Conversation) -> EvaluationResult:
            self.seen.append(conversation)
            turns = len(conversation.turns)
            return EvaluationResult(evaluator="coherent", passed=True, score=turns / 10, reason=f"{turns} turns")

        return coherent


def _turn(p: Pipeline, session: str, question: str, answer: str, **extra: Any) -> None:
    attributes = {
        "session.id": session,
        "user.id": "u7",
        "evaltrace.span.kind": "agent",
        "input.value": question,
        "output.value": answer,
        **extra,
    }
    with p.tracer.start_as_current_span("turn", attributes=attributes):
        pass


@pytest.fixture
def logs() -> Iterator[tuple[LoggerProvider, InMemoryLogRecordExporter]]:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _session_pipeline(make_pipeline: MakePipeline, judge: Judge, sinks: Any = (), **options: Any) -> Pipeline:
    options.setdefault("trace_quiet_period_s", 0.0)
    options.setdefault("session_quiet_period_s", QUIET)
    return make_pipeline([EvaluatorSpec(judge.build(), scope="session")], sinks=sinks, **options)


def test_a_three_trace_session_is_judged_once_when_quiet_then_rejudged_by_a_late_fourth_trace(
    make_pipeline: MakePipeline,
    backend: Backend,
    tmp_path: Path,
    logs: tuple[LoggerProvider, InMemoryLogRecordExporter],
) -> None:
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    langfuse = LangfuseScoreSink(backend.url, "pk-lf-1", "sk-lf-2", timeout_s=5.0)
    logger_provider, log_exporter = logs
    p = _session_pipeline(
        make_pipeline,
        judge,
        sinks=[JsonlScoreSink(jsonl), langfuse],
        logger_provider=logger_provider,
        sink_schedule_delay_s=0.01,
    )
    for i in range(3):
        _turn(p, "chat-1", f"question {i}", f"answer {i}")
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    first = judge.seen[0]
    assert [t.user_input for t in first.turns] == ["question 0", "question 1", "question 2"]
    assert [t.final_answer for t in first.turns] == ["answer 0", "answer 1", "answer 2"]
    assert first.session_id == "chat-1" and first.user_id == "u7" and first.extra["revision"] == 1
    time.sleep(3 * QUIET)  # idle again: judged once, not once per tick or per trace
    assert len(judge.seen) == 1

    _turn(p, "chat-1", "question 3", "answer 3")  # the user comes back: a new revision on all four turns
    assert wait_until(lambda: len(judge.seen) == 2, timeout=30)
    second = judge.seen[1]
    assert len(second.turns) == 4 and second.extra["revision"] == 2
    assert second.turns[-1].user_input == "question 3"
    p.flush()

    stats = p.processor.stats()
    assert stats["sessions"]["judged"] == 2 and stats["sessions"]["rejudged"] == 1
    assert stats["sessions"]["traces_added"] == 4
    # JSONL: one line per judgement, both on the session (no trace, no observation), the same id (an upsert).
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    scores = [line.get("score", line) for line in lines]
    assert [s["session_id"] for s in scores] == ["chat-1", "chat-1"]
    assert all(s["trace_id"] is None and s["observation_id"] is None for s in scores)
    assert scores[0]["id"] == scores[1]["id"] == session_score_id("chat-1", "coherent")
    assert [s["metadata"]["revision"] for s in scores] == [1, 2]
    assert [s["value"] for s in scores] == [0.3, 0.4]
    # Langfuse: the score payload carries sessionId and no traceId, with the same id both times.
    assert wait_until(lambda: len(backend.requests) >= 2, timeout=30)
    sent = [item for body in backend.bodies() for item in (body.get("batch") or [body])]
    bodies = [item.get("body", item) for item in sent]
    assert [b["sessionId"] for b in bodies] == ["chat-1", "chat-1"]
    assert all("traceId" not in b and "observationId" not in b for b in bodies)  # exactly one target
    assert bodies[0]["id"] == bodies[1]["id"]
    # Log events: gen_ai.evaluation.result with session.id, no span parent.
    records = [r.log_record for r in log_exporter.get_finished_logs()]
    events = [(r, event_record(r)) for r in records]
    session_events = [(r, attrs) for r, (name, attrs) in events if name == "gen_ai.evaluation.result"]
    assert [attrs["session.id"] for _, attrs in session_events] == ["chat-1", "chat-1"]
    assert [attrs["evaltrace.evaluation.revision"] for _, attrs in session_events] == [1, 2]
    assert all(not r.trace_id for r, _ in session_events)


def test_end_session_judges_at_once_without_the_quiet_period(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    # Quiet periods far beyond the test: only end_session() can make the session due.
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0, trace_quiet_period_s=600.0)
    for i in range(2):
        _turn(p, "chat-2", f"q{i}", f"a{i}")
    p.processor.end_session("chat-2")
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    assert len(judge.seen[0].turns) == 2  # both turns, though their own trace quiet period had not passed


def test_end_session_through_the_public_api_and_the_span_marker(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0)
    _turn(p, "chat-3", "q0", "a0")
    with p.tracer.start_as_current_span("turn", attributes={"session.id": "chat-3", "input.value": "bye"}):
        # No configure(): the in-process call reaches no processor, the marker on the current span does.
        assert evaltrace.end_session("chat-3") is True
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    assert [t.user_input for t in judge.seen[0].turns] == ["q0", "bye"]
    with pytest.raises(ValueError, match="session id"):
        evaltrace.end_session("")


def test_traces_without_a_session_id_are_counted_not_judged(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge)
    with p.tracer.start_as_current_span("turn", attributes={"input.value": "hi"}):
        pass
    p.flush()
    assert judge.seen == []
    assert p.processor.stats()["sessions"]["without_session"] == 1


def test_memory_bounds_evict_the_oldest_session_counted_and_warned_once(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    judge = Judge()
    p = _session_pipeline(
        make_pipeline, judge, session_quiet_period_s=600.0, session_max_sessions=2, session_max_traces=2
    )
    with caplog.at_level(logging.WARNING, logger="evaltrace.evaluation"):
        for session in ("s1", "s2", "s3", "s4"):
            _turn(p, session, "q", "a")
        for i in range(3):
            _turn(p, "s4", f"more {i}", "a")
        # Each trace is announced to its session as it completes and arrives once mapped: every one is accounted.
        assert wait_until(lambda: _arrived(p) == 7, timeout=30)
    stats = p.processor.stats()["sessions"]
    assert stats["evicted_sessions"] == 2  # s1 and s2, never judged
    # Their traces were either held when they were evicted, or arrived after and were not kept (the loop's pace).
    assert stats["traces_added"] + stats["after_eviction"] == 7
    before = stats["after_eviction"]
    assert stats["dropped_turns"] == 2  # s4 keeps its two latest turns
    assert stats["open_sessions"] == 2 and stats["traces"] == 3
    warnings = [r for r in caplog.records if "session evaluation is losing" in r.getMessage()]
    assert len(warnings) == 1
    _turn(p, "s1", "late", "a")  # a turn of an evicted session: never judged as if it were the whole session
    p.flush()
    assert p.processor.stats()["sessions"]["after_eviction"] == before + 1
    assert sorted(c.session_id for c in judge.seen) == ["s3", "s4"]  # the flush judged what was held
    assert [[t.user_input for t in c.turns] for c in judge.seen if c.session_id == "s4"] == [["more 1", "more 2"]]


def _arrived(p: Pipeline) -> int:
    stats = p.processor.stats()["sessions"]
    return int(stats["traces_added"] + stats["after_eviction"])


def test_scope_and_trace_level_are_one_setting() -> None:
    judge = Judge().build()
    assert EvaluatorSpec(judge, trace_level=True).scope == "trace"
    assert EvaluatorSpec(judge, scope="trace").trace_level is True
    assert EvaluatorSpec(judge).scope == "span" and EvaluatorSpec(judge).trace_level is False
    session = EvaluatorSpec(judge, scope="session")
    assert session.trace_level is False and session.session_level
    with pytest.raises(ValueError, match='trace_level=True means scope="trace"'):
        EvaluatorSpec(judge, trace_level=True, scope="session")
    with pytest.raises(ValueError, match="scope must be one of"):
        EvaluatorSpec(judge, scope="conversation")  # type: ignore[arg-type]


def test_phoenix_gets_session_scores_as_session_annotations(make_pipeline: MakePipeline, backend: Backend) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, sinks=[PhoenixScoreSink(backend.url)], sink_schedule_delay_s=0.01)
    _turn(p, "chat-9", "q", "a")
    p.processor.end_session("chat-9")
    assert wait_until(lambda: len(backend.requests) == 1, timeout=30)
    (request,) = backend.requests
    assert request.path == "/v1/session_annotations?sync=true"
    (annotation,) = request.body["data"]
    assert annotation["session_id"] == "chat-9" and "span_id" not in annotation
    assert annotation["name"] == "coherent" and annotation["result"]["score"] == 0.1
    assert annotation["identifier"] == "evaltrace"  # with the name and session: Phoenix's upsert key


def test_phoenix_splits_a_mixed_batch_between_span_and_session_annotations(backend: Backend) -> None:
    on_span = Score(name="exact", value=1.0, trace_id="ab" * 16, observation_id="cd" * 8)
    on_session = Score(name="coherent", value=0.5, session_id="chat-10")
    result = PhoenixScoreSink(backend.url).export([on_span, on_session])
    assert result.ok
    paths = sorted(r.path for r in backend.requests)
    assert paths == ["/v1/session_annotations?sync=true", "/v1/span_annotations?sync=false"]


def test_phoenix_retries_a_session_it_does_not_know_yet(backend: Backend) -> None:
    backend.statuses = [404]  # Phoenix: "Sessions with IDs ... do not exist" (its spans are still on the way)
    result = PhoenixScoreSink(backend.url).export([Score(name="coherent", value=0.5, session_id="chat-11")])
    assert len(result.failed) == 1 and not result.rejected  # retried by the sink worker, not dead-lettered at once


def test_session_evaluators_run_in_process_with_the_process_engine(make_pipeline: MakePipeline) -> None:
    judge = Judge()  # a closure: it could not be shipped to the evaluation process, and need not be
    p = _session_pipeline(make_pipeline, judge, engine="process")
    _turn(p, "chat-12", "q", "a")
    p.processor.end_session("chat-12")
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    assert "process" not in p.processor.stats() or p.processor.stats()["process"]["alive"] is False


def test_rate_limits_are_taken_per_session_judgement_not_per_turn(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    # One token, refilled once in ~17 minutes: the first session's judgement takes it, whatever its turns.
    spec = EvaluatorSpec(judge.build(), scope="session", limits={"evaluations_per_second": 0.001, "burst": 1})
    p = make_pipeline([spec], trace_quiet_period_s=0.0, session_quiet_period_s=600.0)
    for i in range(3):
        _turn(p, "chat-20", f"q{i}", "a")
    p.flush()  # judges chat-20: one token for its three turns
    assert [len(c.turns) for c in judge.seen] == [3]
    _turn(p, "chat-21", "q", "a")
    p.flush()  # no token left: not judged, counted, no score
    assert [c.session_id for c in judge.seen] == ["chat-20"]
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"]["rate_limited"] == 1


def test_session_quiet_period_from_the_environment_and_validated(make_pipeline: MakePipeline) -> None:
    from evaltrace._internal.evals_env import apply_to_options, read_evaluation_environment
    from evaltrace.exceptions import ConfigError

    name = "OTEL_INSTRUMENTATION_GENAI_EVALS_SESSION_QUIET_PERIOD"
    env = read_evaluation_environment({name: "30"})
    assert apply_to_options(env, None)["session_quiet_period_s"] == 30
    assert apply_to_options(env, {"session_quiet_period_s": 5})["session_quiet_period_s"] == 5  # code wins
    with pytest.raises(ConfigError) as info:
        read_evaluation_environment({name: "later"})
    assert info.value.setting == name
    with pytest.raises(ConfigError, match="session_max_sessions"):
        make_pipeline(session_max_sessions=0)


def test_shutdown_judges_the_sessions_still_waiting(make_pipeline: MakePipeline, tmp_path: Path) -> None:
    judge = Judge()
    jsonl = tmp_path / "at-exit.jsonl"
    p = _session_pipeline(make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0)
    for i in range(2):
        _turn(p, "chat-30", f"q{i}", "a")
    p.processor.shutdown(10_000)  # nothing is lost on a clean shutdown: the waiting session is judged and delivered
    assert [len(c.turns) for c in judge.seen] == [2]
    (line,) = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert line.get("score", line)["session_id"] == "chat-30"


def _scores(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line.get("score", line) for line in lines]


def test_a_judged_session_evicted_is_never_rejudged_from_its_later_turns_alone(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    p = _session_pipeline(
        make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0, session_max_sessions=1
    )
    for i in range(3):
        _turn(p, "long", f"q{i}", "a")
    p.flush()  # judged on its three turns
    _turn(p, "other", "q", "a")  # one session held at most: "long", judged, is forgotten
    assert wait_until(lambda: p.processor.stats()["sessions"]["forgotten_sessions"] == 1, timeout=30)
    _turn(p, "long", "back again", "a")  # the user comes back: one turn is not the whole conversation
    p.flush()
    assert [(c.session_id, len(c.turns)) for c in judge.seen] == [("long", 3), ("other", 1)]
    stats = p.processor.stats()["sessions"]
    assert stats["after_eviction"] == 1
    # Every sink keeps the full verdict: no partial one upserted over it under the same score id.
    assert [(s["session_id"], s["value"]) for s in _scores(jsonl)] == [("long", 0.3), ("other", 0.1)]


def _marked_turn(p: Pipeline, session: str, question: str, *, marker: bool) -> None:
    """A turn during which the application calls end_session(): the end is asked while the turn still runs."""
    attributes = {"session.id": session, "evaltrace.span.kind": "agent", "input.value": question, "output.value": "a"}
    with p.tracer.start_as_current_span("turn", attributes=attributes) as span:
        if marker:
            span.set_attribute("evaltrace.session.end", session)  # what evaltrace.end_session() does to the span
        p.processor.end_session(session)  # ... and to the processor configure() built
        time.sleep(1.0)  # the timer ticks meanwhile (every 0.1 s): it must not judge the session without this turn


@pytest.mark.parametrize("marker", [True, False], ids=["with-marker", "call-only"])
def test_end_session_inside_the_last_turn_judges_once_with_that_turn(make_pipeline: MakePipeline, marker: bool) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0)
    _turn(p, "bye", "q0", "a")
    assert wait_until(lambda: p.processor.stats()["sessions"]["traces_added"] == 1, timeout=30)
    _marked_turn(p, "bye", "q1", marker=marker)
    assert wait_until(lambda: len(judge.seen) >= 1, timeout=30)
    p.flush()
    assert [[t.user_input for t in c.turns] for c in judge.seen] == [["q0", "q1"]]  # once, with the last turn
    assert p.processor.stats()["sessions"]["ended"] == 1  # one call, whether it also marked the span


def test_end_session_on_a_session_judged_already_does_not_hurry_its_next_turn(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0)
    _turn(p, "again", "q0", "a")
    p.processor.end_session("again")
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    p.processor.end_session("again")  # nothing new to judge: the request changes nothing
    assert wait_until(lambda: p.processor.stats()["sessions"]["ended"] == 2, timeout=30)
    _turn(p, "again", "q1", "a")  # the user carries on: judged after the quiet period, not at once
    assert wait_until(lambda: p.processor.stats()["sessions"]["traces_added"] == 2, timeout=30)
    time.sleep(1.0)
    assert len(judge.seen) == 1


def test_one_session_evaluator_failing_on_our_side_does_not_cancel_the_others(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    class Unmeasurable(EvaluationResult):
        @property
        def latency_ms(self) -> int:  # a user subclass whose property fails: recording the result raises
            raise RuntimeError("no latency")

    @evaluator(name="broken")
    def broken(conversation: Conversation) -> EvaluationResult:
        return Unmeasurable(evaluator="broken", passed=True, score=1.0)

    @evaluator(name="slow")
    def slow(conversation: Conversation) -> EvaluationResult:
        time.sleep(0.5)  # still running when "broken" fails
        return EvaluationResult(evaluator="slow", passed=True, score=0.7)

    jsonl = tmp_path / "scores.jsonl"
    specs = [EvaluatorSpec(broken, scope="session"), EvaluatorSpec(slow, scope="session")]
    p = make_pipeline(specs, sinks=[JsonlScoreSink(jsonl)], trace_quiet_period_s=0.0, session_quiet_period_s=600.0)
    _turn(p, "two-judges", "q", "a")
    p.flush()
    assert [(s["name"], s["value"]) for s in _scores(jsonl)] == [("slow", 0.7)]  # the other judgement went out
    stats = p.processor.stats()
    assert stats["evaluators"]["slow"]["passed"] == 1
    assert stats["evaluators"]["broken"]["errors"] == 1 and stats["evaluators"]["broken"]["passed"] == 0
    assert stats["internal_errors"] >= 1


def test_trace_ids_follow_the_turn_order(make_pipeline: MakePipeline) -> None:
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0)
    attributes = {"session.id": "order", "evaltrace.span.kind": "agent", "output.value": "a"}
    first = p.tracer.start_span("turn", attributes={**attributes, "input.value": "first"})
    second = p.tracer.start_span("turn", attributes={**attributes, "input.value": "second"})
    second.end()  # the later turn completes (and reaches the session) first
    assert wait_until(lambda: p.processor.stats()["sessions"]["traces_added"] == 1, timeout=30)
    first.end()
    p.flush()
    (conversation,) = judge.seen
    assert [t.user_input for t in conversation.turns] == ["first", "second"]
    assert conversation.extra["trace_ids"] == [t.trace_id for t in conversation.turns]
    assert conversation.extra["trace_ids"] == [
        format(span.context.trace_id, "032x") for span in (first, second) if span.context is not None
    ]


def test_the_byte_bound_counts_what_held_traces_cost_in_memory_not_their_json_length() -> None:
    import tracemalloc
    from datetime import UTC, datetime

    from evaltrace.evaluation.sessions import trace_size
    from evaltrace.schema import Trace

    start = datetime(2024, 1, 1, tzinfo=UTC)
    shapes: dict[str, Any] = {
        "chat": lambda i: {
            "input": {"query": f"what is the refund policy for order {i}?"},
            "output": {"final_answer": "The refund policy " * 20},
            "messages": [{"role": "user", "content": f"hi {j}"} for j in range(10)],
        },
        "short": lambda i: {"input": {"query": f"q{i}"}, "output": {"final_answer": f"a{i}"}},
        "long answer": lambda i: {"input": {"query": "x" * 5000}, "output": {"final_answer": "y" * 20000}},
    }
    for shape, fields in shapes.items():
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            traces = [
                Trace(
                    run_id="live",
                    case_id=f"c{i}",
                    variant_name="v",
                    started_at=start,
                    finished_at=start,
                    extra={"trace_id": f"{i:032x}"},
                    **fields(i),
                )
                for i in range(500)
            ]
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        estimate = sum(trace_size(trace) for trace in traces)
        # session_max_bytes bounds the memory (JSON length alone was up to 5 times less), and not much below it.
        assert held - before <= estimate <= 1.6 * (held - before), shape


def test_a_session_log_record_has_no_parent_even_when_emitted_inside_a_span(
    make_pipeline: MakePipeline, logs: tuple[LoggerProvider, InMemoryLogRecordExporter]
) -> None:
    # Runs in CI's oldest-versions step too (opentelemetry-sdk 1.30: the Events API path, which takes the current
    # span when the event names none).
    from evaltrace.evaluation.telemetry import LogEventEmitter

    logger_provider, exporter = logs
    p = make_pipeline()
    result = EvaluationResult(evaluator="coherent", passed=True, score=0.5)
    with p.tracer.start_as_current_span("unrelated"):
        LogEventEmitter(logger_provider).emit_session("chat-40", result, 2)
    (record,) = [r.log_record for r in exporter.get_finished_logs()]
    name, attributes = event_record(record)
    assert name == "gen_ai.evaluation.result"
    assert attributes["session.id"] == "chat-40" and attributes["evaltrace.evaluation.revision"] == 2
    assert not record.trace_id and not record.span_id


def test_a_shutdown_racing_the_timer_never_marks_a_session_evaluator_on_a_trace_root(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evaltrace.evaluation import EvaluationSpanProcessor
    from evaltrace.evaluation.sampling import ExportSampling

    class ShutsDownFromTheTimer(SpanProcessor):
        """A downstream processor that shuts the pipeline down from the timer's thread (the race, made certain)."""

        processor: EvaluationSpanProcessor | None = None

        def on_end(self, span: ReadableSpan) -> None:
            if self.processor is not None and threading.current_thread().name == "evaltrace-trace-completion":
                processor, self.processor = self.processor, None
                processor.shutdown(5_000)

    judge = Judge()
    exporter = InMemorySpanExporter()
    trigger = ShutsDownFromTheTimer()
    processor = EvaluationSpanProcessor(
        downstream=[SimpleSpanProcessor(exporter), trigger],
        evaluators=[EvaluatorSpec(judge.build(), scope="session")],
        trace_quiet_period_s=600.0,  # the trace waits for completion: shutdown's drain finds it
        session_quiet_period_s=600.0,
        export_sampling=ExportSampling(keep_rate=1.0, max_age_s=0.2),  # released by the timer after 0.2 s
        dead_letter_dir=tmp_path / "dead-letter",
    )
    trigger.processor = processor
    provider = TracerProvider()
    provider.add_span_processor(processor)
    attributes = {"session.id": "cut", "evaltrace.span.kind": "agent", "input.value": "q", "output.value": "a"}
    with provider.get_tracer("tests").start_as_current_span("turn", attributes=attributes):
        pass
    assert wait_until(lambda: trigger.processor is None, timeout=30)  # shut down from the timer's thread
    names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["turn"]  # no "evaluation coherent" mark on the trace: a session evaluator judges no trace
    assert all("evaltrace.eval.coherent.outcome" not in (s.attributes or {}) for s in exporter.get_finished_spans())
    assert processor.stats()["not_evaluated_by_reason"]["shutdown"] == 1  # counted all the same
    assert judge.seen == []
    provider.shutdown()


def test_an_older_revision_finishing_after_a_newer_one_is_not_published(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    release = threading.Event()
    seen: list[int] = []

    @evaluator(name="coherent")
    def coherent(conversation: Conversation) -> EvaluationResult:
        seen.append(len(conversation.turns))
        if len(conversation.turns) == 1:  # revision 1 is held until revision 2 has been published
            release.wait(30)
        return EvaluationResult(evaluator="coherent", passed=True, score=len(conversation.turns) / 10)

    jsonl = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(coherent, scope="session")],
        sinks=[JsonlScoreSink(jsonl)],
        trace_quiet_period_s=0.0,
        session_quiet_period_s=600.0,
        sink_schedule_delay_s=0.01,
    )
    _turn(p, "race", "q0", "a")
    p.processor.end_session("race")
    assert wait_until(lambda: seen == [1], timeout=30)  # revision 1 runs (held)
    _turn(p, "race", "q1", "a")
    p.processor.end_session("race")
    assert wait_until(lambda: len(_scores(jsonl)) == 1, timeout=30)  # revision 2 went out
    release.set()
    p.flush()
    scores = _scores(jsonl)
    assert [(s["value"], s["metadata"]["revision"]) for s in scores] == [(0.2, 2)]  # revision 1 never overwrote it
    assert p.processor.stats()["superseded"] == 1


def test_finding_a_traces_session_never_raises_into_the_application(make_pipeline: MakePipeline) -> None:
    class Refuses(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:  # an application's logging filter that fails
            raise RuntimeError("filter failed")

    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0, session_max_sessions=1)
    _turn(p, "first", "q", "a")
    assert wait_until(lambda: p.processor.stats()["sessions"]["traces_added"] == 1, timeout=30)
    refuses = Refuses()
    logging.getLogger("evaltrace.evaluation").addFilter(refuses)
    try:
        # Its root ends on this thread: announcing it to its session evicts "first" (unjudged), whose loss warning
        # meets the failing filter. The application's span ends normally all the same.
        _turn(p, "second", "q", "a")
    finally:
        logging.getLogger("evaltrace.evaluation").removeFilter(refuses)
    p.processor.end_session("second")  # its trace was not left announced and missing: judged at once
    assert wait_until(lambda: [c.session_id for c in judge.seen] == ["second"], timeout=30)


def _held_turn_spans(p: Pipeline, session: str) -> list[Any]:
    """Weak references to every span of one two-span turn, once the session buffer holds its trace (unjudged)."""
    import weakref

    with p.tracer.start_as_current_span("turn", attributes={"session.id": session, "evaltrace.span.kind": "agent"}):
        with p.tracer.start_as_current_span("retrieve", attributes={"input.value": "x" * 100_000}):
            pass
    assert wait_until(lambda: p.processor.stats()["sessions"]["traces"] == 1, timeout=30)
    p.flush()
    refs = [weakref.ref(span) for span in p.exporter.get_finished_spans()]
    assert len(refs) == 2
    p.exporter.clear()
    return refs


def test_a_trace_waiting_in_its_session_keeps_none_of_its_spans_alive(make_pipeline: MakePipeline) -> None:
    """The session buffer holds a turn's Trace until the session is judged: its values, never the spans behind it.

    A Trace mapped lazily keeps its spans to map the fields not read yet; held until the session ends, that would
    be every span of every turn (their attributes, prompts and all) for as long as the user keeps talking. (The
    completion buffer keeps a judged trace's spans for ``trace_late_window_s``, bounded: the window is 0 here.)
    """
    import gc

    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0, trace_late_window_s=0.0)
    refs = _held_turn_spans(p, "chat-mem")
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
    p.processor.end_session("chat-mem")
    assert wait_until(lambda: len(judge.seen) == 1, timeout=30)
    assert [turn.trace_id for turn in judge.seen[0].turns] == [judge.seen[0].extra["trace_ids"][0]]


def test_a_trace_with_a_field_that_failed_to_map_keeps_none_of_its_spans_alive_either(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same when one of the Trace's fields failed to map (a bug of ours): that field alone stays unreadable."""
    import gc

    from evaltrace.mapping import _build, _lazy_fields

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a mapping bug of ours")

    for module in (_build, _lazy_fields):  # the eager assembly and the lazy field source each look it up
        monkeypatch.setattr(module, "_error", broken)  # Trace.error, of every trace
    # pytest's log capture keeps each record, and the logged traceback's frames with it (the spans too): an
    # application's handlers format a record and let it go.
    monkeypatch.setattr(logging.getLogger("evaltrace"), "propagate", False)
    judge = Judge()
    p = _session_pipeline(make_pipeline, judge, session_quiet_period_s=600.0, trace_late_window_s=0.0)
    refs = _held_turn_spans(p, "chat-bug")
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
    held = next(iter(p.processor._sessions._sessions["chat-bug"].traces.values()))  # type: ignore[union-attr]
    assert held.output.final_answer is None and held.extra["trace_id"] and held.messages == []
    with pytest.raises(FieldMappingFailed) as failed:
        held.error  # noqa: B018  # the field that failed: unreadable, as it was before the spans were let go
    assert str(failed.value.__cause__) == "a mapping bug of ours"


def test_a_session_with_a_turn_whose_field_failed_to_map_is_not_evaluated_and_the_others_are_judged(
    make_pipeline: MakePipeline,
    tmp_path: Path,
    logs: tuple[LoggerProvider, InMemoryLogRecordExporter],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn whose Trace has a field that failed to map (a bug of ours) makes its session not evaluated.

    Every session evaluator of that session is not evaluated (``mapping_failed``, counted by reason as for a turn
    whose whole mapping failed: never a verdict, a score or the evaluator's error). The other sessions, handed out
    before and after it in the same collection, are judged as usual.
    """
    from evaltrace.mapping import _build, _lazy_fields

    real = _build._error

    def broken(root: Any, root_attrs: Any) -> Any:
        if root_attrs.get("input.value") == "boom":  # one turn of one session only
            raise RuntimeError("a mapping bug of ours")
        return real(root, root_attrs)

    for module in (_build, _lazy_fields):  # the eager assembly and the lazy field source each look it up
        monkeypatch.setattr(module, "_error", broken)  # Trace.error of that turn
    provider, exporter = logs
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    p = _session_pipeline(
        make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0, logger_provider=provider
    )
    _turn(p, "fine-1", "q", "a")
    _turn(p, "broken", "q0", "a0")
    _turn(p, "broken", "boom", "a1")
    _turn(p, "fine-2", "q", "a")
    p.flush()  # all three sessions due at once, "broken" in the middle
    assert sorted(c.session_id for c in judge.seen) == ["fine-1", "fine-2"]
    assert sorted(s["session_id"] for s in _scores(jsonl)) == ["fine-1", "fine-2"]
    stats = p.processor.stats()
    assert stats["internal_errors"] == 0
    coherent = stats["evaluators"]["coherent"]
    assert coherent["passed"] == 2 and coherent["errors"] == 0 and coherent["failed"] == 0
    assert stats["not_evaluated_by_reason"]["mapping_failed"] == 1
    assert stats["sessions"]["judged"] == 3
    assert stats["session_results"] == 2
    # As every not-evaluated session result (rate limited, queue full, a turn whose whole mapping failed): counted
    # by reason, with no log record and no score.
    events = [event_record(r.log_record)[1] for r in exporter.get_finished_logs()]
    assert sorted(e["session.id"] for e in events) == ["fine-1", "fine-2"]


def test_a_session_whose_conversation_cannot_be_built_is_not_evaluated_and_the_others_are_judged(
    make_pipeline: MakePipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any other failure to build a session's conversation (a bug of ours) loses no other session of the batch.

    It is counted like a turn whose field failed to map (``mapping_failed`` per evaluator, never a verdict), and the
    sessions handed out before and after it in the same collection are judged as usual.
    """
    from evaltrace.schema.conversation import Conversation

    real = Conversation.from_traces.__func__  # type: ignore[attr-defined]

    def broken(cls: Any, session_id: str, *args: Any, **kwargs: Any) -> Any:
        if session_id == "broken":
            raise RuntimeError("a conversation bug of ours")
        return real(cls, session_id, *args, **kwargs)

    monkeypatch.setattr(Conversation, "from_traces", classmethod(broken))
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    p = _session_pipeline(make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0)
    _turn(p, "fine-1", "q", "a")
    _turn(p, "broken", "q0", "a0")
    _turn(p, "fine-2", "q", "a")
    p.flush()
    assert sorted(c.session_id for c in judge.seen) == ["fine-1", "fine-2"]
    assert sorted(s["session_id"] for s in _scores(jsonl)) == ["fine-1", "fine-2"]
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"]["mapping_failed"] == 1
    assert stats["session_results"] == 2
    coherent = stats["evaluators"]["coherent"]
    assert coherent["passed"] == 2 and coherent["errors"] == 0 and coherent["failed"] == 0


def test_a_session_the_engine_fails_to_take_gives_its_slot_back_and_is_counted_not_evaluated(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """The engine failing to take a due session (its threads cannot start) loses nothing uncounted, blocks no flush.

    Its queue slot is given back (a later ``force_flush()`` returns True at once, not False at its timeout), each
    of its evaluators is counted not evaluated (``engine_unavailable``), and the rest of the batch is judged.
    """
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    p = _session_pipeline(make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0)
    engine = p.processor._engine
    real = engine.submit

    def submit(job: Any) -> None:
        if getattr(getattr(job, "conversation", None), "session_id", None) == "broken":
            raise RuntimeError("can't start new thread")
        real(job)

    engine.submit = submit  # type: ignore[method-assign]
    _turn(p, "fine-1", "q", "a")
    _turn(p, "broken", "q0", "a0")
    _turn(p, "fine-2", "q", "a")
    assert p.processor.force_flush(10_000)
    assert sorted(s["session_id"] for s in _scores(jsonl)) == ["fine-1", "fine-2"]
    stats = p.processor.stats()
    assert stats["queued"] == 0
    assert stats["not_evaluated_by_reason"] == {"engine_unavailable": 1}
    assert stats["internal_errors"] == 1
    _turn(p, "later", "q", "a")  # the pipeline goes on: the next session is judged and flushed as usual
    p.flush()
    assert sorted(s["session_id"] for s in _scores(jsonl)) == ["fine-1", "fine-2", "later"]


def test_a_session_turn_the_engine_cannot_start_threads_for_is_counted_and_a_later_session_is_judged(
    make_pipeline: MakePipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's dispatcher thread failing to start (injected at ``Thread.start``: cannot be provoked otherwise).

    The turn's job is refused before it is queued: its session evaluator is counted not evaluated
    (``engine_unavailable``), the flush returns True at once (no slot held by a job nothing runs), the turn is
    exported, and once the fault clears the next turn starts the threads and its session is judged.
    """
    failing = [True]
    real = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if failing[0] and thread.name == "evaltrace-eval-dispatch":
            raise RuntimeError("can't start new thread")
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    judge = Judge()
    jsonl = tmp_path / "scores.jsonl"
    p = _session_pipeline(make_pipeline, judge, sinks=[JsonlScoreSink(jsonl)], session_quiet_period_s=600.0)
    _turn(p, "lost", "q", "a")
    began = time.monotonic()
    assert p.processor.force_flush(10_000)
    assert time.monotonic() - began < 5.0
    stats = p.processor.stats()
    assert (stats["queued"], stats["enqueued"], stats.get("session_results", 0)) == (0, 0, 0)
    assert stats["not_evaluated_by_reason"] == {"engine_unavailable": 1}
    assert stats["evaluators"]["coherent"]["not_evaluated_by_reason"] == {"engine_unavailable": 1}
    assert [span.name for span in p.spans()] == ["turn"]
    failing[0] = False
    _turn(p, "later", "q", "a")
    p.flush()
    assert [c.session_id for c in judge.seen] == ["later"]
    assert [s["session_id"] for s in _scores(jsonl)] == ["later"]
    assert p.processor.stats()["session_results"] == 1


def test_a_limiter_that_fails_as_a_session_is_judged_refuses_only_its_evaluator_counted(
    make_pipeline: MakePipeline,
) -> None:
    """The limiter raising (its ``limits_clock`` fails) while a due session's judgement is admitted.

    The session's unlimited evaluator (admitted first) still judges it; the limited one is not evaluated, counted
    ``limits_unavailable`` (never run unchecked, never lost uncounted); once the clock answers both judge the next
    session.
    """
    failing = [False]

    def clock() -> float:
        if failing[0]:
            raise OSError("clock source unavailable")
        return 1000.0

    limited_seen: list[str] = []

    @evaluator(name="limited_session")
    def limited_session(conversation: Conversation) -> EvaluationResult:
        limited_seen.append(conversation.session_id)
        return EvaluationResult(evaluator="limited_session", passed=True, score=1.0)

    judge = Judge()
    specs = [
        EvaluatorSpec(judge.build(), scope="session"),
        EvaluatorSpec(limited_session, scope="session", limits={"evaluations_per_second": 1, "burst": 5}),
    ]
    p = make_pipeline(specs, trace_quiet_period_s=0.0, session_quiet_period_s=600.0, limits_clock=clock)
    _turn(p, "chat-40", "q", "a")
    failing[0] = True
    p.flush()  # judges chat-40 now: the limiter fails for limited_session only
    failing[0] = False
    assert [c.session_id for c in judge.seen] == ["chat-40"]
    assert limited_seen == []
    stats = p.processor.stats()
    assert stats["not_evaluated_by_reason"] == {"limits_unavailable": 1}
    assert stats["evaluators"]["limited_session"]["not_evaluated_by_reason"] == {"limits_unavailable": 1}
    assert stats["evaluators"]["coherent"]["passed"] == 1
    assert stats["queued"] == 0
    _turn(p, "chat-41", "q", "a")
    p.flush()
    assert [c.session_id for c in judge.seen] == ["chat-40", "chat-41"]
    assert limited_seen == ["chat-41"]


def test_a_session_verdict_stands_when_charging_its_judge_spend_fails(make_pipeline: MakePipeline) -> None:
    """Charging a session judge's spend raising (its ``limits_clock`` fails on the evaluation loop) loses no verdict.

    The session's pass is published (an internal error is counted for the charge), never turned into an error.
    """
    main = threading.current_thread()

    def clock() -> float:
        if threading.current_thread() is not main:  # admission (here) works; the charge (on the loop) fails
            raise OSError("clock source unavailable")
        return 1000.0

    @evaluator(name="priced")
    def priced(conversation: Conversation) -> EvaluationResult:
        usage = {"model": "gpt-4o-mini", "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001}
        return EvaluationResult(evaluator="priced", passed=True, score=1.0, detail={"judge": usage})

    spec = EvaluatorSpec(priced, scope="session", limits={"max_usd_per_day": 100.0})
    p = make_pipeline([spec], trace_quiet_period_s=0.0, session_quiet_period_s=600.0, limits_clock=clock)
    _turn(p, "chat-50", "q", "a")
    p.flush()
    stats = p.processor.stats()
    assert stats["session_results"] == 1
    assert (stats["evaluators"]["priced"]["passed"], stats["evaluators"]["priced"]["errors"]) == (1, 0)
    assert stats["internal_errors"] == 1


class SessionLimiterClock:
    """A ``limits_clock`` that raises while ``failing`` names where: ``"admission"`` (the flush's thread, where a
    due session's judgement is admitted) or ``"charge"`` (the evaluation loop, where a judge's spend is charged)."""

    def __init__(self) -> None:
        self.failing: str | None = None
        self.admitting = threading.current_thread()

    def __call__(self) -> float:
        here = "admission" if threading.current_thread() is self.admitting else "charge"
        if self.failing == here:
            raise OSError("clock source unavailable")
        return 1000.0


def test_a_session_limiter_failing_for_many_sessions_logs_once_per_episode_and_counts_every_one(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture
) -> None:
    """A persistent fault of a session evaluator's limiter, at admission and then when its spend is charged.

    Over 12 sessions each, one ERROR (with its traceback) when the episode starts, one INFO line with its count when
    the limiter answers again, nothing in between; every occurrence counted: each admission refused
    (``limits_unavailable``) with an internal error, each failed charge an internal error with its verdict kept.
    Before, each session's failed charge logged its own traceback.
    """
    clock = SessionLimiterClock()

    @evaluator(name="priced")
    def priced(conversation: Conversation) -> EvaluationResult:
        usage = {"model": "gpt-4o-mini", "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001}
        return EvaluationResult(evaluator="priced", passed=True, score=1.0, detail={"judge": usage})

    judge = Judge()
    specs = [
        EvaluatorSpec(judge.build(), scope="session"),
        EvaluatorSpec(priced, scope="session", limits={"max_usd_per_day": 100.0}),
    ]
    p = make_pipeline(specs, trace_quiet_period_s=0.0, session_quiet_period_s=600.0, limits_clock=clock)
    caplog.set_level(logging.INFO, logger="evaltrace")

    def errors() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR]

    def recovered(count: int) -> int:
        return len([r for r in caplog.records if f"works again after {count} internal error(s)" in r.getMessage()])

    def sessions(prefix: str) -> None:
        for n in range(12):
            _turn(p, f"{prefix}-{n}", "q", "a")
        p.flush()  # each is due now: judged, admitted on this thread

    clock.failing = "admission"
    sessions("refused")
    assert len(errors()) == 1 and errors()[0].exc_info is not None and "'priced'" in errors()[0].getMessage()
    stats = p.processor.stats()
    assert stats["evaluators"]["priced"]["not_evaluated_by_reason"] == {"limits_unavailable": 12}
    assert stats["internal_errors"] == 12
    assert len(judge.seen) == 12  # the unlimited evaluator judged every session

    clock.failing = "charge"
    sessions("charged")
    assert recovered(12) == 1  # the admission episode ended at the first admission that worked
    assert len(errors()) == 2 and errors()[1].exc_info is not None and "'priced'" in errors()[1].getMessage()
    stats = p.processor.stats()
    assert stats["internal_errors"] == 24
    assert stats["evaluators"]["priced"]["passed"] == 12  # every verdict kept
    assert stats["evaluators"]["priced"]["errors"] == 0

    clock.failing = None
    sessions("healthy")
    assert recovered(12) == 2  # the charge episode ended at the first charge that worked
    assert len(errors()) == 2
    stats = p.processor.stats()
    assert stats["internal_errors"] == 24
    assert stats["evaluators"]["priced"]["passed"] == 24
    assert stats["session_results"] == 12 + 24 + 24
