"""replaced(): the slot-by-slot copy of a plain ReadableSpan equals the constructor's copy in everything read."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from evaltrace._internal.span_copy import replaced

_READ = (
    "name",
    "context",
    "parent",
    "kind",
    "start_time",
    "end_time",
    "status",
    "resource",
    "instrumentation_scope",
    "dropped_attributes",
    "dropped_events",
    "dropped_links",
)


def _plain() -> ReadableSpan:
    context = SpanContext(trace_id=0xA1, span_id=0xB2, is_remote=False)
    parent = SpanContext(trace_id=0xA1, span_id=0xC3, is_remote=False)
    return ReadableSpan(
        name="agent",
        context=context,
        parent=parent,
        resource=Resource({"service.name": "svc"}),
        attributes={"input.value": '{"q":1}', "k": 2},
        events=[Event("e", {"a": 1}, timestamp=5)],
        links=[Link(parent, {"l": 1})],
        kind=SpanKind.SERVER,
        status=Status(StatusCode.ERROR, "boom"),
        start_time=10,
        end_time=20,
        instrumentation_scope=InstrumentationScope("scope", "1.0"),
    )


def _sdk_span() -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("sdk", attributes={"x": 1}) as span:
        span.add_event("e")
    provider.shutdown()
    return span  # type: ignore[return-value]  # the SDK's Span: a ReadableSpan subclass


def _by_constructor(span: ReadableSpan, **parts: Any) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes=parts.get("attributes", span.attributes),
        events=parts.get("events", span.events),
        links=parts.get("links", span.links),
        kind=span.kind,
        status=parts.get("status", span.status),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _same(copied: ReadableSpan, reference: ReadableSpan) -> None:
    assert type(copied) is ReadableSpan
    for name in _READ:
        assert getattr(copied, name) == getattr(reference, name), name
    assert copied.get_span_context() == reference.get_span_context()
    assert copied.__dict__.keys() == reference.__dict__.keys()
    assert copied.__dict__.get("_instrumentation_info") is reference.__dict__.get("_instrumentation_info") is None
    assert dict(copied.attributes or {}) == dict(reference.attributes or {})
    assert type(copied.attributes) is type(reference.attributes)
    assert [(e.name, dict(e.attributes or {}), e.timestamp) for e in copied.events] == [
        (e.name, dict(e.attributes or {}), e.timestamp) for e in reference.events
    ]
    assert copied.links == reference.links
    assert copied.to_json() == reference.to_json()


@pytest.mark.parametrize("make", [_plain, _sdk_span], ids=["plain ReadableSpan", "SDK span (constructor path)"])
def test_copy_keeps_every_part(make: Any) -> None:
    span = make()
    _same(replaced(span), _by_constructor(span))


@pytest.mark.parametrize("make", [_plain, _sdk_span], ids=["plain ReadableSpan", "SDK span (constructor path)"])
def test_copy_replaces_the_given_parts_only(make: Any) -> None:
    span = make()
    parts: dict[str, Any] = {
        "attributes": {"new": True},
        "events": [Event("added", {}, timestamp=7)],
        "links": [],
        "status": Status(StatusCode.OK),
    }
    copied = replaced(span, **parts)
    _same(copied, _by_constructor(span, **parts))
    assert dict(copied.attributes or {}) == {"new": True}
    assert dict(span.attributes or {}) != {"new": True}  # the original is untouched


def test_a_subclass_takes_the_constructor() -> None:
    class Renamed(ReadableSpan):
        @property
        def name(self) -> str:
            return "renamed"

    original = _plain()
    span = Renamed.__new__(Renamed)
    span.__dict__.update(vars(original))
    copied = replaced(span)
    assert type(copied) is ReadableSpan and copied.name == "renamed"


def test_evaluation_events_are_the_constructors_events() -> None:
    from evaltrace.evaluation.spans import _event

    attributes = {"gen_ai.evaluation.name": "x"}
    built, reference = (
        _event("gen_ai.evaluation.result", attributes, 42),
        Event("gen_ai.evaluation.result", attributes, timestamp=42),
    )
    assert type(built) is Event
    assert vars(built) == vars(reference)
    assert (built.name, built.timestamp, built.attributes) == (
        reference.name,
        reference.timestamp,
        reference.attributes,
    )
    assert _event("e", {}, None).timestamp > 0  # None: now, as the constructor does
