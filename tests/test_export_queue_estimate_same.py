"""The export queue's size estimate (s18) gives exactly the figure the code before it gave, for every span.

``estimated_bytes`` now reads the SDK span's ``_attributes``/``_events`` fields and each SDK event's ``_attributes``
field (for the classes whose properties are exactly the SDK's, checked once in ``span_fields``) instead of going
through the properties, which wrapped the same values in a new ``MappingProxyType`` and a new tuple per span. The
code before it is kept here verbatim (``_reference_estimated_bytes``) and both are compared over the real pipeline's
spans (enriched copies included), spans ended through the real SDK (the live span object too), and odd ones: the same
figure, or a raise wherever the code before it raised (the exception type may differ for field contents no SDK makes; `_deliver` catches either). The queue's counts (``queued_bytes``, ``dropped_queue_bytes``...) follow from the
figure, and a queue run with each estimate over the same spans ends with the same counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.util import types

import evaltrace
from evaltrace._internal import export_queue as queue_module
from evaltrace._internal import span_fields
from evaltrace._internal.export_queue import (
    ATTRIBUTE_BYTES,
    EVENT_BYTES,
    SAMPLED_ITEMS,
    SPAN_BYTES,
    ExportQueue,
    estimated_bytes,
)
from evaltrace._internal.span_copy import replaced
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.schema import EvaluationResult, Trace


def _reference_estimated_bytes(span: ReadableSpan) -> int:
    """export_queue.estimated_bytes before s18, verbatim."""
    size = SPAN_BYTES
    attributes = span.attributes
    if attributes:
        size += _reference_mapping_bytes(attributes)
    events = span.events
    if events:
        for event in events:
            size += EVENT_BYTES
            if event.attributes:
                size += _reference_mapping_bytes(event.attributes)
    return size


def _reference_mapping_bytes(attributes: Mapping[str, Any]) -> int:
    """export_queue._mapping_bytes before s18, verbatim."""
    size = ATTRIBUTE_BYTES * len(attributes)
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            size += len(value)
        elif kind is tuple or kind is list:  # a sequence attribute: its strings count, other items 8 bytes each
            # Its first SAMPLED_ITEMS items stand for the rest: span end stays O(1) however long the list.
            count = len(value)
            sampled = 0
            for item in value[:SAMPLED_ITEMS]:
                sampled += len(item) if type(item) is str else 8
            size += sampled if count <= SAMPLED_ITEMS else sampled * count // SAMPLED_ITEMS
    return size


@evaluator(name="graded")
def graded(trace: Trace) -> EvaluationResult:
    text = str(trace.input.get("question"))
    if text.startswith("boom"):
        raise ValueError("broken evaluator")
    return EvaluationResult(evaluator="graded", passed="good" in text, score=0.5, reason=text * 3)


class _OwnParts(ReadableSpan):
    """A span class with its own ``attributes`` and ``events`` properties: the estimate must read through them."""

    @property
    def attributes(self) -> types.Attributes:
        return {"shown": "instead of the field"}

    @property
    def events(self) -> Sequence[Event]:
        return (Event("shown", {"k": "vvvv"}, timestamp=1),)


class _NoEvents(ReadableSpan):
    """A span class whose ``events`` property answers None: the estimate skipped it, and still does."""

    @property
    def events(self) -> Sequence[Event]:
        return None  # type: ignore[return-value]


class _OwnEvent(Event):
    """An event class with its own ``attributes`` property: read through it."""

    @property
    def attributes(self) -> types.Attributes:
        return {"event": "own property", "n": 3}


_CONTEXT = SpanContext(1, 2, False, TraceFlags(TraceFlags.SAMPLED))
_RESOURCE = Resource({"service.name": "estimate"})


def _pipeline_spans() -> list[ReadableSpan]:
    """What the real pipeline hands its exporters: evaluated spans' enriched copies and plain spans."""
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "estimate-same", exporters=[exporter], local_store=False, batch=False, capture_content=True, sinks=[],
        evaluators=[EvaluatorSpec(graded, span_kinds={"agent"})],
    )  # fmt: skip
    try:

        @evaltrace.tool
        def search(docs: list[str], ids: tuple[int, ...]) -> list[str]:
            return [doc.upper() for doc in docs]

        @evaltrace.agent
        def ask(question: str) -> str:
            search(["d" * 30] * 40, (1, 2, 3))
            return "answer to " + question

        for question in ("good answer", "bad answer", "boom now", "x" * 500):
            ask(question)
        handle.force_flush()
        finished = list(exporter.get_finished_spans())
    finally:
        handle.shutdown()
    assert any("evaltrace.eval.graded.outcome" in (span.attributes or {}) for span in finished)
    assert any(span.events for span in finished)
    return finished


