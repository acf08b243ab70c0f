"""Shutdown with the evaluation loop stalled: every span is exported or counted, nothing runs past the deadline.

The loop is stalled deterministically: an inline evaluator (it runs on the loop itself, the fast lane off) blocks
on an event that is set only after ``shutdown()`` returned. Shutdown takes over whatever the loop had not finished
by then: the application's spans are exported from the shutdown thread, with the evaluations that never came
marked "not evaluated" (reason ``shutdown``, on the span, in ``stats()`` and in the sinks), never as verdicts and
never counted dropped; the warning names the numbers, and nothing reaches the downstream processors (or the
stats, or the sinks) when the loop resumes. Also: ``shutdown()`` called from an evaluator running on the loop
itself, and a process that exits right after shutting down with a stalled loop.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.schema import Trace

from .conftest import MakePipeline, Pipeline

SPANS = 12


def _stalling(entered: threading.Event, release: threading.Event) -> EvaluatorSpec:
    """An inline evaluator whose first call blocks the evaluation loop until ``release`` is set."""

    @evaluator(name="stall")
    def stall(trace: Trace) -> bool:
        if not entered.is_set():
            entered.set()
            release.wait(30)
        return True

    return EvaluatorSpec(stall, inline=True)


def _off_the_lane(processor: EvaluationSpanProcessor) -> EvaluationSpanProcessor:
    processor._engine._lane_off = True  # every job runs on the loop, where the stalling evaluator blocks it
    return processor


def _dropped(processor: EvaluationSpanProcessor, reason: str) -> int:
    return int(processor.stats()["dropped_at_shutdown_by_reason"].get(reason, 0))


def _end_spans(tracer: Any, entered: threading.Event) -> None:
    for index in range(SPANS):
        with tracer.start_as_current_span(f"s{index}"):
            pass
    assert entered.wait(30), "the stalling evaluator never ran"


# Everything shutdown and the loop could still change once shutdown() returned: none of it may move afterwards.
_SETTLED = (
    "evaluated",
    "passed",
    "failed",
    "errors",
    "skipped",
    "enriched",
    "held_timeout",
    "evaluation_spans",
    "not_evaluated_by_reason",
    "dropped_at_shutdown",
    "dropped_at_shutdown_by_reason",
    "log_events",
    "cancelled",
)


def _settled(processor: EvaluationSpanProcessor) -> dict[str, Any]:
    stats = processor.stats()
    return {key: stats[key] for key in _SETTLED}


def _marks(span: Any) -> dict[str, Any]:
    attributes = dict(span.attributes or {})
    return {key: value for key, value in attributes.items() if key.startswith("evaltrace.eval.")}


def test_spans_the_stalled_loop_holds_at_shutdown_are_exported_marked_shutdown_and_never_forwarded_later(
    make_pipeline: MakePipeline, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    entered, release = threading.Event(), threading.Event()
    sink_path = tmp_path / "scores.jsonl"
    p: Pipeline = make_pipeline([_stalling(entered, release)], sinks=[JsonlScoreSink(sink_path)], hold_timeout_s=60)
    _off_the_lane(p.processor)
    _end_spans(p.tracer, entered)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="evaltrace.evaluation"):
        p.processor.shutdown(timeout_millis=600)
    elapsed = time.monotonic() - started
    # The application's spans are kept: every one exported, none counted dropped (the loop stalled, not the app).
    exported = p.spans()
    assert sorted(span.name for span in exported) == sorted(f"s{index}" for index in range(SPANS))
    stats = p.processor.stats()
    assert stats["dropped_at_shutdown"] == 0 and stats["dropped_at_shutdown_by_reason"] == {}
    # Each carries its evaluation as "not evaluated" (shutdown): no verdict, no score, no pass or fail counted.
    for span in exported:
        marks = _marks(span)
        assert marks["evaltrace.eval.stall.skip_reason"] == "shutdown", marks
        assert "evaltrace.eval.stall.passed" not in marks, marks
    assert stats["not_evaluated_by_reason"] == {"shutdown": SPANS}
    assert (stats["evaluated"], stats["passed"], stats["failed"]) == (0, 0, 0)
    lines = [json.loads(line) for line in sink_path.read_text().splitlines()]
    assert [line["not_evaluated"]["reason"] for line in lines] == ["shutdown"] * SPANS, lines
    assert any(f"{SPANS} evaluation(s) marked not evaluated" in r.getMessage() for r in caplog.records), caplog.text
    assert elapsed < 0.6 + 2.0, elapsed  # the timeout plus a generous margin: nothing waits for the stalled loop

    before = _settled(p.processor)
    release.set()  # the loop resumes: its jobs were taken over, it forwards, publishes and counts nothing more
    p.processor._engine._loop_thread.join(30)
    assert not p.processor._engine.loop_alive()
    assert len(p.spans()) == SPANS
    assert _settled(p.processor) == before
    assert [json.loads(line) for line in sink_path.read_text().splitlines()] == lines


def test_a_hand_built_pipeline_exports_what_the_stalled_loop_holds_and_counts_spans_forwarded_after_shutdown() -> None:
    entered, release = threading.Event(), threading.Event()
    exporter = InMemorySpanExporter()
    processor = _off_the_lane(
        EvaluationSpanProcessor(
            downstream=[BatchSpanProcessor(exporter, schedule_delay_millis=10)],
            evaluators=[_stalling(entered, release)],
            hold_timeout_s=60,
        )
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("tests")
    try:
        _end_spans(tracer, entered)
        processor.shutdown(timeout_millis=600)
        exported = len(exporter.get_finished_spans())
        # The BatchSpanProcessor got them before it shut down (and flushed them): none dropped.
        assert exported == SPANS, exported
        assert _dropped(processor, "evaluation_loop_stalled") == 0
        assert processor.stats()["dropped_at_shutdown"] == 0

        # A span the application ends after shutdown would go to a BatchSpanProcessor that drops it unseen.
        with tracer.start_as_current_span("late"):
            pass
        assert _dropped(processor, "after_downstream_shutdown") == 1
        assert len(exporter.get_finished_spans()) == exported
    finally:
        release.set()
        processor._engine._loop_thread.join(30)
    assert len(exporter.get_finished_spans()) == exported
    assert processor.stats()["dropped_at_shutdown"] == 1


def test_shutdown_called_by_an_evaluator_on_the_loop_raises_nothing_and_shuts_sinks_and_exporters_down(
    make_pipeline: MakePipeline,
) -> None:
    raised: list[BaseException] = []
    returned = threading.Event()
    shutdowns: list[str] = []

    class Sink:
        name = "recording"

        def export(self, batch: Any) -> Any:
            from evaltrace.evaluation.sinks.base import SinkResult

            return SinkResult.success()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

        def shutdown(self) -> None:
            shutdowns.append("sink")

    holder: dict[str, Pipeline] = {}

    @evaluator(name="closer")
    def closer(trace: Trace) -> bool:
        if not returned.is_set():
            try:
                holder["p"].processor.force_flush(timeout_millis=10_000)  # must not wait for its own job
                holder["p"].processor.shutdown(timeout_millis=1_000)
            except BaseException as exc:  # the test reports it
                raised.append(exc)
            finally:
                returned.set()
        return True

    p = make_pipeline([EvaluatorSpec(closer, inline=True)], sinks=[Sink()], hold_timeout_s=60)
    holder["p"] = p
    _off_the_lane(p.processor)
    started = time.monotonic()
    with p.tracer.start_as_current_span("s"):
        pass
    assert returned.wait(30)
    assert raised == []
    assert time.monotonic() - started < 1.0 + 5.0  # neither call waited out a timeout on its own job
    assert shutdowns == ["sink"]
    assert p.exporter._stopped  # the SimpleSpanProcessor's exporter was shut down
    p.processor._engine._loop_thread.join(30)
    assert not p.processor._engine.loop_alive()
    stats = p.processor.stats()
    # Its own job could not be awaited from its own thread: shutdown took it over, so its span is exported,
    # its evaluation marked shutdown (never the verdict the evaluator returned after), nothing counted dropped.
    assert len(p.spans()) + stats["dropped_at_shutdown"] == 1, (p.spans(), stats["dropped_at_shutdown_by_reason"])
    assert [span.name for span in p.spans()] == ["s"] and stats["dropped_at_shutdown"] == 0
    assert _marks(p.one("s"))["evaltrace.eval.closer.skip_reason"] == "shutdown", _marks(p.one("s"))
    assert "evaltrace.eval.closer.passed" not in _marks(p.one("s"))
    assert stats["not_evaluated_by_reason"] == {"shutdown": 1} and (stats["evaluated"], stats["passed"]) == (0, 0)


_EXIT_SCRIPT = """
import atexit, sys, threading, time
sys.path.insert(0, {src!r})
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, JsonlScoreSink, evaluator

