"""The decorators' fast path through what ``configure()`` installs: stamps, parents, suppression, flushing.

The wrappers read the current context once and pass it on as the parent; ``configure()`` installs one
``StampingPipeline`` instead of the SDK's multi-processor. These tests run the real pipeline into an in-memory
exporter and would fail if the parent, the stamps or suppression were lost on that path.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace._internal.jsonutil import capped_json, to_jsonable
from evaltrace.context import StampingPipeline
from evaltrace.evaluation import evaluator


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


def configured(evaluation: bool) -> tuple[evaltrace.EvaltraceHandle, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="t", exporters=[exporter], local_store=False, evaluation=evaluation, handle_sigterm=False
    )
    return handle, exporter


def finished(handle: evaltrace.EvaltraceHandle, exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    assert handle.force_flush(5_000)
    return {span.name: span for span in exporter.get_finished_spans()}


@pytest.mark.parametrize("evaluation", [True, False])
def test_configure_stamps_nests_and_captures_decorated_and_foreign_spans(evaluation: bool) -> None:
    handle, exporter = configured(evaluation)
    foreign = handle.provider.get_tracer("someone-else")

    @evaltrace.tool
    def lookup(city: str) -> dict[str, Any]:
        with foreign.start_as_current_span("http GET"):
            return {"city": city, "temp": 21}

    @evaltrace.agent
    async def answer(question: str) -> str:
        return str(lookup("Paris")["temp"]) + question

    with evaltrace.context(session_id="s1", user_id="u7", tags=["beta"]):
        assert asyncio.run(answer("?")) == "21?"
    spans = finished(handle, exporter)

    agent, tool, http = spans["invoke_agent answer"], spans["execute_tool lookup"], spans["http GET"]
    assert agent.parent is None
    assert tool.parent is not None and tool.parent.span_id == agent.context.span_id
    assert http.parent is not None and http.parent.span_id == tool.context.span_id
    assert {s.context.trace_id for s in spans.values()} == {agent.context.trace_id}
    for span in spans.values():
        attributes = dict(span.attributes or {})
        assert attributes["session.id"] == "s1" and attributes["user.id"] == "u7"
        assert tuple(attributes["langfuse.trace.tags"]) == ("beta",)
    assert json.loads(str(dict(tool.attributes or {})["gen_ai.tool.call.arguments"])) == {"city": "Paris"}
    assert json.loads(str(dict(agent.attributes or {})["output.value"])) == "21?"


def test_otel_suppress_instrumentation_silences_sync_and_async_decorators() -> None:
    handle, exporter = configured(evaluation=True)

    @evaltrace.trace
    def sync_call() -> int:
        return 1

    @evaltrace.trace
    async def async_call() -> int:
        return 2

    with suppress_instrumentation():  # OTel's own switch, as HTTP client instrumentations use it
        assert sync_call() == 1
        assert asyncio.run(async_call()) == 2
    assert finished(handle, exporter) == {}
    assert sync_call() == 1
    assert set(finished(handle, exporter)) == {"sync_call"}


def test_the_span_is_current_inside_and_the_caller_context_restored_after() -> None:
    handle, exporter = configured(evaluation=False)
    seen: list[int] = []

    @evaltrace.trace
    def inner() -> None:
        seen.append(evaltrace_current_span_id())

    before = otel_context.get_current()
    inner()
    assert otel_context.get_current() is before
    assert seen == [finished(handle, exporter)["inner"].context.span_id]


def evaltrace_current_span_id() -> int:
    from opentelemetry import trace

    return trace.get_current_span().get_span_context().span_id


class _Flush(SpanProcessor):
    """A processor whose force_flush answers what it is given, and records that it was asked."""

    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.asked = 0

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.asked += 1
        return self.answer  # type: ignore[return-value]  # None: what the SDK's base SpanProcessor returns


def test_stamping_pipeline_flush_follows_the_sdk_rules() -> None:
    done = SimpleSpanProcessor(InMemorySpanExporter())
    assert StampingPipeline([done, _Flush(None)]).force_flush(1_000) is True  # None is not a failure
    failing, after = _Flush(False), _Flush(True)
    assert StampingPipeline([failing, after]).force_flush(1_000) is False
    assert after.asked == 1  # a failure does not stop the others being flushed
    late = _Flush(True)
    assert StampingPipeline([late]).force_flush(0) is False  # no time left: not flushed, not asked
    assert late.asked == 0


def test_plain_values_with_non_finite_floats_serialise_as_before() -> None:
    value = {"x": [1.5, math.nan], "y": {"z": -math.inf}, "s": "é\n"}
    expected = json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))
    assert capped_json(value) == expected == '{"x":[1.5,"nan"],"y":{"z":"-inf"},"s":"é\\n"}'
    assert capped_json(["a", 1, 2.5, None, True, ("t",)]) == '["a",1,2.5,null,true,["t"]]'


def test_ended_spans_reach_exporters_as_plain_read_only_mappings() -> None:
    """``configure()``'s pipeline hands exporters the ended span's own dict (read in C), unchanged and read-only."""
    handle, exporter = configured(evaluation=True)

    @evaltrace.trace
    def step(x: int) -> int:
        return x + 1

    assert step(1) == 2
    span = finished(handle, exporter)["step"]
    assert type(span._attributes) is dict  # the fast read; a regression makes every exporter pay ~8 calls/span
    assert dict(span.attributes or {}) == {
        "evaltrace.span.kind": "task",
        "langfuse.observation.type": "chain",
        "openinference.span.kind": "CHAIN",
        "input.value": '{"x":1}',
        "output.value": "2",
    }
    assert span.dropped_attributes == 0
    with pytest.raises(TypeError):
        span.attributes["evaltrace.span.kind"] = "llm"  # type: ignore[index]


def test_a_span_that_dropped_attributes_keeps_its_dropped_count() -> None:
    """The SDK counts what it dropped on its own containers: those are left exactly as the SDK made them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=2, max_events=1))
    provider.add_span_processor(StampingPipeline([SimpleSpanProcessor(exporter)]))
    link = Link(SpanContext(1, 2, is_remote=True), {"l": 1})
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("step", attributes={"a": 1, "b": 2, "c": 3}, links=[link]) as span:
        span.add_event("first")
        span.add_event("second", {"e": 1})
    (ended,) = exporter.get_finished_spans()
    assert dict(ended.attributes or {}) == {"b": 2, "c": 3}
    assert ended.dropped_attributes == 1
    assert [(e.name, dict(e.attributes or {})) for e in ended.events] == [("second", {"e": 1})]
    assert ended.dropped_events == 1
    assert [dict(k.attributes or {}) for k in ended.links] == [{"l": 1}] and ended.dropped_links == 0
    assert type(ended._links) is tuple  # nothing dropped there: read as a tuple


