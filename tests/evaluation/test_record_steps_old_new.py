"""The job's record step (s16): ``PipelineStats.record`` and ``ProductionMonitor.record`` count and keep what they did.

Both now read our own result class's fields from its instance dict, take their lock with ``acquire()`` and a
``finally`` instead of ``with``; the stats compute the whole-millisecond latency from the timedelta's days, seconds
and microseconds; the monitor checks for the pipeline's ``PendingQuery`` by exact type first and builds its pending
entry with ``_Pending()``. Each test runs the code before (kept here verbatim, s15) beside today's on the same
results: every counter, snapshot, per-evaluator latency (value and type), every sample as read through
``samples()`` and ``health()``, and the kind of entry kept, for every kind of result and query, and for the results
of the real pipeline (the real OTel SDK, real spans, the real runner).
"""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections import deque
from typing import Any

import pytest

from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator
from evaltrace.evaluation._preview import PendingQuery
from evaltrace.evaluation.convert import JUDGED, result_outcome, skip_reason
from evaltrace.evaluation.monitor import PREVIEW_CHARS, MonitorSample, ProductionMonitor, _Pending
from evaltrace.evaluation.runner import failed_result, skipped_result
from evaltrace.evaluation.skip_reasons import count_skip_reason, skip_reason_key
from evaltrace.evaluation.stats import _COUNTER_OF_OUTCOME, PipelineStats, _EvaluatorCounters
from evaltrace.schema import EvaluationResult, Trace
from evaltrace.schema.trace import TraceError

from .conftest import MakePipeline

T0 = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
_ONE_MS = dt.timedelta(milliseconds=1)
_new = object.__new__
_setattr = object.__setattr__


