"""A stored trace's session and user id follow one rule: the root's, else the first span's by end order.

Ties: spans ending at the same instant go by start time, then span id; roots starting at the same instant by span
id. The writer (a trace's first batch, and a trace summarized again when more of its spans arrive) and a backfill's
session scope both go by it. Real SDK spans with chosen timestamps, a real store file, both writers, and a real
backfill over the store.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

import evaltrace
from evaltrace.backfill.sources import session_of
from evaltrace.exporters import LocalStoreExporter, LocalTraceStore
from evaltrace.exporters.store_db import DB_NAME
from evaltrace.exporters.store_query import TraceSummary
from store_writers import writer  # noqa: F401 - autouse: every test runs with both writers

_TRACER = TracerProvider(resource=Resource({"service.name": "svc"})).get_tracer("t")
_S = 1_000_000_000  # one second in ns: the spans' timestamps are chosen


def _span(
    name: str, parent: Any, start: int, end: int, attributes: dict[str, str] | None = None, *, remote: bool = False
) -> ReadableSpan:
    """A span of ``parent`` (a span, or a context) started and ended at the given instants."""
    context = parent if isinstance(parent, Context) else set_span_in_context(parent) if parent is not None else None
    span = _TRACER.start_span(name, context=context, start_time=start * _S, attributes=attributes or {})
    span.end(end_time=end * _S)
    assert isinstance(span, ReadableSpan)
    return span


def _summary(store: Path) -> TraceSummary:
    (summary,) = LocalTraceStore(store).list_traces()
    return summary


def _store(tmp_path: Path, *batches: list[ReadableSpan]) -> Path:
    exporter = LocalStoreExporter(tmp_path, max_age_s=0, max_bytes=0)
    for batch in batches:
        exporter.export(batch)
    exporter.shutdown()
    return tmp_path


def test_the_roots_session_and_user_win_over_a_childs_in_one_batch_and_across_batches(tmp_path: Path) -> None:
    """SQL ``max()`` picked the child's ``z-child``: not the session the pipeline samples the trace by."""
    root = _TRACER.start_span("root", start_time=1 * _S, attributes={"session.id": "b-root", "user.id": "alice"})
    child = _span("child", root, 2, 3, {"session.id": "z-child", "user.id": "zed"})
    root.end(end_time=4 * _S)
    assert isinstance(root, ReadableSpan)
    one = _summary(_store(tmp_path / "one", [child, root]))
    assert (one.root_name, one.session_id, one.user_id) == ("root", "b-root", "alice")
    # The child stored first: the trace is summarized again when the root arrives, by the same rule.
    split = _summary(_store(tmp_path / "split", [child], [root]))
    assert (split.root_name, split.session_id, split.user_id) == ("root", "b-root", "alice")


def test_without_one_on_the_root_the_first_span_to_end_carrying_one_wins_whatever_the_arrival(tmp_path: Path) -> None:
    root = _TRACER.start_span("root", start_time=1 * _S)
    later = _span("later", root, 2, 9, {"session.id": "z-later", "user.id": "zed"})  # started first, ended last
    first = _span("first", root, 3, 5, {"session.id": "a-first", "langfuse.user.id": "amy"})
    root.end(end_time=10 * _S)
    assert isinstance(root, ReadableSpan)
    for name, batches in {
        "ended": [[first, later, root]],
        "reversed": [[root, later, first]],
        "apart": [[later], [root], [first]],  # the first to end arrives last: end order, not arrival order
    }.items():
        summary = _summary(_store(tmp_path / name, *batches))
        assert (summary.session_id, summary.user_id) == ("a-first", "amy"), name


def test_session_and_user_are_chosen_independently(tmp_path: Path) -> None:
    """The root's session does not make the root's (absent) user win: the user is the first child's."""
    root = _TRACER.start_span("root", start_time=1 * _S, attributes={"session.id": "s-root"})
    first = _span("first", root, 2, 3, {"session.id": "z-child", "user.id": "a-first"})
    second = _span("second", root, 2, 4, {"user.id": "z-second"})
    root.end(end_time=5 * _S)
    assert isinstance(root, ReadableSpan)
    summary = _summary(_store(tmp_path, [second, root, first]))
    assert (summary.session_id, summary.user_id) == ("s-root", "a-first")


def test_spans_ending_together_go_by_start_time_then_span_id(tmp_path: Path) -> None:
    root = _TRACER.start_span("root", start_time=1 * _S)
    early = _span("early", root, 2, 6, {"session.id": "m-early-start"})
    late = _span("late", root, 3, 6, {"session.id": "z-late-start"})
    root.end(end_time=7 * _S)
    assert isinstance(root, ReadableSpan)
    assert _summary(_store(tmp_path / "start", [late, root], [early])).session_id == "m-early-start"

    # Same start, same end: the smaller span id wins (its session the smaller string, so max() cannot pass).
    root = _TRACER.start_span("root", start_time=1 * _S)
    pair = [_TRACER.start_span(n, context=set_span_in_context(root), start_time=2 * _S) for n in ("x", "y")]
    pair.sort(key=lambda s: s.get_span_context().span_id)
    for span, session in zip(pair, ("a-smaller-id", "z-larger-id"), strict=True):
        span.set_attribute("session.id", session)
        span.end(end_time=5 * _S)
    root.end(end_time=6 * _S)
    spans = [s for s in (pair[1], root, pair[0]) if isinstance(s, ReadableSpan)]
    assert _summary(_store(tmp_path / "id", spans)).session_id == "a-smaller-id"