def test_events_and_links_of_an_ended_span_read_unchanged() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(StampingPipeline([SimpleSpanProcessor(exporter)]))
    link = Link(SpanContext(1, 2, is_remote=True), {"l": 1})
    with provider.get_tracer("t").start_as_current_span("step", links=[link]) as span:
        span.add_event("first", {"e": 1})
    (ended,) = exporter.get_finished_spans()
    assert type(ended._events) is tuple and type(ended._links) is tuple
    assert [(e.name, dict(e.attributes or {})) for e in ended.events] == [("first", {"e": 1})]
    assert ended.links[0].context.span_id == 2 and dict(ended.links[0].attributes or {}) == {"l": 1}
    assert (ended.dropped_events, ended.dropped_links, ended.dropped_attributes) == (0, 0, 0)


def _evaluation_threads() -> list[str]:
    names = (t.name for t in threading.enumerate())
    return sorted(n for n in names if n.startswith(("evaltrace-eval", "evaltrace-async-eval")))


def test_a_pipeline_no_evaluator_applies_to_runs_no_evaluation_thread() -> None:
    """configure() with no evaluator: spans are forwarded, and nothing wakes up for evaluation (no idle ticks)."""
    before = _evaluation_threads()
    handle, exporter = configured(evaluation=True)

    @evaltrace.trace
    def step(x: int) -> int:
        return x + 1

    step(1)
    assert "step" in finished(handle, exporter)
    assert _evaluation_threads() == before


def test_evaluation_threads_start_with_the_first_evaluation() -> None:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(service_name="t", exporters=[exporter], local_store=False, handle_sigterm=False)

    async def polite(trace: Any) -> bool:
        return True

    @evaltrace.agent(evaluators=[evaluator(name="polite")(polite)])
    def answer(question: str) -> str:
        return "ok"

    answer("?")
    spans = finished(handle, exporter)
    assert dict(spans["invoke_agent answer"].attributes or {})["evaltrace.eval.polite.outcome"] == "pass"
    assert any(name.startswith("evaltrace-eval") for name in _evaluation_threads())


def _python_calls(action: Any) -> list[Any]:
    """The code objects of every Python function ``action()`` calls, in order (``sys.setprofile``)."""
    import sys

    codes: list[Any] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            codes.append(frame.f_code)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return codes