def _sdk_spans() -> list[ReadableSpan]:
    """Spans ended through the real SDK: what ``on_end`` is handed, and the live span object itself."""
    got: list[ReadableSpan] = []

    class _Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            got.append(span)

    provider = TracerProvider(resource=_RESOURCE)
    provider.add_span_processor(_Keep())
    tracer = provider.get_tracer("estimate")
    live = []
    for index in range(4):
        span = tracer.start_span(f"sdk {index}", attributes={"a": "x" * index, "n": index})
        if index % 2:
            span.add_event("e", {"text": "t" * 50, "list": ["a", "bb"]})
            span.add_event("bare")
        span.set_attribute("tuple", ("one", "two"))
        span.end()
        live.append(span)
    return [*got, *live]  # type: ignore[list-item]


def _odd_spans(base: ReadableSpan) -> Iterator[ReadableSpan]:
    """Shapes the pipeline does not make but a span may take."""
    event = Event("e", {"x": "y" * 9}, timestamp=3)
    yield ReadableSpan(name="bare", context=_CONTEXT)  # no attributes, no events
    yield ReadableSpan(name="empty", context=_CONTEXT, attributes={}, events=[])
    yield ReadableSpan(name="none", context=_CONTEXT, attributes=None, events=())
    yield ReadableSpan(name="bounded", context=_CONTEXT, attributes=BoundedAttributes(2, {"a": "aa", "b": "bbb"}),
                       events=BoundedList.from_seq(2, [event, event, event]))  # fmt: skip
    yield ReadableSpan(name="proxy", context=_CONTEXT, attributes=MappingProxyType({"p": "q" * 7}), events=(event,))  # type: ignore[arg-type]
    yield ReadableSpan(name="long list", context=_CONTEXT, attributes={"l": ["z" * 5] * 1000, "m": list(range(40))})
    yield ReadableSpan(name="event attrs none", context=_CONTEXT, events=[Event("n", None, timestamp=1)])
    yield ReadableSpan(name="event attrs empty", context=_CONTEXT, events=[Event("n", {}, timestamp=1)])
    yield ReadableSpan(name="event bounded", context=_CONTEXT,
                       events=[Event("b", BoundedAttributes(1, {"a": "1", "b": "22"}), timestamp=1)])  # fmt: skip
    yield ReadableSpan(name="own event", context=_CONTEXT, events=[_OwnEvent("o", {"hidden": "h" * 99}, timestamp=1)])
    yield _OwnParts(name="own parts", context=_CONTEXT, attributes={"hidden": "h" * 99}, events=[event])
    yield _NoEvents(name="no events", context=_CONTEXT, attributes={"a": "b"})
    yield replaced(base, attributes={**dict(base.attributes or {}), "extra": "e" * 33})
    mapped = replaced(base)
    mapped.__dict__["_attributes"] = MappingProxyType(dict(base.attributes or {}))
    yield mapped
    generated = ReadableSpan(name="generator events", context=_CONTEXT)
    generated.__dict__["_events"] = (e for e in [event, event])  # consumed by the first read, in both
    yield generated


def _outcome(estimate: Any, span: ReadableSpan) -> tuple[str, object]:
    try:
        return ("value", estimate(span))
    except Exception as exc:  # the same failure (on_end's caller logs it, the span is not queued)
        return ("raised", type(exc))


def test_the_estimate_is_the_figure_the_code_before_it_gave_for_every_span() -> None:
    assert ReadableSpan in span_fields.DIRECT_PARTS_TYPES  # the fast read is what runs on this SDK
    assert span_fields.DIRECT_EVENT_TYPE is Event
    pipeline = _pipeline_spans()
    spans = [*pipeline, *_sdk_spans(), *_odd_spans(pipeline[0])]
    compared = 0
    for span in spans:
        if span.name == "generator events":  # one read consumes it: compare each on its own fresh copy
            twin = ReadableSpan(name="generator events", context=_CONTEXT)
            event = next(iter(span.__dict__["_events"]))
            span.__dict__["_events"] = (e for e in [event, event])
            twin.__dict__["_events"] = (e for e in [event, event])
            assert _outcome(estimated_bytes, span) == _outcome(_reference_estimated_bytes, twin)
            continue
        assert _outcome(estimated_bytes, span) == _outcome(_reference_estimated_bytes, span), span.name
        compared += 1
    assert compared >= len(pipeline) + 10


def test_a_span_whose_events_field_is_none_raises_as_before() -> None:
    # tuple(None) in the SDK's property raised TypeError; the loop over the field raises it too.
    span = ReadableSpan(name="broken", context=_CONTEXT, attributes={"a": "b"})
    span.__dict__["_events"] = None
    assert _outcome(estimated_bytes, span) == _outcome(_reference_estimated_bytes, span) == ("raised", TypeError)
    span.__dict__["_attributes"] = ["not", "a", "mapping"]  # the property's MappingProxyType refused it
    assert _outcome(estimated_bytes, span)[0] == _outcome(_reference_estimated_bytes, span)[0] == "raised"