def test_roots_starting_together_go_by_span_id(tmp_path: Path) -> None:
    """Two spans under a remote parent (both roots in the store) starting at once: the smaller span id is the root."""
    remote = SpanContext(0x5EED, 0xABC, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = set_span_in_context(NonRecordingSpan(remote))
    pair = [_TRACER.start_span(n, context=parent, start_time=1 * _S) for n in ("x", "y")]
    pair.sort(key=lambda s: s.get_span_context().span_id)
    # The smaller id's session is the smaller string and it ends last: neither max() nor end order can pass.
    for span, session, end in zip(pair, ("a-root", "z-other"), (9, 3), strict=True):
        span.set_attribute("session.id", session)
        span.end(end_time=end * _S)
    spans = [s for s in reversed(pair) if isinstance(s, ReadableSpan)]
    summary = _summary(_store(tmp_path, spans))
    assert (summary.root_name, summary.session_id) == (spans[1].name, "a-root")


class _Sessions:
    """A session-scope evaluator (duck-typed): records each conversation's session id."""

    name = "sessions_seen"
    version = None

    def __init__(self) -> None:
        self.seen: list[str] = []

    def evaluate(self, conversation: Any, case: Any) -> Any:
        from evaltrace.schema import EvaluationResult

        self.seen.append(conversation.session_id)
        return EvaluationResult(evaluator=self.name, passed=True, score=float(len(conversation.turns)))


def test_a_backfill_judges_a_trace_in_the_session_the_store_files_it_under(tmp_path: Path) -> None:
    root = _TRACER.start_span("root", start_time=1 * _S, attributes={"input.value": "q", "output.value": "a"})
    later = _span("later", root, 2, 9, {"session.id": "z-later"})  # first by start time, last to end
    first = _span("first", root, 3, 5, {"session.id": "a-first"})
    root.end(end_time=10 * _S)
    assert isinstance(root, ReadableSpan)
    store = _store(tmp_path, [later, first, root])
    assert _summary(store).session_id == "a-first"
    (trace_id,) = [s.trace_id for s in LocalTraceStore(store).list_traces()]
    assert session_of(LocalTraceStore(store).spans(trace_id)) == "a-first"  # read back by start time
    judge = _Sessions()
    report = evaltrace.evaluate_traces([judge], store=store, scope="session", sinks=[])
    assert (report.sessions, report.without_session, judge.seen) == (1, 0, ["a-first"])
    with sqlite3.connect(store / DB_NAME) as db:
        assert db.execute("SELECT session_id FROM session_evals").fetchall() == [("a-first",)]


def test_in_process_the_store_and_the_pipeline_put_a_trace_in_the_same_session(tmp_path: Path) -> None:
    """Spans reach both in end order in process: the session judged is the one the store lists the trace under."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
    from evaltrace.schema import EvaluationResult

    seen: list[str] = []

    @evaluator(name="sessions_seen")
    def sessions_seen(conversation: Any) -> EvaluationResult:
        seen.append(conversation.session_id)
        return EvaluationResult(evaluator="sessions_seen", passed=True)

    exporter = LocalStoreExporter(tmp_path / "store", max_age_s=0, max_bytes=0)
    processor = EvaluationSpanProcessor(
        downstream=[SimpleSpanProcessor(exporter)],
        evaluators=[EvaluatorSpec(sessions_seen, scope="session")],
        dead_letter_dir=tmp_path / "dead-letter",
        trace_quiet_period_s=0.0,
        session_quiet_period_s=60.0,  # only end_session() makes it due
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    try:
        root = tracer.start_span("root", start_time=1 * _S, attributes={"input.value": "q", "output.value": "a"})
        later = tracer.start_span("later", context=set_span_in_context(root), start_time=2 * _S)
        later.set_attribute("session.id", "z-later")
        first = tracer.start_span("first", context=set_span_in_context(root), start_time=3 * _S)
        first.set_attribute("session.id", "a-first")
        first.end(end_time=5 * _S)
        later.end(end_time=9 * _S)
        root.end(end_time=10 * _S)
        processor.end_session("a-first")
        deadline = time.monotonic() + 10  # judged on the processor's session thread
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert processor.force_flush(10_000)
    finally:
        provider.shutdown()
    assert seen == ["a-first"]
    assert _summary(tmp_path / "store").session_id == "a-first"


def _with_ids(name: str, span_id: int, parent_id: int, start: int, end: int, session: str) -> ReadableSpan:
    """A span of trace 0xABC with a chosen id and parent id (a buggy exporter can send any pair)."""
    parent = NonRecordingSpan(SpanContext(0xABC, parent_id, is_remote=False, trace_flags=TraceFlags(1)))
    span = _TRACER.start_span(
        name, context=set_span_in_context(parent), start_time=start, attributes={"session.id": session}
    )
    span.end(end_time=end)
    # The SDK gives a random span id; the cycle needs two chosen ones.
    object.__setattr__(span, "_context", SpanContext(0xABC, span_id, is_remote=False, trace_flags=TraceFlags(1)))
    assert isinstance(span, ReadableSpan)
    return span


def test_spans_whose_parents_point_at_each_other_are_stored_not_dropped(tmp_path: Path) -> None:
    """No span is parentless in a two-span parent cycle: the earliest is the root, and the batch is kept."""
    a = _with_ids("a", 0x1, 0x2, 10, 20, "sa")
    b = _with_ids("b", 0x2, 0x1, 5, 30, "sb")
    for name, batches in {"one": [[a, b]], "two": [[a], [b]]}.items():
        summary = _summary(_store(tmp_path / name, *batches))
        assert (summary.root_name, summary.span_count, summary.session_id) == ("b", 2, "sb"), name