@pytest.mark.parametrize("evaluation", [True, False])
def test_span_start_and_end_go_from_the_providers_processors_straight_into_the_pipeline(evaluation: bool) -> None:
    """No frame of the switch that a reconfigure swaps, and no call of a processor that does nothing at start.

    The switch hands the SDK its pipeline's own ``on_start`` / ``on_end``; the export queues inherit the base
    class's empty ``on_start``, which the pipeline (and the evaluation stand-in) skip. The span still arrives.
    """
    from evaltrace import config

    handle, exporter = configured(evaluation)
    tracer = handle.provider.get_tracer("t")
    tracer.start_span("warm").end()
    span: list[Any] = []
    calls = _python_calls(lambda: span.append(tracer.start_span("measured")))
    calls += _python_calls(lambda: span[0].end())
    switch = config._SwitchableProcessor
    assert switch.on_start.__code__ not in calls and switch.on_end.__code__ not in calls
    # The export queue's start is not called at all (the built evaluation processor, there once an earlier test's
    # decorator registered an evaluator, forwards every start itself: evaluation/ is not this path's concern).
    if not (evaluation and handle._evaluation.built is not None):
        assert SpanProcessor.on_start.__code__ not in calls
    assert calls.count(StampingPipeline.on_start.__code__) == calls.count(StampingPipeline.on_end.__code__) == 1
    assert set(finished(handle, exporter)) == {"warm", "measured"}


def test_a_swapped_or_emptied_switch_sends_spans_to_its_current_pipeline_only() -> None:
    first, second, third = InMemorySpanExporter(), InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()

    def setup(exporter: InMemorySpanExporter) -> evaltrace.EvaltraceHandle:
        return evaltrace.configure(
            service_name="t", exporters=[exporter], local_store=False, handle_sigterm=False, tracer_provider=provider
        )

    tracer = provider.get_tracer("t")
    handle = setup(first)
    tracer.start_span("one").end()
    started = tracer.start_span("across")  # started in the first pipeline, ended in the second
    handle = setup(second)
    started.end()
    tracer.start_span("two").end()
    assert handle.force_flush(5_000)
    handle.shutdown()
    tracer.start_span("nowhere").end()  # no pipeline: goes nowhere, raises nothing
    handle = setup(third)
    tracer.start_span("three").end()
    assert handle.force_flush(5_000)
    assert [s.name for s in first.get_finished_spans()] == ["one"]
    assert [s.name for s in second.get_finished_spans()] == ["across", "two"]
    assert [s.name for s in third.get_finished_spans()] == ["three"]


class _Starts(SimpleSpanProcessor):
    """Records the spans it is told have started (it overrides ``on_start``)."""

    def __init__(self) -> None:
        super().__init__(InMemorySpanExporter())
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)


class _Forward(SpanProcessor):
    """What the deferred evaluation builds once an earlier test registered an evaluator: forwards everything."""

    def __init__(self, processors: list[SpanProcessor]) -> None:
        self.processors = processors

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for processor in self.processors:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for processor in self.processors:
            processor.on_end(span)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Nothing to release."""


def test_forwarding_processors_still_start_spans_in_the_processors_that_override_on_start() -> None:
    from evaltrace._internal.deferred_evaluation import DeferredEvaluation
    from evaltrace._internal.export_queue import ExportQueue
    from evaltrace._internal.forwarding import starting

    queue = ExportQueue(InMemorySpanExporter(), "memory", synchronous=True)
    starts = _Starts()
    assert starting([queue, starts, SimpleSpanProcessor(InMemorySpanExporter())])[:1] == (starts,)
    pipeline = StampingPipeline([queue, starts])
    deferred = DeferredEvaluation(lambda: _Forward([queue, starts]), [queue, starts])
    assert pipeline._starting == deferred._starting == (starts,)  # the queue is not called at start
    for processor in (pipeline, deferred):
        starts.started.clear()
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(processor)
        provider.get_tracer("t").start_span("s").end()
        assert starts.started == ["s"]
    assert queue.stats()["exported"] == 2  # the queue skipped at start still got both spans at end


def test_deferred_evaluation_force_flush_answers_true_over_a_processor_inheriting_the_base_force_flush() -> None:
    # SDK 1.30's base SpanProcessor.force_flush returns None (1.31+: True): that is success, not a failed flush.
    from opentelemetry.sdk.trace import SpanProcessor

    from evaltrace._internal.deferred_evaluation import DeferredEvaluation

    class Inherits(SpanProcessor):
        pass

    deferred = DeferredEvaluation(lambda: Inherits(), [Inherits()])
    assert deferred.force_flush(1_000) is True
