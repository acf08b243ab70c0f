"""replaced(): the field-by-field copy of a plain ReadableSpan equals the constructor's copy in everything read.

Both paths are run: the fast one (``span_fields.copy_span``/``new_event``, re-exported by ``deferred_attributes``),
and the constructor it falls back to when the running SDK's layout is not exactly the one the fast path writes
(simulated here). This file also runs in CI's oldest-versions step (OTel SDK at its floor).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from evaltrace._internal import span_fields
from evaltrace._internal.deferred_attributes import copy_span, new_event
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


def test_a_plain_span_takes_the_fast_path_on_this_sdk() -> None:
    # The SDKs we support (1.30 up) store exactly the fields the fast path writes: else it would never be used.
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS
    span = _plain()
    fast = copy_span(span, None, None, None, None)
    assert fast is not None
    _same(fast, _by_constructor(span))


@pytest.mark.parametrize("make", [_plain, _sdk_span], ids=["plain ReadableSpan", "SDK span"])
def test_with_the_fast_path_off_the_constructor_gives_the_same_copy(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(span_fields, "_SPAN_COPY_OK", False)
    span = make()
    assert copy_span(span, None, None, None, None) is None
    _same(replaced(span), _by_constructor(span))
    _same(replaced(span, attributes={"n": 1}), _by_constructor(span, attributes={"n": 1}))


def test_an_sdk_storing_one_more_span_field_takes_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._dropped_attributes = 7  # a future SDK's extra state (hypothetical)

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    # The guard compares with the fields the fast path writes, not with whatever the SDK stores: it is off here.
    assert span_fields._span_fields() != span_fields._SPAN_FIELDS
    span = _plain()
    assert copy_span(span, None, None, None, None) is None  # the span's own fields differ too
    copied = replaced(span, attributes={"b": 2})
    assert copied.__dict__["_dropped_attributes"] == 7  # was: the fast copy lacked the field (AttributeError)
    assert copied.__dict__.keys() == span.__dict__.keys()


def test_evaluation_events_are_the_constructors_events() -> None:
    assert span_fields._event_fields() == span_fields._EVENT_FIELDS
    attributes = {"gen_ai.evaluation.name": "x"}
    built, reference = (
        new_event("gen_ai.evaluation.result", attributes, 42),
        Event("gen_ai.evaluation.result", attributes, timestamp=42),
    )
    assert type(built) is Event
    assert vars(built) == vars(reference)
    assert (built.name, built.timestamp, built.attributes) == (
        reference.name,
        reference.timestamp,
        reference.attributes,
    )
    assert new_event("e", {}, None).timestamp > 0  # None: now, as the constructor does


def test_with_the_direct_event_off_events_come_from_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_init = Event.__init__
    made: list[Event] = []

    def init(self: Event, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Event, "__init__", init)
    monkeypatch.setattr(span_fields, "_EVENT_DIRECT_OK", False)
    built = new_event("gen_ai.evaluation.result", {"k": 1}, 42)
    assert made == [built]  # the constructor built it
    assert (built.name, built.timestamp, dict(built.attributes or {})) == ("gen_ai.evaluation.result", 42, {"k": 1})


def test_an_sdk_storing_one_more_event_field_takes_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_init = Event.__init__

    def init(self: Event, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._dropped = 0  # hypothetical

    monkeypatch.setattr(Event, "__init__", init)
    assert span_fields._event_fields() != span_fields._EVENT_FIELDS


# --- the evaluated span's enriched copy (evaluation/spans.py) reads the SDK span's fields directly -----------------


def _results() -> list[Any]:
    import datetime as dt

    from evaltrace._internal import semconv
    from evaltrace.schema import EvaluationResult

    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    plain = EvaluationResult(evaluator="cheap", passed=True, started_at=at, finished_at=at)
    judged = EvaluationResult(
        evaluator="judge",
        passed=False,
        started_at=at,
        finished_at=at,
        metadata={semconv.JUDGE_TRACE_ID_KEY: "0" * 31 + "f", semconv.JUDGE_SPAN_ID_KEY: "0" * 15 + "e"},
    )
    return [plain, judged]


class _ThroughProperties(ReadableSpan):
    """A subclass: its properties may differ from its fields, so the copy must read through them."""

    @property
    def attributes(self) -> Any:
        return {**(super().attributes or {}), "from.property": True}


@pytest.mark.parametrize("make", [_plain, _sdk_span], ids=["plain ReadableSpan", "SDK span"])
def test_the_enriched_copy_of_a_span_holds_what_its_properties_give_plus_the_results(make: Any) -> None:
    from evaltrace.evaluation.spans import enriched_copy

    span = make()
    results = _results()
    copied = enriched_copy(span, results)
    attributes = dict(copied.attributes or {})
    assert {k: v for k, v in attributes.items() if not k.startswith("evaltrace.eval.")} == dict(span.attributes or {})
    assert attributes["evaltrace.eval.cheap.passed"] is True and attributes["evaltrace.eval.judge.passed"] is False
    assert [e.name for e in copied.events] == [e.name for e in span.events] + ["gen_ai.evaluation.result"] * 2
    assert {e.timestamp for e in copied.events[len(span.events) :]} == {span.end_time}
    # Only the result with a judge trace adds a link, after the span's own.
    assert list(copied.links[: len(span.links)]) == list(span.links)
    (judge,) = copied.links[len(span.links) :]
    assert (judge.context.trace_id, judge.context.span_id) == (0xF, 0xE)
    assert copied.to_json() != span.to_json()


def test_the_enriched_copy_of_a_subclass_reads_its_properties() -> None:
    from evaltrace.evaluation.spans import enriched_copy

    span = _ThroughProperties.__new__(_ThroughProperties)
    span.__dict__.update(vars(_plain()))
    copied = enriched_copy(span, _results()[:1])
    assert (copied.attributes or {})["from.property"] is True  # read through the overriding property
    assert (copied.attributes or {})["evaltrace.eval.cheap.passed"] is True
    assert copied.links == span.links  # no judge, no link added


# --- what the SDK's span limits dropped stays on the copy (OTLP's dropped_*_count) -------------------------------


def _limited_sdk_span() -> ReadableSpan:
    """An SDK span over its limits (3 attributes, 1 event, 1 link): 3 attributes, 1 event and 1 link dropped."""
    from opentelemetry.sdk.trace import SpanLimits

    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3, max_events=1, max_links=1))
    other = SpanContext(trace_id=0xA1, span_id=0xD4, is_remote=True)
    with provider.get_tracer("t").start_as_current_span("limited", links=[Link(other), Link(other)]) as span:
        for n in range(6):
            span.set_attribute(f"a{n}", n)
        span.add_event("e1")
        span.add_event("e2")
    provider.shutdown()
    return span  # type: ignore[return-value]  # the SDK's Span: a ReadableSpan subclass


def _limited_plain() -> ReadableSpan:
    """A plain ``ReadableSpan`` holding the SDK's bounded containers over their caps (as a copy of a copy would)."""
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.util import BoundedList

    span = _plain()
    other = SpanContext(trace_id=0xA1, span_id=0xD4, is_remote=True)
    attributes = BoundedAttributes(3, {f"a{n}": n for n in range(6)}, immutable=True)
    events = BoundedList.from_seq(1, [Event("e1", timestamp=5), Event("e2", timestamp=6)])
    links = BoundedList.from_seq(1, [Link(other), Link(other)])
    return _by_constructor(span, attributes=attributes, events=events, links=links)