entered, release = threading.Event(), threading.Event()

@evaluator(name="stall")
def stall(trace, case=None) -> bool:
    if not entered.is_set():
        entered.set()
        release.wait(30)  # set once shutdown() returned (however long its take-over of 200 jobs took at load)
        time.sleep(0.2)  # then the loop wakes by itself: as the process exits
    return True

exporter = InMemorySpanExporter()
processor = EvaluationSpanProcessor(
    downstream=[BatchSpanProcessor(exporter)], evaluators=[EvaluatorSpec(stall, inline=True)], hold_timeout_s=60
)
processor._engine._lane_off = True
provider = TracerProvider()
provider.add_span_processor(processor)
tracer = provider.get_tracer("exit")
for index in range(200):
    with tracer.start_as_current_span(f"s{{index}}"):
        pass
assert entered.wait(30)
processor.shutdown(timeout_millis=300)
stats = processor.stats()
assert len(exporter.get_finished_spans()) + stats["dropped_at_shutdown"] == 200, stats
loop_thread = processor._engine._loop_thread
assert loop_thread.is_alive()  # still in the evaluator
release.set()
# atexit handlers run after threading's exit hooks, just before finalization: the loop must have ended by then.
atexit.register(lambda: print("loop alive at atexit:", loop_thread.is_alive(), file=sys.stderr))
"""


def test_a_process_that_exits_right_after_shutting_down_with_a_stalled_loop_exits_cleanly(tmp_path: Path) -> None:
    script = tmp_path / "exit_stalled.py"
    src = str(Path(__file__).resolve().parents[2] / "src")
    script.write_text(textwrap.dedent(_EXIT_SCRIPT.format(src=src)))
    env = {k: v for k, v in os.environ.items() if k != "EVALTRACE_RAISE_INTERNAL_ERRORS"}
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        # The exit hook waited for the loop (at most EXIT_JOIN_S): it never wakes while the interpreter finalizes.
        assert "loop alive at atexit: False" in done.stderr, done.stderr[-2000:]


@pytest.mark.skipif(os.name != "posix", reason="the evaluation process is killed with POSIX signals")
def test_shutdown_with_a_hung_evaluation_process_keeps_its_timeout_and_counts_every_span(
    make_pipeline: MakePipeline,
) -> None:
    from .process_evaluators import hangs

    p = make_pipeline([EvaluatorSpec(hangs, span_kinds=["agent"])], engine="process", hold_timeout_s=60)
    for index in range(3):
        with p.tracer.start_as_current_span(f"invoke_agent a{index}", attributes={"evaltrace.span.kind": "agent"}):
            pass
    started = time.monotonic()
    p.processor.shutdown(timeout_millis=2_000)
    elapsed = time.monotonic() - started
    # The timeout, plus the documented margin, plus a generous allowance for a loaded machine (a kill and a reap).
    assert elapsed < 2.0 + 3.0, elapsed
    agents = [s for s in p.spans() if s.name.startswith("invoke_agent")]
    assert len(agents) + p.processor.stats()["dropped_at_shutdown"] == 3


def test_a_timer_tick_racing_shutdown_marks_the_trace_evaluations_not_evaluated_everywhere(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """The trace-level job ``submit_trace`` builds when the timer's tick races shutdown is never admitted.

    Its evaluations must still be counted (``shutdown``), emitted as child ``evaluation <name>`` spans (its root
    went downstream already) and recorded in the sinks, as for any job shutdown cut short.
    """

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        return True

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(whole, trace_level=True)], sinks=[JsonlScoreSink(sink_path)], trace_quiet_period_s=3600
    )
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("child"):
            pass
    processor = p.processor
    assert processor._completion is not None and processor._timer is not None
    processor._completion.ready_now()
    ready = processor._completion.collect()[0]
    assert len(ready) == 1
    # Run the tick's hand-out as the timer thread would, once shutdown has begun (the race, made deterministic).
    processor._shutdown = True
    processor._timer.is_current = lambda: True  # type: ignore[method-assign]
    processor._submit_trace(ready[0])
    processor._shutdown = False
    processor.shutdown(timeout_millis=5_000)
    stats = processor.stats()
    assert stats["not_evaluated_by_reason"] == {"shutdown": 1}
    assert stats["evaluation_spans"] == 1 and stats["dropped_at_shutdown"] == 0
    child = p.one("evaluation whole")
    assert (child.attributes or {})["evaltrace.eval.whole.skip_reason"] == "shutdown"
    lines = [json.loads(line) for line in sink_path.read_text().splitlines()]
    assert [line["not_evaluated"]["evaluator"] for line in lines if "not_evaluated" in line] == ["whole"]


def test_a_span_the_loop_forwards_while_shutdown_takes_its_job_over_goes_out_once(
    make_pipeline: MakePipeline,
) -> None:
    """The loop's last forward (lock-free) runs between shutdown's pop of the job and its read of the job.

    The job produced one span (its own, not forwarded yet): it must go out once, from shutdown, with its three
    evaluations marked ``shutdown``; not twice, not as one child evaluation span per evaluator, never dropped.
    """
    gate = threading.Event()

    def waiting(name: str) -> EvaluatorSpec:
        @evaluator(name=name)
        def ev(trace: Trace) -> bool:
            gate.wait(10)
            return True

        return EvaluatorSpec(ev)

    p = make_pipeline([waiting("a"), waiting("b"), waiting("c")], hold_timeout_s=60)
    processor = p.processor
    with p.tracer.start_as_current_span("s"):
        pass
    runner = processor._runner

    class Live(dict[int, Any]):
        """Runs the loop's final forward of the job right after shutdown's pop took it (the interleaving)."""

        def pop(self, key: int, default: Any = None) -> Any:
            job = dict.pop(self, key, default)
            if job is not None and threading.current_thread() is threading.main_thread():
                runner._forward_once(job, job.span)  # its pop fails: it sends nothing, changes nothing
            return job

    live = Live(processor._live)
    assert len(live) == 1
    processor._live = live
    runner.ctx.live = live
    try:
        processor._abandon_unfinished()
        stats = processor.stats()
        assert stats["dropped_at_shutdown"] == 0 and stats["evaluation_spans"] == 0
        assert [span.name for span in p.spans()] == ["s"]
        assert {_marks(p.one("s"))[f"evaltrace.eval.{name}.skip_reason"] for name in "abc"} == {"shutdown"}
    finally:
        gate.set()
    processor.shutdown(timeout_millis=5_000)
    assert [span.name for span in p.spans()] == ["s"] and processor.stats()["dropped_at_shutdown"] == 0
    stats = processor.stats()
    assert stats["not_evaluated_by_reason"] == {"shutdown": 3} and stats["evaluated"] == 0


def test_a_trace_level_job_taken_over_emits_its_evaluation_as_a_shutdown_mark_child_span(
    make_pipeline: MakePipeline, tmp_path: Path
) -> None:
    """A completed trace's job (its root went downstream when it ended) stalls the loop at shutdown's drain."""
    entered, release = threading.Event(), threading.Event()

    @evaluator(name="whole")
    def whole(trace: Trace) -> bool:
        if not entered.is_set():
            entered.set()
            release.wait(30)
        return True

    sink_path = tmp_path / "scores.jsonl"
    p = make_pipeline(
        [EvaluatorSpec(whole, trace_level=True, inline=True)],
        sinks=[JsonlScoreSink(sink_path)],
        trace_quiet_period_s=3600,
        hold_timeout_s=60,
    )
    _off_the_lane(p.processor)
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("child"):
            pass
    try:
        p.processor.shutdown(timeout_millis=600)  # hands the trace out (drain), then takes its stalled job over
        assert entered.is_set()
        stats = p.processor.stats()
        assert stats["dropped_at_shutdown"] == 0
        assert stats["not_evaluated_by_reason"] == {"shutdown": 1} and stats["evaluation_spans"] == 1
        assert sorted(span.name for span in p.spans()) == ["child", "evaluation whole", "root"]
        child = p.one("evaluation whole")
        assert (child.attributes or {})["evaltrace.eval.whole.skip_reason"] == "shutdown"
        assert (child.attributes or {})["evaltrace.evaluation.revision"] == 1
        lines = [json.loads(line) for line in sink_path.read_text().splitlines()]
        assert [line["not_evaluated"]["evaluator"] for line in lines] == ["whole"], lines
        before = _settled(p.processor)
    finally:
        release.set()
        p.processor._engine._loop_thread.join(30)
    assert _settled(p.processor) == before
    assert len(p.spans()) == 3