class _Counting:
    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _run_queue(spans: list[ReadableSpan], max_bytes: int) -> list[dict[str, int]]:
    queue = ExportQueue(_Counting(), "same", max_queue_bytes=max_bytes, schedule_delay_s=3600, max_batch_size=10_000)  # type: ignore[arg-type]
    seen = []
    for span in spans:
        queue.on_end(span)
        seen.append(queue.stats())
    queue.force_flush()
    seen.append(queue.stats())
    queue.shutdown()
    seen.append(queue.stats())
    return seen


@pytest.mark.parametrize("max_bytes", [0, 6_000, 20_000, 10**9])
def test_a_queue_counts_the_same_with_either_estimate(monkeypatch: pytest.MonkeyPatch, max_bytes: int) -> None:
    # Byte bounds that drop some spans (dropped_queue_bytes) and none: the counts after every on_end, the flush and
    # the shutdown, queued_bytes included, are the same with the estimate before s18.
    pipeline = _pipeline_spans()
    spans = [*pipeline, *_sdk_spans(), *(s for s in _odd_spans(pipeline[0]) if s.name != "generator events")] * 2
    new = _run_queue(spans, max_bytes)
    monkeypatch.setattr(queue_module, "estimated_bytes", _reference_estimated_bytes)
    old = _run_queue(spans, max_bytes)
    assert new == old
    if max_bytes == 6_000:
        assert old[-1]["dropped_queue_bytes"] > 0  # the bound bit


def test_an_sdk_whose_properties_differ_is_read_through_its_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    # The direct reads are only for classes whose properties are exactly the ones the check saw: an SDK whose span
    # or event properties change (wrapping, filtering) must turn the direct path off, class by class.
    import opentelemetry.sdk.trace as sdk_trace

    from evaltrace._internal import span_fields

    assert sdk_trace.ReadableSpan in span_fields._direct_parts_types()
    assert span_fields._direct_event_type() is sdk_trace.Event

    monkeypatch.setattr(sdk_trace._Span, "events", property(lambda self: tuple(self._events)), raising=False)
    kinds = span_fields._direct_parts_types()
    assert sdk_trace._Span not in kinds and sdk_trace.ReadableSpan in kinds
    monkeypatch.undo()

    monkeypatch.setattr(sdk_trace.ReadableSpan, "attributes", property(lambda self: dict(self._attributes or {})))
    assert span_fields._direct_parts_types() == frozenset()
    monkeypatch.undo()

    monkeypatch.setattr(sdk_trace.Event, "attributes", property(lambda self: MappingProxyType(self._attributes or {})))
    assert span_fields._direct_event_type() is None
    monkeypatch.undo()
    assert span_fields._direct_event_type() is sdk_trace.Event


class _BrokenValues(dict[str, Any]):
    """A mapping whose values cannot be read: the estimate raises what it raised (after ``len``, as before)."""

    def values(self) -> Any:
        raise RuntimeError("values")


class _BrokenLength(dict[str, Any]):
    def __len__(self) -> int:
        raise RuntimeError("len")


class _BrokenBoth(_BrokenValues):
    """Both raise: ``len`` is read first, as before, so its error is the one seen."""

    def __len__(self) -> int:
        raise RuntimeError("len")


def test_the_attribute_sum_started_from_zero_is_the_figure_before_it() -> None:
    # s20-evcopy2: _mapping_bytes adds ATTRIBUTE_BYTES * len(attributes) after the values' loop instead of before it
    # (a running sum under 257 is a cached small int: no int object allocated and freed per ``+=``). The figure is the
    # same for sums on either side of that bound, for every value kind, and the same failures in the same order.
    from evaltrace._internal.span_size import _mapping_bytes

    values: list[Any] = [
        "", "a", "x" * 100, "y" * 300, "é" * 7, 0, 1, 3.5, True, False, None, b"bytes", ("a", "bc"), ["d", 1, 2.0],
        tuple("z" * 40 for _ in range(SAMPLED_ITEMS + 5)), ["w" * 500] * (SAMPLED_ITEMS * 3 + 1), [], (), [True] * 17,
    ]  # fmt: skip
    mappings: list[Mapping[str, Any]] = [{}, {"only": "v"}, MappingProxyType({"p": "q" * 260})]
    mappings += [{f"k{i}": value for i, value in enumerate(values[start:])} for start in range(len(values))]
    mappings += [{f"k{i}": value for i, value in enumerate(reversed(values[:stop]))} for stop in range(len(values))]
    mappings += [
        {f"k{i}": "s" * length for i in range(count)} for length in (1, 9, 64, 255, 256) for count in (1, 3, 40, 100)
    ]
    mappings.append(BoundedAttributes(4, {"a": "b" * 250, "c": "d" * 10, "e": 1.0}))
    for mapping in mappings:
        assert _mapping_bytes(mapping) == _reference_mapping_bytes(mapping), mapping
        assert type(_mapping_bytes(mapping)) is int
    for broken in (_BrokenValues(a="b"), _BrokenLength(a="b"), _BrokenBoth(a="b")):
        with pytest.raises(RuntimeError) as new:
            _mapping_bytes(broken)
        with pytest.raises(RuntimeError) as old:
            _reference_mapping_bytes(broken)
        assert str(new.value) == str(old.value)