class _OldStats(PipelineStats):
    """PipelineStats.record as it was before s16 (main 8de9504), verbatim."""

    def record(self, result: EvaluationResult, outcome: str | None = None) -> None:
        if outcome is None:
            outcome = result_outcome(result)
        if type(result) is EvaluationResult:
            latency_ms = float((result.finished_at - result.started_at) // _ONE_MS)
        else:
            latency_ms = float(result.latency_ms)
        error = result.error
        timed_out = error is not None and error.type == "timeout"
        counters = self.counters
        if outcome == "pass" or outcome == "fail":
            with self._lock:
                per = self._by_evaluator.get(result.evaluator)
                if per is None:
                    per = self._by_evaluator[result.evaluator] = _EvaluatorCounters()
                per.evaluated += 1
                per.latencies_ms.append(latency_ms)
                counters["evaluated"] += 1
                if outcome == "pass":
                    per.passed += 1
                    counters["passed"] += 1
                else:
                    per.failed += 1
                    counters["failed"] += 1
                if timed_out:
                    per.timed_out += 1
                    counters["timed_out"] += 1
            return
        key = _COUNTER_OF_OUTCOME.get(outcome)
        reason = (skip_reason_key(skip_reason(result)) or "") if key == "skipped" else None
        with self._lock:
            per = self._by_evaluator.get(result.evaluator)
            if per is None:
                per = self._by_evaluator[result.evaluator] = _EvaluatorCounters()
            per.evaluated += 1
            per.latencies_ms.append(latency_ms)
            counters["evaluated"] += 1
            if key is not None:
                setattr(per, key, getattr(per, key) + 1)
                counters[key] += 1
                if reason is not None:
                    count_skip_reason(per.skipped_by_reason, reason)
                    count_skip_reason(self._skipped_by_reason, reason)
            if timed_out:
                per.timed_out += 1
                counters["timed_out"] += 1


class _OldMonitor(ProductionMonitor):
    """ProductionMonitor.record as it was before s16 (main 8de9504), verbatim."""

    def record(
        self,
        result: EvaluationResult,
        query: Any = None,
        output: str | None = None,
        outcome: str | None = None,
    ) -> None:
        if outcome is None:
            outcome = result_outcome(result)
        if outcome not in JUDGED:
            at = self._clock()
            with self._lock:
                self._samples.setdefault(result.evaluator, deque(maxlen=self._max_samples))
                if outcome != "pending":
                    kinds = self._non_verdicts.setdefault(result.evaluator, {})
                    kinds.setdefault(outcome, deque(maxlen=self._max_samples)).append(at)
            return
        entry: MonitorSample | _Pending
        if query is None or isinstance(query, str):
            entry = _new(MonitorSample)
            _setattr(
                entry,
                "__dict__",
                {
                    "at": self._clock(),
                    "passed": result.passed,
                    "score": result.score,
                    "query_preview": (query or "")[:PREVIEW_CHARS],
                    "output_preview": (output or "")[:PREVIEW_CHARS],
                },
            )
        else:
            entry = _new(_Pending)
            entry.at, entry.passed, entry.score = self._clock(), result.passed, result.score
            entry.query, entry.output_preview, entry.sample = query, (output or "")[:PREVIEW_CHARS], None
        with self._lock:
            samples = self._samples.get(result.evaluator)
            if samples is None:
                samples = self._samples[result.evaluator] = deque(maxlen=self._max_samples)
            samples.append(entry)


class _OwnLatency(EvaluationResult):
    """A user's result class with its own ``latency_ms`` (read through the property, as before)."""

    @property
    def latency_ms(self) -> int:  # type: ignore[override]
        return 12_345


class _Text(str):
    """A str subclass as a query: previewed as text, never rendered."""


class _Deferred:
    """A user's deferred query (the monitor's protocol), not the pipeline's PendingQuery."""

    def __init__(self, text: str) -> None:
        self.text = text

    def render(self) -> str:
        return self.text * 3


class _Broken:
    def render(self) -> str:
        raise RuntimeError("a bug of ours")


class _PendingChild(PendingQuery):
    __slots__ = ()


JUDGE = type("E", (), {"name": "judge", "version": "2"})()


def _timed(name: str, delta_us: int, **fields: Any) -> EvaluationResult:
    return EvaluationResult.model_construct(
        evaluator=name,
        started_at=T0,
        finished_at=T0 + dt.timedelta(microseconds=delta_us),
        **{"passed": True, "status": "completed", "reason": "", "detail": {}, "metadata": None, **fields},
    )


# Latencies around every millisecond, second and day boundary, both signs, plus a fixed-seed random spread.
_DELTAS = [0, 1, 999, 1000, 1001, 999_999, 1_000_000, 1_000_999, 86_399_999_999, 86_400_000_000, 86_400_000_999]
_DELTAS += [-d for d in _DELTAS if d] + [-86_400_000_000 * 400 - 7, 86_400_000_000 * 999_000 + 123_456]
_RANDOM = random.Random(20261130)
_DELTAS += [_RANDOM.randrange(-(10**14), 10**14) for _ in range(200)] + [
    _RANDOM.randrange(-5000, 5000) for _ in range(100)
]

KINDS: list[EvaluationResult] = [
    EvaluationResult(evaluator="a", passed=True),
    EvaluationResult(evaluator="b", passed=False, score=0.25, reason="too short"),
    EvaluationResult(evaluator="c", passed=True, score=1, detail={"label": "polite"}),
    EvaluationResult(evaluator="g", passed=True, score=1, status="pending"),
    EvaluationResult(evaluator="a", passed=False, score=0.0, error=TraceError(type="timeout", message="late")),
    EvaluationResult(evaluator="a", passed=True, score=0.5, error=TraceError(type="exception", message="x")),
    failed_result(JUDGE, "TimeoutError", "slow", timeout=True),
    failed_result(JUDGE, "ValueError", "bug"),
    skipped_result(JUDGE, "no expected answer"),
    skipped_result(JUDGE, "no_reference"),
    EvaluationResult(evaluator="s", status="skipped", passed=True, reason="y" * 500),
    _OwnLatency(evaluator="own", passed=False, score=0.125),
    _OwnLatency(evaluator="own", passed=True, status="skipped", reason="no_answer"),
    *(_timed("t", d, passed=d % 2 == 0, score=None if d % 3 else d % 7 / 7) for d in _DELTAS),
]

QUERIES: list[Any] = [
    None,
    "",
    "short",
    "é" * 300,
    _Text("a str subclass " * 20),
    PendingQuery("What is the capital of France?", True),
    PendingQuery('{"input": "json"}', False),
    PendingQuery("not json", False),
    _PendingChild('{"q": 1}', False),
    _Deferred("deferred " * 30),
    _Broken(),
]
OUTPUTS = [None, "", "Paris", "ü" * 500]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def _stats_state(stats: PipelineStats) -> Any:
    per = {
        name: (dataclass_values(c), [(v, type(v)) for v in c.latencies_ms]) for name, c in stats._by_evaluator.items()
    }
    return stats.snapshot(), per, dict(stats.counters), dict(stats._skipped_by_reason)


def dataclass_values(counters: _EvaluatorCounters) -> tuple[Any, ...]:
    return (counters.evaluated, counters.passed, counters.failed, counters.errors, counters.timed_out,
            counters.skipped, dict(counters.skipped_by_reason))  # fmt: skip


def _monitor_state(monitor: ProductionMonitor) -> Any:
    kinds = {name: [type(e).__name__ for e in entries] for name, entries in monitor._samples.items()}
    health = monitor.health()
    samples = {name: monitor.samples(name) for name in health}
    rendered = {name: [type(e).__name__ for e in entries] for name, entries in monitor._samples.items()}
    again = {name: monitor.samples(name) for name in health}  # read twice: the made samples are kept
    return kinds, health, samples, rendered, again


def _record_both(results: list[EvaluationResult], queries: list[Any], outputs: list[Any]) -> None:
    new_stats, old_stats = PipelineStats(), _OldStats()
    new_monitor = ProductionMonitor(window_s=1e9, clock=_Clock(), max_samples=50)
    old_monitor = _OldMonitor(window_s=1e9, clock=_Clock(), max_samples=50)
    for i, result in enumerate(results):
        outcome = result_outcome(result)
        for given in (None, outcome):
            new_stats.record(result, given)
            old_stats.record(result, given)
        query, output = queries[i % len(queries)], outputs[i % len(outputs)]
        new_monitor.record(result, query, output, outcome if i % 2 else None)
        old_monitor.record(result, query, output, outcome if i % 2 else None)
        assert _stats_state(new_stats) == _stats_state(old_stats)
    assert _monitor_state(new_monitor) == _monitor_state(old_monitor)


def test_stats_and_monitor_record_every_kind_of_result_and_query_as_before(caplog: pytest.LogCaptureFixture) -> None:
    _record_both(KINDS, QUERIES, OUTPUTS)
    # Every query against every result kind (the 11 queries and 4 outputs are coprime with the shifts below).
    for shift in range(len(QUERIES)):
        _record_both(KINDS[shift:] + KINDS[:shift], QUERIES, OUTPUTS[shift % 4 :] + OUTPUTS[: shift % 4])


def test_the_latency_is_whole_milliseconds_of_every_delta_as_before() -> None:
    new, old = PipelineStats(), _OldStats()
    for delta in _DELTAS:
        result = _timed("t", delta)
        new.record(result, "pass")
        old.record(result, "pass")
        assert new._by_evaluator["t"].latencies_ms[-1] == old._by_evaluator["t"].latencies_ms[-1]
        assert new._by_evaluator["t"].latencies_ms[-1] == float(result.latency_ms)


def test_the_pipelines_pending_query_is_kept_to_render_and_others_as_before() -> None:
    monitor = ProductionMonitor(window_s=1e9, clock=_Clock())
    result = EvaluationResult(evaluator="q", passed=True, score=0.5)
    for query in QUERIES:
        monitor.record(result, query, "out")
    kinds = [type(entry) for entry in monitor._samples["q"]]
    assert kinds == [MonitorSample] * 5 + [_Pending] * 6  # None and strs now; every deferred query on read
    assert [s.query_preview for s in monitor.samples("q")][:5] == ["", "", "short", "é" * 200, QUERIES[4][:200]]


def test_a_monitor_record_racing_health_reads_keeps_every_sample() -> None:
    monitor = ProductionMonitor(window_s=1e9, max_samples=100_000)
    result = EvaluationResult(evaluator="r", passed=True, score=1)
    query = PendingQuery("q", True)
    start = threading.Barrier(3)

    def write() -> None:
        start.wait()
        for _ in range(2000):
            monitor.record(result, query, "o", "pass")

    writers = [threading.Thread(target=write) for _ in range(2)]
    for thread in writers:
        thread.start()
    start.wait()
    while any(thread.is_alive() for thread in writers):
        monitor.health()
    for thread in writers:
        thread.join()
    assert monitor.health()["r"].sample_count == 4000
    assert {s.query_preview for s in monitor.samples("r")} == {"q"}


@evaluator(name="graded")
def graded(trace: Trace) -> EvaluationResult:
    text = str(trace.input.get("question"))
    if text.startswith("skip"):
        raise SkipEvaluation("no_reference")
    if text.startswith("boom"):
        raise ValueError("broken evaluator")
    return EvaluationResult(evaluator="graded", passed="good" in text, score=0.75 if "good" in text else 0.1)


@evaluator(name="plain")
def plain(trace: Trace) -> bool:
    return "good" in str(trace.output.final_answer)


@pytest.mark.parametrize("which", ["stats", "monitor"])
def test_a_judgements_record_waits_for_the_lock_and_counts_once_it_has_it(which: str) -> None:
    """The judgement path takes the lock with acquire()/finally instead of ``with``: it must still take it.

    With the lock held by the test, a record on another thread must wait (whatever the load: a blocked thread stays
    blocked), and count only once the lock is released. A record that skipped the lock would count at once.
    """
    stats, monitor = PipelineStats(), ProductionMonitor()
    target: Any = stats if which == "stats" else monitor
    result = EvaluationResult(evaluator="locked", passed=True, score=1.0)

    def counted() -> int:  # read without the lock (the test holds it): a plain dict/deque read
        if which == "stats":
            return int(stats.counters["evaluated"])
        return len(monitor._samples.get("locked", ()))

    def record() -> None:
        if which == "stats":
            stats.record(result, "pass")
        else:
            monitor.record(result, "query", "output", "pass")

    worker = threading.Thread(target=record, daemon=True)
    target._lock.acquire()
    try:
        worker.start()
        worker.join(0.3)
        assert worker.is_alive(), "record() finished while the lock was held: it did not take the lock"
        assert counted() == 0
    finally:
        target._lock.release()
    worker.join(30)
    assert not worker.is_alive()
    assert counted() == 1


def test_the_real_pipelines_records_are_counted_and_sampled_as_before(
    make_pipeline: MakePipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every call the real pipeline makes to the stats and the monitor (results, deferred or made queries, outputs,
    # outcomes), replayed into today's and the old code.
    stats_calls: list[tuple[Any, ...]] = []
    monitor_calls: list[tuple[Any, ...]] = []
    stats_record, monitor_record = PipelineStats.record, ProductionMonitor.record

    def tee_stats(self: PipelineStats, *args: Any) -> None:
        stats_calls.append(args)
        stats_record(self, *args)

    def tee_monitor(self: ProductionMonitor, *args: Any) -> None:
        monitor_calls.append(args)
        monitor_record(self, *args)

    monkeypatch.setattr(PipelineStats, "record", tee_stats)
    monkeypatch.setattr(ProductionMonitor, "record", tee_monitor)
    # graded reads the input (made now), plain only the output (the input kept to render on read)
    pipeline = make_pipeline(
        [EvaluatorSpec(graded, span_kinds={"agent"}), EvaluatorSpec(plain, span_kinds={"workflow"})]
    )
    inputs = ['{"question": "good answer"}', '{"question": "bad"}', '{"question": "skip me"}', '{"question": "boom"}',
              "good plain text", '{"question": "good ' + "x" * 900 + '"}', '{"input": "good"}']  # fmt: skip
    for i, value in enumerate(inputs * 2):
        kind = "agent" if i % 2 else "workflow"
        attributes = {"evaltrace.span.kind": kind, "input.value": value, "output.value": f'"good {i}"'}
        if i % 3 == 0:
            attributes["input.mime_type"] = "text/plain"
        with pipeline.tracer.start_as_current_span(f"answer{i}", attributes=attributes):
            pass
    pipeline.flush()
    assert len(stats_calls) == len(monitor_calls) == len(inputs) * 2
    assert any(type(call[1]) is PendingQuery for call in monitor_calls)
    assert any(type(call[1]) is str for call in monitor_calls)
    new_stats, old_stats = PipelineStats(), _OldStats()
    for call in stats_calls:
        stats_record(new_stats, *call)
        old_stats.record(*call)
    assert _stats_state(new_stats) == _stats_state(old_stats)
    new_monitor, old_monitor = (
        ProductionMonitor(window_s=1e9, clock=_Clock()),
        _OldMonitor(window_s=1e9, clock=_Clock()),
    )
    for call in monitor_calls:
        monitor_record(new_monitor, *call)
        old_monitor.record(*call)
    assert _monitor_state(new_monitor) == _monitor_state(old_monitor)