def _otlp_dropped(span: ReadableSpan) -> tuple[int, int, int]:
    """The span's dropped counts as the real OTLP exporter encodes them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    (encoded,) = [s for rs in encode_spans([span]).resource_spans for ss in rs.scope_spans for s in ss.spans]
    return encoded.dropped_attributes_count, encoded.dropped_events_count, encoded.dropped_links_count


@pytest.mark.parametrize(
    "make", [_limited_sdk_span, _limited_plain], ids=["SDK span (subclass)", "plain ReadableSpan (SDK class)"]
)
def test_the_enriched_copy_keeps_the_dropped_counts_otlp_exports(make: Any) -> None:
    """Before, the copy held a plain dict and lists: OTLP said 0/0/0 dropped where the original said 3/1/1."""
    from evaltrace.evaluation.spans import enriched_copy

    span = make()
    assert _otlp_dropped(span) == (3, 1, 1)
    copied = enriched_copy(span, _results())  # attributes, events and links all replaced (a judge link added)
    assert _otlp_dropped(copied) == (3, 1, 1)
    assert (copied.attributes or {})["evaltrace.eval.cheap.passed"] is True  # past the original's cap: not dropped
    assert [e.name for e in copied.events] == [e.name for e in span.events] + ["gen_ai.evaluation.result"] * 2
    assert len(copied.links) == len(span.links) + 1
    only_status = replaced(span, status=Status(StatusCode.OK))  # parts kept as they are keep their counts too
    assert _otlp_dropped(only_status) == (3, 1, 1)
    assert dict(only_status.attributes or {}) == dict(span.attributes or {})


def test_a_span_without_drops_keeps_the_fast_copy() -> None:
    """Only a span with a dropped count pays for the bounded containers: the usual plain span is copied as before."""
    span = _plain()
    assert copy_span(span, {"new": True}, None, None, None) is not None  # the field-by-field path, no containers
    assert _otlp_dropped(replaced(span, attributes={"new": True})) == (0, 0, 0)
    assert copy_span(_limited_plain(), None, None, None, None) is None  # counts to keep: the constructor's path


def test_the_evaluation_pipeline_exports_the_original_dropped_counts() -> None:
    """Through a real TracerProvider with span limits and the evaluation processor: the enriched span exported
    carries the original's dropped counts."""
    from opentelemetry.sdk.trace import SpanLimits

    from evaltrace.evaluation import EvaluatorSpec, evaluator
    from evaltrace.evaluation.processor import EvaluationSpanProcessor

    @evaluator(name="cheap")
    def cheap(trace: Any) -> bool:
        return True

    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    processor = EvaluationSpanProcessor(downstream=[SimpleSpanProcessor(exporter)], evaluators=[EvaluatorSpec(cheap)])
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3, max_events=1, max_links=1))
    provider.add_span_processor(SimpleSpanProcessor(raw))
    provider.add_span_processor(processor)
    other = SpanContext(trace_id=0xA1, span_id=0xD4, is_remote=True)
    with provider.get_tracer("t").start_as_current_span("s", links=[Link(other), Link(other)]) as span:
        for n in range(6):
            span.set_attribute(f"a{n}", n)
        span.add_event("e1")
        span.add_event("e2")
    assert processor.force_flush(10_000)
    ((original,), (enriched,)) = raw.get_finished_spans(), exporter.get_finished_spans()
    assert (enriched.attributes or {})["evaltrace.eval.cheap.passed"] is True
    assert _otlp_dropped(enriched) == _otlp_dropped(original) == (3, 1, 1)
    processor.shutdown()
    provider.shutdown()


