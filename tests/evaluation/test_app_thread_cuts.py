"""The evaluation row's application-thread cuts (s17-evapp): the same copies, buffer, suppression and counts.

Four pieces of an evaluated span's start and end on the application thread were made cheaper; each replaced
function is kept verbatim below as the reference and compared with today's:

- ``plain_attrs`` copies the SDK span's attributes from the field its ``attributes`` property wraps;
- ``TraceBuffer.track`` takes its lock without ``with`` and inserts inline;
- ``on_start`` reads the suppression keys from the current context inline, and a decorated span's evaluators' ref
  before calling ``_may_evaluate``;
- ``stats()["enqueued"]`` is counted by a lock-free ticker (exact under threads, shown with several threads).
"""

from __future__ import annotations

import itertools
import threading
import types
from collections.abc import Iterator
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace as trace_api
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace._internal.tracing import SUPPRESSION_KEYS, is_suppressed, suppress_instrumentation
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.evaluation._admission import is_root
from evaltrace.evaluation.buffer import TraceBuffer
from evaltrace.evaluation.processor import _MAX_SUPPRESSED
from evaltrace.evaluation.stats import PipelineStats
from evaltrace.mapping._spans import plain_attrs
from evaltrace.schema import Trace

from .conftest import MakePipeline, wait_until

# --- the replaced code, verbatim (main before s17-evapp) ------------------------------------------------------


def old_plain_attrs(span: ReadableSpan) -> dict[str, Any]:
    """Return a plain-dict copy of the span's attributes, for code that reads many of them.

    Each read through the SDK's view (a mapping proxy over ``BoundedAttributes``) runs several Python-level
    calls; copying once costs about as much as two reads.
    """
    attributes = span.attributes
    if not attributes:
        return {}
    # The view's copy() is its mapping's: a C copy of a span's plain dict (a finished span's copy holds one), the
    # SDK's own dict copy for BoundedAttributes. dict(view) walked the keys and read each through the view (~9k
    # instructions for a decorated span's eight attributes). Anything else (no copy(), or not a plain dict from
    # it: an older SDK's OrderedDict) is copied as before.
    try:
        copied = attributes.copy()  # type: ignore[attr-defined]  # Mapping has no copy(); the SDK's view does
    except (AttributeError, TypeError):  # no copy(), or one that takes arguments
        return dict(attributes)
    return copied if type(copied) is dict else dict(attributes)


def old_track(self: Any, trace_id: int) -> None:
    """Start buffering ``trace_id`` (called when a span that will need its subtree starts)."""
    with self._lock:
        if trace_id not in self._traces:
            self._insert(trace_id)


def old_on_start(self: Any, span: Span, parent_context: Context | None = None) -> None:
    """Forward to downstream; remember spans started under suppression and decorated spans' traces."""
    from evaltrace._internal.evaluator_registry import registered

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
            attributes = old_plain_attrs(span)
            # A judge call's own trace (evaltrace.judge) is never evaluated, even when traced unsuppressed.
            if is_suppressed() or attributes.get(semconv.EVALTRACE_JUDGE):
                if len(self._suppressed) < _MAX_SUPPRESSED:
                    self._suppressed.add(context.span_id)
            else:
                if self._may_evaluate(span, attributes):
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


# --- plain_attrs -----------------------------------------------------------------------------------------------


class _OwnView(ReadableSpan):
    """A ReadableSpan subclass with its own ``attributes``: read through the property, as before."""

    @property
    def attributes(self) -> Any:
        return MappingProxyType({"own": True})


class _NoCopy(dict[str, Any]):
    def copy(self) -> Any:
        raise TypeError("no copy")


def _attribute_sets() -> list[Any]:
    bounded = BoundedAttributes(maxlen=3, attributes={"a": 1, "b": "x", "c": (1, 2), "d": 4.5})
    frozen = BoundedAttributes(attributes={"k": "v", "n": 3}, immutable=True)
    return [None, {}, {"a": 1}, {"a": 1, "b": [1, 2], "c": None}, MappingProxyType({"p": 1}), bounded, frozen,
            BoundedAttributes(), _NoCopy({"n": 1})]  # fmt: skip


