"""The application thread's cuts of s20-evapp3, each against the code it replaced, kept here verbatim.

- ``EvaluationSpanProcessor.on_start`` forwards a span start only to the downstream processors that override
  ``on_start`` (``forwarding.starting``, as the pipeline in front of it does): the base class's ``on_start`` the
  export queues inherit does nothing, and calling it cost a Python call per span start. ``old_on_start`` below is
  the method as it was (main 96c18e5): the same starts reach the same processors, in the same order, with the same
  arguments, and the processor's own state (suppressed set, buffer, completion, stats) is the same after.
- ``TraceBuffer.track`` makes the buffer's ``_Entry`` without the class call (``object.__new__`` and its two slots):
  the same object as ``_Entry(now)``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context, get_current
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace._internal import deferred_attributes, semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.evaluator_registry import registered
from evaltrace._internal.export_queue import ExportQueue
from evaltrace._internal.tracing import SUPPRESSION_KEYS
from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec
from evaltrace.evaluation import buffer as buffer_module
from evaltrace.evaluation import processor as processor_module
from evaltrace.evaluation._admission import is_root
from evaltrace.evaluation.buffer import TraceBuffer, _Entry
from evaltrace.evaluation.processor import _MAX_SUPPRESSED
from evaltrace.mapping._spans import plain_attrs

from .test_app_thread_cuts import _attribute_kinds, _contexts, _ref, _start_state, _started, evapp_global, evapp_trace

_ATTRIBUTES_PROPERTY = deferred_attributes.SDK_ATTRIBUTES_PROPERTY
_SUPPRESS_OTEL, _SUPPRESS_OURS = SUPPRESSION_KEYS


# fmt: off
def old_on_start(self: Any, span: Span, parent_context: Context | None = None) -> None:  # noqa: C901  (one frame per span, on purpose)
    """Forward to downstream; remember spans started under suppression and decorated spans' traces."""
    self._saw_start = True
    if not self._global and not registered:  # nothing can evaluate any span: a pass-through
        for processor in self._downstream:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception:
                log_internal_error("forwarding a span start to a downstream processor")
        return
    context = span.context
    try:
        if context is not None:
            # The attributes read once, as a plain dict: a live span's are a view over the SDK's
            # BoundedAttributes, where each read runs two Python frames (and a miss raises a KeyError inside).
            # An SDK span's: the plain dict its BoundedAttributes wraps, read in place (what plain_attrs copies,
            # without the copy and its two frames). Only read here, never kept or handed to user code, and the
            # span is still starting: no other code holds it yet.
            attributes: Any = None
            prop = getattr(type(span), "attributes", None)
            if prop is _ATTRIBUTES_PROPERTY or (
                # After the first preset start (any instrumented LLM call) the property is deferred_attributes'
                # view: the field is the same, unless this thread's preset start has not put its preset in.
                prop is deferred_attributes.view_property and not deferred_attributes.preset_pending()
            ):
                raw = getattr(span, "_attributes", None)
                if type(raw) is BoundedAttributes:
                    attributes = getattr(raw, "_dict", None)
                    if type(attributes) is not dict:  # an older SDK's OrderedDict: copied, as before
                        attributes = None
            if attributes is None:
                attributes = plain_attrs(span)
            # is_suppressed(), inline (one frame fewer on every span start): the current context's two keys.
            # A judge call's own trace (evaltrace.judge) is never evaluated, even when traced unsuppressed.
            current = get_current()
            if (
                current.get(_SUPPRESS_OTEL)
                or current.get(_SUPPRESS_OURS)
                or attributes.get(semconv.EVALTRACE_JUDGE)
            ):
                if len(self._suppressed) < _MAX_SUPPRESSED:
                    self._suppressed.add(context.span_id)
            else:
                # A decorated span (its evaluators' ref) is _may_evaluate's first answer, without its frame.
                if attributes.get(semconv.EVALTRACE_EVALUATORS_REF) or self._may_evaluate(span, attributes):
                    # Descendants start after this span, so tracking its trace now buffers every one of them.
                    self._buffer.track(context.trace_id)
                if self._completion is not None and is_root(span):
                    # Every local root, not only those whose name matches now: HTTP server instrumentations
                    # rename the root (update_name("POST /chat")) before it ends. Non-matching roots are
                    # discarded when they end; until then their spans are buffered (within the bounds).
                    self._completion.track(context.trace_id, span)
    except Exception:
        self._stats.incr("internal_errors")
        log_internal_error("noting a span start")
    for processor in self._downstream:
        try:
            processor.on_start(span, parent_context=parent_context)
        except Exception:
            log_internal_error("forwarding a span start to a downstream processor")