# --- the layout probes: each fast path is on only when the SDK behaves as it assumes, not when the names match ---


def test_every_layout_probe_passes_on_this_sdk() -> None:
    # The SDKs we support (1.30 up: CI runs this file on both ends) take every fast path: else it is dead code.
    assert span_fields._plain_setattr_ok() and span_fields._PLAIN_SETATTR
    assert span_fields._event_direct_ok() and span_fields._EVENT_DIRECT_OK
    assert span_fields._span_read_ok() and span_fields.SPAN_READ_OK
    assert span_fields._span_copy_ok() and span_fields._SPAN_COPY_OK
    assert span_fields.DIRECT_COPY_OK


def test_an_sdk_storing_the_end_time_in_another_unit_turns_the_direct_reads_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Same field names (the old check passed), another meaning: the enriched copy read ``_end_time`` for its
    # events' timestamps and would have stamped them in microseconds.
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        if self._end_time is not None:
            self._end_time //= 1000

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    monkeypatch.setattr(
        ReadableSpan, "end_time", property(lambda self: None if self._end_time is None else self._end_time * 1000)
    )
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS  # the names alone say nothing changed
    assert not span_fields._span_read_ok()
    assert not span_fields._span_copy_ok()  # the copy's readers depend on those reads


def test_an_sdk_whose_events_property_returns_its_field_turns_the_copy_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # An SDK storing a tuple and returning the field as it is: the copy's list would come out as a mutable list.
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._events = tuple(self._events)

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    monkeypatch.setattr(ReadableSpan, "events", property(lambda self: self._events))
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS
    assert span_fields._span_read_ok()  # reading the field still gives the events
    assert not span_fields._span_copy_ok()  # but the field-by-field copy is not what the constructor builds