def _spans_to_copy() -> Iterator[Any]:
    provider = TracerProvider(span_limits=SpanLimits(max_attributes=4))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    for attributes in ({}, {"a": 1}, {"a": 1, "b": "two", "c": (3,), "d": True, "e": "dropped past the limit"}):
        live = tracer.start_span("live", attributes=attributes)
        live.set_attribute("later", 1)
        yield live  # the tracer's own Span subclass, live (on_start's case)
        live.end()
    yield from exporter.get_finished_spans()  # ended ReadableSpans over immutable BoundedAttributes
    for attributes in _attribute_sets():
        yield ReadableSpan("plain", attributes=attributes)
        yield _OwnView("own", attributes=attributes)
        yield SimpleNamespace(attributes=attributes)  # a stand-in: read through ``attributes`` only


def test_plain_attrs_of_a_span_class_without_the_attributes_field_raises_as_before() -> None:
    """A ``ReadableSpan`` subclass that never sets ``_attributes`` (no SDK class does; a user's may): the property
    raises, before and after, so ``on_start`` counts it as an internal error instead of taking it for a span with no
    attributes (review of s17-evapp)."""

    class NoField(ReadableSpan):
        def __init__(self) -> None:  # deliberately not the SDK's __init__
            pass

    for copy in (old_plain_attrs, plain_attrs):
        with pytest.raises(AttributeError, match="_attributes"):
            copy(NoField())


def test_plain_attrs_copies_what_the_old_copy_did() -> None:
    count = 0
    for span in _spans_to_copy():
        old = old_plain_attrs(span)
        new = plain_attrs(span)
        assert new == old and type(new) is dict, span
        assert list(new) == list(old), span  # the same order: a mapping built from it iterates the same
        # A copy: changing it leaves the span's attributes as they were (on_start reads it, nothing writes it).
        before = dict(span.attributes or {})
        new["__changed__"] = 1
        assert dict(span.attributes or {}) == before
        count += 1
    assert count == 33


def test_plain_attrs_of_a_live_span_reads_its_attributes_now() -> None:
    # The copy is of the attributes at the call: a later set_attribute is not in an earlier copy, and is in a new one.
    span = TracerProvider().get_tracer("tests").start_span("s", attributes={"a": 1})
    first = plain_attrs(span)
    span.set_attribute("b", 2)
    assert first == {"a": 1} and plain_attrs(span) == {"a": 1, "b": 2} == old_plain_attrs(span)
    span.end()


# --- TraceBuffer.track -----------------------------------------------------------------------------------------


# One resource for every buffer span: without one, ReadableSpan builds Resource.create({}), which scans the installed
# entry points on older SDKs (1.30: the 124,416 spans below took most of the oldest-SDK CI step).
_RESOURCE = Resource({})


def _span(trace_id: int, span_id: int, name: str) -> ReadableSpan:
    return ReadableSpan(name, SpanContext(trace_id, span_id, False, trace_flags=TraceFlags(1)), resource=_RESOURCE)


def _state(buffer: TraceBuffer) -> tuple[Any, ...]:
    entries = [(trace_id, [s.name for s in entry.spans]) for trace_id, entry in buffer._traces.items()]
    stats = buffer.stats
    return entries, stats.traces, stats.evicted_traces, stats.dropped_spans, len(buffer)


@pytest.mark.parametrize("max_age_s", [300.0, 0.0])
@pytest.mark.parametrize("max_traces", [1, 2, 3])
def test_track_leaves_the_buffer_as_the_old_track(max_traces: int, max_age_s: float) -> None:
    # Every sequence of four operations over three traces: track, add, a root's end (take) and pop. Age 0 evicts
    # every older trace on each insert; max_traces 1-3 evicts by count.
    ops = ("track", "add", "take", "pop")
    sequences = list(itertools.product(ops, (1, 2, 3), repeat=4))
    assert len(sequences) == 12**4
    for sequence in sequences:
        new = TraceBuffer(max_traces, 2, max_age_s)
        old = TraceBuffer(max_traces, 2, max_age_s)
        for n in range(0, 8, 2):
            op, trace_id = sequence[n], sequence[n + 1]
            span = _span(trace_id, n + 1, f"{op}-{n}")
            if op == "track":
                new.track(trace_id)
                old_track(old, trace_id)
            elif op == "add":
                new.add(span, create=False)
                old.add(span, create=False)
            elif op == "take":
                assert [s.name for s in new.take(trace_id, span, create=False)] == [
                    s.name for s in old.take(trace_id, span, create=False)
                ]
            else:
                assert [s.name for s in new.pop(trace_id)] == [s.name for s in old.pop(trace_id)]
            assert _state(new) == _state(old), (sequence, n)