# fmt: on


class _Recording(SpanProcessor):
    """A downstream processor with its own ``on_start``: every start it is given, in order, with its arguments."""

    def __init__(self, name: str, log: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.log = log

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.log.append((self.name, span.name, parent_context))


class _RecordingQueue(ExportQueue):
    """An export queue subclass that overrides ``on_start`` (it must still be called)."""

    log: list[tuple[Any, ...]]

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.log.append(("queue subclass", span.name, parent_context))


class _Raising(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError("a downstream processor's bug")


class _Plain(SpanProcessor):
    """Inherits the base class's ``on_start`` (does nothing), as the export queues do."""


def _downstream(log: list[tuple[Any, ...]]) -> list[SpanProcessor]:
    exporter = InMemorySpanExporter()
    subclass = _RecordingQueue(exporter, "sub", synchronous=True)
    subclass.log = log
    return [
        ExportQueue(exporter, "q", synchronous=True),
        _Recording("first", log),
        _Plain(),
        _Raising(),
        SimpleSpanProcessor(exporter),
        subclass,
        _Recording("last", log),
    ]


CONFIGS: dict[str, list[Any]] = {
    "nothing evaluates (pass-through)": [],
    "global": [EvaluatorSpec(evapp_global)],
    "global and trace-level": [EvaluatorSpec(evapp_global, span_kinds=["llm"]), EvaluatorSpec(evapp_trace, scope="trace")],
}  # fmt: skip


@pytest.mark.parametrize("config", list(CONFIGS))
def test_on_start_forwards_the_same_starts_and_notes_spans_as_before(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _ref()
    attribute_kinds = _attribute_kinds(ref)
    passing = config == "nothing evaluates (pass-through)"
    if passing:  # no evaluator registered in this process either (the attached ref above registered one)
        monkeypatch.setattr(processor_module, "registered", {})
        monkeypatch.setattr(sys.modules[__name__], "registered", {})  # old_on_start's
    for ctx_name, ctx in _contexts().items():
        for shape in ("root", "child", "remote child"):
            spans = _started(attribute_kinds, shape)  # the same span objects for both versions
            results = []
            for version in ("new", "old"):
                log: list[tuple[Any, ...]] = []
                processor = EvaluationSpanProcessor(downstream=_downstream(log), evaluators=CONFIGS[config])
                try:
                    if version == "old":
                        processor.on_start = types.MethodType(old_on_start, processor)  # type: ignore[method-assign]
                    parent = ctx if shape != "root" else None
                    token = otel_context.attach(ctx)
                    try:
                        for span in spans:
                            processor.on_start(span, parent_context=parent)
                    finally:
                        otel_context.detach(token)
                    results.append((log, _start_state(processor)))
                finally:
                    processor.shutdown()
            assert results[0] == results[1], (config, ctx_name, shape)
            if passing:  # the pass-through branch was the one taken: nothing noted
                assert results[0][1][:3] == ([], results[0][1][1], None) and not results[0][1][1][0]
            else:  # the noting branch: the decorated span's trace is tracked, unless started suppressed
                assert results[0][1][1][0] or results[0][1][0], (config, ctx_name, shape)
            assert len(results[0][0]) == 3 * len(spans)  # every overriding processor had every start


def test_on_start_forwards_to_the_overriding_processors_only() -> None:
    log: list[tuple[Any, ...]] = []
    downstream = _downstream(log)
    processor = EvaluationSpanProcessor(downstream=downstream, evaluators=[EvaluatorSpec(evapp_global)])
    try:
        assert processor._starting == tuple(p for p in downstream if type(p).on_start is not SpanProcessor.on_start)
        assert [type(p) for p in processor._starting] == [
            _Recording,
            _Raising,
            SimpleSpanProcessor,
            _RecordingQueue,
            _Recording,
        ]
        assert processor._downstream == tuple(downstream)  # every span still ends in each of them
    finally:
        processor.shutdown()


def test_on_start_skips_no_processor_of_a_real_pipeline_that_acts_at_start() -> None:
    # End to end: a real provider, the evaluation processor in front of a processor that acts at start and an export
    # queue; the ended span is exported once and the start was seen.
    log: list[tuple[Any, ...]] = []
    exporter = InMemorySpanExporter()
    processor = EvaluationSpanProcessor(
        downstream=[_Recording("seen", log), ExportQueue(exporter, "q", synchronous=True)],
        evaluators=[EvaluatorSpec(evapp_global)],
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        provider.get_tracer("tests").start_span("work").end()
        assert processor.force_flush(30_000) is True  # also with a downstream inheriting SDK 1.30's None
        assert [entry[:2] for entry in log] == [("seen", "work")]
        assert [span.name for span in exporter.get_finished_spans()] == ["work"]
    finally:
        provider.shutdown()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        self.now += 1.5
        return self.now


def test_track_makes_the_entry_init_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(buffer_module, "time", clock)
    buffer = TraceBuffer(max_traces=3, max_age_s=10.0)
    for trace_id in (1, 2, 1, 3):
        buffer.track(trace_id)
    entries = list(buffer._traces.values())
    assert [type(entry) for entry in entries] == [_Entry, _Entry, _Entry]
    assert [entry.created for entry in entries] == [101.5, 103.0, 104.5]  # the clock read once per new trace
    assert all(entry.spans == [] and type(entry.spans) is list for entry in entries)
    assert len({id(entry.spans) for entry in entries}) == 3  # a list of its own each
    reference = _Entry(7.0)
    for entry in entries:
        assert {slot: type(getattr(entry, slot)) for slot in _Entry.__slots__} == {
            slot: type(getattr(reference, slot)) for slot in _Entry.__slots__
        }
    assert buffer.stats.traces == 3
    # And eviction by age reads the field set there: 10 s later every older trace is evicted.
    clock.now += 10.0
    buffer.track(4)
    assert list(buffer._traces) == [4] and buffer.stats.evicted_traces == 3


def test_the_old_on_start_is_the_real_one_apart_from_the_forward() -> None:
    # Guard: the verbatim copy above differs from today's method only in the downstream it loops over.
    import inspect

    new = inspect.getsource(EvaluationSpanProcessor.on_start)
    old = inspect.getsource(old_on_start)
    # Compared without whitespace: the copy is dedented one level, so the formatter joined a wrapped condition.
    new_code = "".join("".join(new.splitlines(keepends=True)[1:]).split())
    old_code = "".join("".join(old.splitlines(keepends=True)[1:]).split())
    assert new_code.replace("self._starting", "self._downstream") == old_code
    _ = (BoundedAttributes, ReadableSpan, get_current, plain_attrs, is_root, semconv, _MAX_SUPPRESSED)
    _ = (_ATTRIBUTES_PROPERTY, _SUPPRESS_OTEL, _SUPPRESS_OURS, log_internal_error)


def test_an_on_start_set_on_an_instance_before_the_processor_is_built_is_called_one_set_after_is_not() -> None:
    # The choice of who hears a start is made at build (forwarding.starting, as StampingPipeline makes it): an
    # on_start set on an instance before counts; one set after on a processor that inherited the base no-op does not.
    log: list[tuple[Any, ...]] = []
    before, after = ExportQueue(InMemorySpanExporter(), "before", synchronous=True), _Plain()
    before.on_start = lambda span, parent_context=None: log.append(("before", span.name))  # type: ignore[method-assign]
    processor = EvaluationSpanProcessor(downstream=[before, after], evaluators=[EvaluatorSpec(evapp_global)])
    after.on_start = lambda span, parent_context=None: log.append(("after", span.name))  # type: ignore[method-assign]
    provider = TracerProvider()
    provider.add_span_processor(processor)
    try:
        provider.get_tracer("tests").start_span("work").end()
        assert log == [("before", "work")]
    finally:
        provider.shutdown()