def test_an_sdk_setting_its_fields_in_another_order_turns_the_copy_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # An SDK whose constructor stores the attributes after the rest when there are several (hypothetical): the
    # field-by-field copy keeps the original's order, which is then not the order the constructor gives its span.
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        if len(self._attributes or {}) > 1:
            self.__dict__["_attributes"] = self.__dict__.pop("_attributes")

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS  # the same names
    assert span_fields._span_read_ok()  # every field reads as its property
    assert not span_fields._span_copy_ok()  # only the copies' field order differs from the constructor's


def test_an_sdk_whose_status_property_maps_the_code_turns_the_copy_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # An SDK storing OK and UNSET swapped and its property swapping them back (hypothetical): a copy storing the
    # given Status as it is reads as another code than the constructor's span.
    swap = {StatusCode.OK: StatusCode.UNSET, StatusCode.UNSET: StatusCode.OK, StatusCode.ERROR: StatusCode.ERROR}
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._status = Status(swap[self._status.status_code], self._status.description)

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    monkeypatch.setattr(
        ReadableSpan, "status", property(lambda self: Status(swap[self._status.status_code], self._status.description))
    )
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS
    assert span_fields._span_read_ok()
    assert not span_fields._span_copy_ok()  # the copy given Status(OK) reads UNSET


def test_an_sdk_whose_links_property_returns_a_list_turns_the_copy_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # An SDK storing its links as a list and returning the field as it is (hypothetical): the copy's tuple of the
    # original's links then reads as a tuple where the constructor's span gives a list.
    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._links = list(self._links)

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    monkeypatch.setattr(ReadableSpan, "links", property(lambda self: self._links))
    assert span_fields._span_fields() == span_fields._SPAN_FIELDS
    assert span_fields._span_read_ok()  # reading the field still gives the links
    assert not span_fields._span_copy_ok()  # but the copy's container is not the constructor's


def test_an_sdk_storing_event_times_in_another_unit_turns_the_direct_event_off(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk_init = Event.__init__

    def init(self: Event, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        self._timestamp //= 1000

    monkeypatch.setattr(Event, "__init__", init)
    monkeypatch.setattr(Event, "timestamp", property(lambda self: self._timestamp * 1000))
    assert span_fields._event_fields() == span_fields._EVENT_FIELDS
    assert not span_fields._event_direct_ok()


def test_a_class_with_its_own_setattr_turns_the_dict_store_off(monkeypatch: pytest.MonkeyPatch) -> None:
    def copying(self: object, name: str, value: Any) -> None:
        object.__setattr__(self, name, dict(value) if name == "__dict__" else value)

    monkeypatch.setattr(Event, "__setattr__", copying)
    assert not span_fields._plain_setattr_ok()


def test_on_an_sdk_whose_fields_mean_something_else_the_enriched_copy_reads_the_properties(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The end-time layout above, with the flags set as the probes answer for it: the copy's result events carry the
    # span's end time as its property gives it (was: ``_end_time`` read directly, microseconds taken for ns).
    from evaltrace.evaluation import spans as spans_module
    from evaltrace.evaluation.spans import enriched_copy

    sdk_init = ReadableSpan.__init__

    def init(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        sdk_init(self, *args, **kwargs)
        if self._end_time is not None:
            self._end_time //= 1000

    monkeypatch.setattr(ReadableSpan, "__init__", init)
    monkeypatch.setattr(
        ReadableSpan, "end_time", property(lambda self: None if self._end_time is None else self._end_time * 1000)
    )
    read_ok, copy_ok = span_fields._span_read_ok(), span_fields._span_copy_ok()
    assert not read_ok and not copy_ok
    monkeypatch.setattr(span_fields, "_SPAN_COPY_OK", copy_ok)
    monkeypatch.setattr(spans_module, "DIRECT_COPY_OK", False)
    monkeypatch.setattr(spans_module, "SPAN_READ_OK", read_ok)
    span = _plain()
    span.__dict__["_end_time"] = 1_700_000_000_000_000  # 1.7e18 ns, as this layout stores it (in microseconds)
    copied = enriched_copy(span, _results()[:1])
    assert span.end_time == 1_700_000_000_000_000_000
    assert [e.timestamp for e in copied.events[len(span.events) :]] == [span.end_time]
    assert copied.end_time == span.end_time