def test_track_waits_for_the_buffers_lock_and_releases_it() -> None:
    buffer = TraceBuffer()
    done = threading.Event()
    buffer._lock.acquire()
    thread = threading.Thread(target=lambda: (buffer.track(5), done.set()))
    thread.start()
    try:
        assert not done.wait(0.2)  # blocked on the lock: nothing inserted yet
        assert not buffer.is_tracked(5)
    finally:
        buffer._lock.release()
    thread.join(10)
    assert done.is_set() and buffer.is_tracked(5)
    buffer.track(5)  # tracked already: the early return gave the lock back too
    assert buffer._lock.acquire(blocking=False)
    buffer._lock.release()


def test_tracks_from_many_threads_leave_every_trace_once() -> None:
    buffer = TraceBuffer(max_traces=100_000)
    barrier = threading.Barrier(6)

    def work(base: int) -> None:
        barrier.wait()
        for n in range(2_000):
            buffer.track(base * 10_000 + n % 1_000)  # each id tracked twice by this thread

    threads = [threading.Thread(target=work, args=(i % 3,)) for i in range(6)]  # two threads per id range
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(buffer) == 3_000 == buffer.stats.traces and buffer.stats.evicted_traces == 0


# --- on_start: suppression and the ref, inline -----------------------------------------------------------------


@evaluator(name="evapp_global")
def evapp_global(trace: Trace) -> bool:
    return True


@evaluator(name="evapp_attached")
def evapp_attached(trace: Trace) -> bool:
    return True


@evaluator(name="evapp_trace")
def evapp_trace(trace: Trace) -> bool:
    return True


_REF: dict[int, str] = {}


def _ref() -> str:
    return _REF[0] if _REF else _REF.setdefault(0, register_evaluators("tests.evapp", [evapp_attached]))


CONFIGS = {
    "attached only": [],
    "global llm": [EvaluatorSpec(evapp_global, span_kinds=["llm"])],
    "global sampled": [EvaluatorSpec(evapp_global, sample_rate=0.5)],
    "global and trace-level": [EvaluatorSpec(evapp_global, span_kinds=["llm"]), EvaluatorSpec(evapp_trace, scope="trace")],
}  # fmt: skip


def _contexts() -> dict[str, Context]:
    otel_key, ours = SUPPRESSION_KEYS
    base = otel_context.get_current()
    return {
        "none": base,
        "otel": otel_context.set_value(otel_key, True, base),
        "ours": otel_context.set_value(ours, True, base),
        "both": otel_context.set_value(otel_key, True, otel_context.set_value(ours, True, base)),
        "llm only": otel_context.set_value("suppress_language_model_instrumentation", True, base),
        "otel false": otel_context.set_value(otel_key, False, base),
    }


def _attribute_kinds(ref: str) -> dict[str, dict[str, Any]]:
    kind = semconv.EVALTRACE_SPAN_KIND
    return {
        "plain": {},
        "decorated": {semconv.EVALTRACE_EVALUATORS_REF: ref, kind: "agent"},
        "empty ref": {semconv.EVALTRACE_EVALUATORS_REF: "", kind: "llm"},
        "llm": {kind: "llm"},
        "tool": {kind: "tool"},
        "judge": {semconv.EVALTRACE_JUDGE: True, kind: "llm"},
        "decorated judge": {semconv.EVALTRACE_JUDGE: True, semconv.EVALTRACE_EVALUATORS_REF: ref},
    }


def _start_state(processor: Any) -> tuple[Any, ...]:
    completion = processor._completion
    tracked = sorted(completion._traces) if completion is not None and hasattr(completion, "_traces") else None
    stats = {k: v for k, v in processor.stats().items() if k != "uptime_s"}
    return sorted(processor._suppressed), _state(processor._buffer), tracked, stats


