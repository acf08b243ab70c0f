"""Evaluations cut short at shutdown reach the exporters before they shut, even when the evaluation loop is starved.

Root cause of the ``test_sink_faults.py::test_evaluations_cut_short_at_shutdown_...`` flake at load 17-37: a job cut
short at the deadline forwards its results and "not evaluated: shutdown" marks (as child ``evaluation <name>`` spans,
its span having gone out at the hold deadline) from the evaluation loop. Shutdown gave that cleanup 0.25 s, then
stop() 0.25 s more, then shut the sinks and exporters: a loop starved of CPU ran it afterwards, into shut exporters,
and a loop stopped while cleanups were still in progress dropped them with no count at all.

Here the starvation is made deterministic: the loop is kept busy (a blocking callback) from the moment shutdown
cancels its jobs. Through ``configure()``, the real pipeline and its export queue, the real OTel SDK with an
in-memory exporter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import evaluator
from evaltrace.schema import Trace

JOBS = 10
TIMEOUT_S = 7.0
"""Shutdown's deadline: its reserve (for what follows the evaluations) is then 2 s, cancellation at 5 s."""


@evaluator(name="quick")
async def quick(trace: Trace) -> bool:
    return True


@evaluator(name="stuck")
async def stuck(trace: Trace) -> bool:
    await asyncio.sleep(60)  # cut short by the shutdown deadline
    return True


@pytest.fixture
def configured() -> Iterator[tuple[InMemorySpanExporter, Any]]:
    saved = settings.current
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "starved-loop", exporters=[exporter], local_store=False, sinks=[],
        evaluation_options={"hold_timeout_s": 0.05},  # every span goes out first: its results follow as child spans
    )  # fmt: skip
    try:
        yield exporter, handle
    finally:
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


def run_jobs_and_starve_the_loop_at_cancellation(handle: Any, starved_s: float) -> Any:
    """Run JOBS agent calls; when shutdown cancels them, the loop gets no CPU for ``starved_s`` (as at load 20)."""

    @evaltrace.agent(evaluators=[quick, stuck])
    def answer(i: int) -> str:
        return f"answer {i}"

    for i in range(JOBS):
        answer(i)
    processor = handle.evaluation_processor
    engine = processor._engine
    cancel_all = engine.cancel_all

    def starved_cancel_all() -> None:
        engine.loop.call_soon_threadsafe(time.sleep, starved_s)
        cancel_all()

    engine.cancel_all = starved_cancel_all
    return processor


def outcomes(exporter: InMemorySpanExporter) -> dict[tuple[int, str], str]:
    """(agent span id, evaluator) -> the outcome its late ``evaluation <name>`` span carries."""
    found: dict[tuple[int, str], str] = {}
    for span in exporter.get_finished_spans():
        if span.name.startswith("evaluation ") and span.parent is not None:
            name = span.name.removeprefix("evaluation ")
            found[(span.parent.span_id, name)] = str(span.attributes.get(f"evaltrace.eval.{name}.outcome"))
    return found


def test_cut_short_evaluation_spans_reach_the_exporter_when_the_loop_is_starved_at_the_deadline(
    configured: tuple[InMemorySpanExporter, Any],
) -> None:
    exporter, handle = configured
    processor = run_jobs_and_starve_the_loop_at_cancellation(handle, starved_s=1.25)  # busy until 6.25 s of 7
    handle.shutdown(timeout_s=TIMEOUT_S)

    agents = [span for span in exporter.get_finished_spans() if span.name.startswith("invoke_agent")]
    assert len(agents) == JOBS
    expected = {(span.context.span_id, name): outcome for span in agents for name, outcome in (
        ("quick", "pass"), ("stuck", "not_evaluated"))}  # fmt: skip
    assert outcomes(exporter) == expected  # every result and every shutdown mark, none lost
    stats = processor.stats()
    assert stats["not_evaluated_by_reason"] == {"shutdown": JOBS}
    assert (stats["cancelled"], stats["unflushed_jobs"], stats["unfinished_at_shutdown"]) == (JOBS, JOBS, 0)
    assert sum(queue["lost"] for queue in stats["exporters"].values()) == 0


def test_cleanups_past_the_deadline_are_counted_at_shutdown_then_as_dropped_spans(
    configured: tuple[InMemorySpanExporter, Any],
) -> None:
    exporter, handle = configured
    processor = run_jobs_and_starve_the_loop_at_cancellation(handle, starved_s=3.0)  # busy until 8 s of 7
    handle.shutdown(timeout_s=TIMEOUT_S)

    # At shutdown's return: the jobs still finishing are counted, their spans not arrived (nor lost) yet.
    assert processor.stats()["unfinished_at_shutdown"] == JOBS
    assert outcomes(exporter) == {}
    # The loop then finishes their cleanup (it never stops with one in progress): each span is counted lost.
    deadline = time.monotonic() + 20
    while processor.stats()["queued"] and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = processor.stats()
    assert stats["queued"] == 0
    assert stats["not_evaluated_by_reason"] == {"shutdown": JOBS}
    dropped = sum(queue["dropped_shutdown"] for queue in stats["exporters"].values())
    assert dropped == 2 * JOBS  # each job's result and its shutdown mark
    assert outcomes(exporter) == {}