@pytest.mark.parametrize("config", list(CONFIGS))
def test_on_start_notes_spans_as_the_old_on_start(make_pipeline: MakePipeline, config: str) -> None:
    ref = _ref()
    attribute_kinds = _attribute_kinds(ref)
    for ctx_name in _contexts():
        for shape in ("root", "child", "remote child"):
            spans = _started(attribute_kinds, shape)  # the same span objects for both versions
            results = []
            for version in ("new", "old"):
                pipeline = make_pipeline(CONFIGS[config])
                processor = pipeline.processor
                if version == "old":
                    processor.on_start = types.MethodType(old_on_start, processor)
                token = otel_context.attach(_contexts()[ctx_name])
                try:
                    for span in spans:
                        processor.on_start(span)
                finally:
                    otel_context.detach(token)
                results.append(_start_state(processor))
            assert results[0] == results[1], (config, ctx_name, shape)


class _Ids(IdGenerator):
    """Trace ids 0x100, 0x100 + 7919, ...: spread across sample_rate 0.5's in and out."""

    def __init__(self) -> None:
        self._trace_ids = itertools.count(0x100, 7919)
        self._span_ids = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self._span_ids)

    def generate_trace_id(self) -> int:
        return next(self._trace_ids)


def _started(attribute_kinds: dict[str, dict[str, Any]], shape: str) -> list[Span]:
    """Live spans of a provider with no processor (on_start is called by the test), one per attribute kind."""
    tracer = TracerProvider(id_generator=_Ids()).get_tracer("tests")
    spans = []
    for n, (name, attributes) in enumerate(attribute_kinds.items()):
        context = None
        if shape != "root":
            parent = SpanContext(0x200 + n * 7919, 0x99, shape == "remote child", trace_flags=TraceFlags(1))
            context = trace_api.set_span_in_context(trace_api.NonRecordingSpan(parent))
        spans.append(tracer.start_span(name, context=context, attributes=attributes))
    return spans


def test_a_span_started_under_either_suppression_is_never_evaluated(make_pipeline: MakePipeline) -> None:
    # End to end through the tracer: OTel's key and ours each keep the span out of evaluation; the llm-only key
    # (an outer framework's) does not.
    pipeline = make_pipeline([EvaluatorSpec(evapp_global)])
    contexts = _contexts()
    for name in ("otel", "ours", "llm only", "none"):
        token = otel_context.attach(contexts[name])
        try:
            pipeline.tracer.start_span(name).end()
        finally:
            otel_context.detach(token)
    with suppress_instrumentation():
        pipeline.tracer.start_span("ours via the context manager").end()
    pipeline.flush()
    evaluated = {s.name for s in pipeline.spans() if any(k.startswith("evaltrace.eval.") for k in s.attributes or {})}
    assert evaluated == {"llm only", "none"}
    assert len(pipeline.spans()) == 5
    assert pipeline.processor.stats()["enqueued"] == 2


# --- stats: enqueued, lock-free and exact ----------------------------------------------------------------------


def test_enqueued_counts_exactly_from_many_threads() -> None:
    stats = PipelineStats()
    barrier = threading.Barrier(8)

    def work(locked: bool) -> None:
        barrier.wait()
        for _ in range(20_000):
            if locked:
                stats.incr("enqueued")  # the locked counter still counts, beside the ticker
            else:
                stats.enqueued()

    threads = [threading.Thread(target=work, args=(i == 0,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert stats.snapshot()["enqueued"] == 8 * 20_000
    assert stats.snapshot()["enqueued"] == 8 * 20_000  # reading does not count or reset


def test_enqueued_never_waits_for_the_stats_lock() -> None:
    # The application thread counts an admitted span without the lock a worker may hold while recording results.
    stats = PipelineStats()
    done = threading.Event()
    with stats._lock:
        thread = threading.Thread(target=lambda: (stats.enqueued(), done.set()))
        thread.start()
        assert done.wait(10)
    thread.join(10)
    assert stats.snapshot()["enqueued"] == 1


def test_enqueued_of_the_pipeline_is_exact_with_spans_ending_on_many_threads(make_pipeline: MakePipeline) -> None:
    pipeline = make_pipeline([EvaluatorSpec(evapp_global)], max_queue_size=100_000)
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for _ in range(150):
            pipeline.tracer.start_span("s").end()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    pipeline.flush()
    assert wait_until(lambda: pipeline.processor.stats()["evaluated"] == 600, 60)
    stats = pipeline.processor.stats()
    assert stats["enqueued"] == 600 == stats["passed"] and stats["dropped"] == 0
    assert len(pipeline.spans()) == 600
