"""The fused enriched copy (s16) builds exactly the span the code before it built.

``enriched_copy`` now reads a plain ``ReadableSpan``'s parts through ``span_fields.plain_state`` (one exact-fields
check instead of two keys-view comparisons), writes the ``evaltrace.eval.*`` attributes straight into the copy's
attributes and builds each event's attributes in the same pass (``_enrich.enrich_attributes``, reading an exact
``EvaluationResult``'s ``__dict__`` once), and sets the copy's and the events' instance dicts by a store to
``__dict__``. The code before it is kept here verbatim (``_reference_enriched_copy`` with the ``copy_span`` and
``new_event`` it called) and both are compared over real pipeline spans and every kind of result: the same instance
fields in the same order, the same attribute keys in the same order with equal values of the same types, the same
events (class, name, timestamp, attributes) in the same order, the same links, the same container types.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Status

import evaltrace
from evaltrace._internal import semconv, settings
from evaltrace._internal import span_fields as fields_module
from evaltrace._internal.span_copy import replaced
from evaltrace.evaluation import EvaluatorSpec, SkipEvaluation, evaluator
from evaltrace.evaluation._enrich import enrich_attributes
from evaltrace.evaluation.convert import evaluation_event_attributes, span_result_attributes
from evaltrace.evaluation.runner import failed_result, skipped_result
from evaltrace.evaluation.spans import enriched_copy as new_enriched_copy
from evaltrace.evaluation.spans import judge_link
from evaltrace.schema import EvaluationResult, Trace
from evaltrace.schema.trace import TraceError

_READ_FIELDS = frozenset(("_attributes", "_events", "_end_time"))


def _reference_copy_span(
    span: ReadableSpan,
    attributes: Mapping[str, Any] | None,
    events: Sequence[Event] | None,
    links: Sequence[Link] | None,
    status: Status | None,
) -> ReadableSpan | None:
    """span_fields.copy_span before s16, verbatim."""
    if not fields_module._SPAN_COPY_OK or type(span) is not ReadableSpan:
        return None
    state = span.__dict__
    if state.keys() != fields_module._SPAN_FIELDS or state["_resource"] is None:
        return None
    if (
        type(state["_attributes"]) is BoundedAttributes
        or type(state["_events"]) is BoundedList
        or type(state["_links"]) is BoundedList
    ):
        return None
    fields = state.copy()
    fields["_instrumentation_info"] = None
    fields["_attributes"] = MappingProxyType(state["_attributes"] or {}) if attributes is None else attributes
    fields["_events"] = tuple(state["_events"]) if events is None else events
    fields["_links"] = tuple(state["_links"]) if links is None else links
    if status is not None:
        fields["_status"] = status
    copy = object.__new__(ReadableSpan)
    object.__setattr__(copy, "__dict__", fields)
    return copy


def _reference_new_event(name: str, attributes: dict[str, Any], timestamp: int | None) -> Event:
    """span_fields.new_event before s16, verbatim."""
    if not fields_module._EVENT_DIRECT_OK or timestamp is None:
        return Event(name, attributes, timestamp=timestamp)
    event = object.__new__(Event)
    object.__setattr__(event, "__dict__", {"_name": name, "_timestamp": timestamp, "_attributes": attributes})
    return event


def _reference_enriched_copy(
    span: ReadableSpan, results: Sequence[EvaluationResult], *, provenance: bool = False
) -> ReadableSpan:
    """spans.enriched_copy before s16, verbatim (with the reference copy_span and new_event)."""
    state = span.__dict__
    if type(span) is ReadableSpan and _READ_FIELDS <= state.keys():
        attributes = dict(state["_attributes"] or {})
        events = list(state["_events"])
        end = state["_end_time"]
    else:
        attributes = dict(span.attributes or {})
        events = list(span.events)
        end = span.end_time
    response_id = attributes.get(semconv.GEN_AI_RESPONSE_ID)
    if not isinstance(response_id, str) or not response_id:
        response_id = None
    attributes.update(span_result_attributes(results))
    judges: list[Link] = []
    for result in results:
        event_attributes = evaluation_event_attributes(result, response_id, provenance=provenance)
        events.append(_reference_new_event(semconv.GEN_AI_EVALUATION_RESULT_EVENT, event_attributes, end))
        if result.metadata and (link := judge_link(result)) is not None:
            judges.append(link)
    if judges:
        return replaced(span, attributes=attributes, events=events, links=[*span.links, *judges])
    copy = _reference_copy_span(span, attributes, events, None, None)
    return copy if copy is not None else replaced(span, attributes=attributes, events=events)


def _same_items(built: Mapping[str, Any] | None, reference: Mapping[str, Any] | None) -> None:
    assert type(built) is type(reference)
    if reference is None:
        return
    assert list(built.items()) == list(reference.items())  # type: ignore[union-attr]
    assert [type(v) for v in built.values()] == [type(v) for v in reference.values()]  # type: ignore[union-attr]


def _same_span(built: ReadableSpan, reference: ReadableSpan) -> None:
    """The same class, the same instance fields in the same order, every part equal and of the same type."""
    assert type(built) is type(reference)
    new, old = built.__dict__, reference.__dict__
    assert list(new) == list(old)
    for key, value in old.items():
        if key == "_attributes":
            _same_items(new[key], value)
        elif key == "_events":
            assert type(new[key]) is type(value) and len(new[key]) == len(value)
            for event, before in zip(new[key], value, strict=True):
                assert type(event) is type(before)
                assert list(vars(event)) == list(vars(before))
                assert event.name == before.name
                if old["_end_time"] is not None:  # else "now" for both, taken at two moments
                    assert event.timestamp == before.timestamp
                assert type(event.timestamp) is type(before.timestamp)
                _same_items(event.attributes, before.attributes)
        elif key == "_links":
            assert type(new[key]) is type(value)
            assert [(link.context, dict(link.attributes or {})) for link in new[key]] == [
                (link.context, dict(link.attributes or {})) for link in value
            ]
        else:
            assert new[key] == value and type(new[key]) is type(value), key
    # What exporters read through the public properties, too.
    assert built.dropped_attributes == reference.dropped_attributes
    assert built.dropped_events == reference.dropped_events
    assert built.dropped_links == reference.dropped_links


class _UserResult(EvaluationResult):
    """A user's subclass of EvaluationResult (read through its attributes, never its ``__dict__``)."""

    @property
    def latency_ms(self) -> int:  # type: ignore[override]
        return 7


class _ExtraResult(EvaluationResult):
    """A subclass whose pydantic config keeps extra fields (they live in ``__pydantic_extra__``)."""

    model_config = {"extra": "allow"}


JUDGE = type("E", (), {"name": "judge", "version": "2"})()
JUDGED_META = {semconv.JUDGE_TRACE_ID_KEY: "ab" * 16, semconv.JUDGE_SPAN_ID_KEY: "cd" * 8}

KINDS: list[EvaluationResult] = [
    EvaluationResult(evaluator="a", passed=True),
    EvaluationResult(evaluator="b", passed=False, score=0.25, reason="too short"),
    EvaluationResult(evaluator="c", passed=True, detail={"label": "polite"}, reason="polite", score=1),
    EvaluationResult(evaluator="d", passed=False, detail={"label": ""}),
    EvaluationResult(evaluator="e", passed=True, detail={"label": 3}, metadata={semconv.JUDGE_TRACE_ID_KEY: "ab" * 16}),
    EvaluationResult(evaluator="f", passed=True, metadata={"other": 1}, evaluator_version="1.2", evaluator_type="llm"),
    EvaluationResult(evaluator="j", passed=False, score=0.5, metadata=JUDGED_META, evaluator_version="3"),
    EvaluationResult(evaluator="k", passed=True, metadata={semconv.JUDGE_TRACE_ID_KEY: "zz", "judge_span_id": "q"}),
    EvaluationResult(evaluator="g", passed=True, score=1, status="pending"),
    EvaluationResult(evaluator="h", passed=True, reason="x" * 5000, detail={"label": "y" * 5000}),
    EvaluationResult(evaluator="a", passed=False, score=0.0, error=TraceError(type="timeout", message="late")),
    failed_result(JUDGE, "TimeoutError", "slow", timeout=True),
    failed_result(JUDGE, "ValueError", "bug"),
    skipped_result(JUDGE, "no expected answer"),
    skipped_result(JUDGE, semconv.SKIP_NO_ANSWER),
    EvaluationResult(evaluator="s", status="skipped", passed=False),
    EvaluationResult(evaluator="s", status="skipped", passed=True, reason="y" * 5000),
    _UserResult(evaluator="user", passed=False, score=0.3, reason="theirs", metadata=JUDGED_META),
    _ExtraResult(evaluator="extra", passed=True, score=0.9, surplus="kept aside"),  # type: ignore[call-arg]
    EvaluationResult.model_construct(evaluator="bare", passed=True, status="completed", detail={}, metadata=None),
]


@pytest.fixture(autouse=True)
def _short_cap() -> Iterator[None]:
    saved = settings.current
    settings.current = dataclasses.replace(settings.current, max_attribute_length=120)
    try:
        yield
    finally:
        settings.current = saved


@evaluator(name="graded")
def graded(trace: Trace) -> EvaluationResult:
    text = str(trace.input.get("question"))
    if text.startswith("skip"):
        raise SkipEvaluation("no_reference")
    if text.startswith("boom"):
        raise ValueError("broken evaluator")
    return EvaluationResult(evaluator="graded", passed="good" in text, score=0.75 if "good" in text else 0.1,
                            reason=text, detail={"label": "fine"} if "label" in text else {})  # fmt: skip


@evaluator(name="plain")
def plain(trace: Trace) -> bool:
    return "good" in str(trace.input.get("question"))


QUESTIONS = ["good answer", "bad answer", "good label", "skip me", "boom now", "x" * 400]


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    """Real spans of the real pipeline (evaluated, plain, with and without gen_ai.response.id), and odd ones."""
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        "enriched-fused", exporters=[exporter], local_store=False, batch=False, capture_content=True, sinks=[],
        evaluators=[EvaluatorSpec(graded, span_kinds={"agent"}), EvaluatorSpec(plain, span_kinds={"agent"})],
    )  # fmt: skip
    try:

        @evaltrace.agent
        def ask(question: str) -> str:
            return "answer to " + question

        for question in QUESTIONS:
            ask(question)
        handle.force_flush()
        finished = list(exporter.get_finished_spans())
    finally:
        handle.shutdown()
    assert any("evaltrace.eval.graded.outcome" in (s.attributes or {}) for s in finished)
    base = finished[0]
    odd = [
        replaced(base, attributes={**dict(base.attributes or {}), semconv.GEN_AI_RESPONSE_ID: "chatcmpl-1"}),
        replaced(base, attributes={**dict(base.attributes or {}), semconv.GEN_AI_RESPONSE_ID: ""}),
        replaced(base, attributes={**dict(base.attributes or {}), semconv.GEN_AI_RESPONSE_ID: 7}),
        replaced(base, attributes={}),
        ReadableSpan(name="bare", context=base.context, end_time=5),  # no resource argument: the SDK's own
        ReadableSpan(
            name="bounded",
            context=base.context,
            resource=base.resource,
            end_time=9,
            attributes=BoundedAttributes(1, {"a": 1, "b": 2}),
            events=BoundedList.from_seq(1, []),
        ),  # fmt: skip
        ReadableSpan(name="no end", context=base.context, resource=base.resource, attributes={"x": 1}),
        replaced(base, links=[Link(base.context, {"kept": True})]),
    ]
    extra_field = replaced(base)
    extra_field.__dict__["_extra"] = 1  # a field the SDK does not set: the constructor's path, as before
    mapped = replaced(base)
    mapped.__dict__["_attributes"] = MappingProxyType(dict(base.attributes or {}))
    return [*finished, *odd, extra_field, mapped]


@pytest.mark.parametrize("provenance", [False, True])
def test_the_fused_copy_is_the_copy_built_before_for_every_span_and_result(
    spans: list[ReadableSpan], provenance: bool
) -> None:
    cases = [[], *([kind] for kind in KINDS), *itertools.combinations(KINDS, 2), KINDS, KINDS[::-1]]
    for span in spans:
        state = span.__dict__
        attributes_before = list((span.attributes or {}).items())
        events_before = [(event.name, event.timestamp, dict(event.attributes or {})) for event in span.events]
        for results in cases:
            copy = new_enriched_copy(span, results, provenance=provenance)
            _same_span(copy, _reference_enriched_copy(span, results, provenance=provenance))
            # The original is left as it was, and the copy shares none of its containers (the results are written
            # into the copy's own attribute dict and event list).
            assert list((span.attributes or {}).items()) == attributes_before
            assert [(event.name, event.timestamp, dict(event.attributes or {})) for event in span.events] == (
                events_before
            )
            assert copy.__dict__["_attributes"] is not state.get("_attributes")
            assert copy.__dict__["_events"] is not state.get("_events")


def test_a_span_without_a_resource_gets_the_sdks_default_resource_as_before(spans: list[ReadableSpan]) -> None:
    # Not copied field by field (a copy would hold None): the constructor's path gives the SDK's empty resource.
    bare = replaced(spans[0])
    bare.__dict__["_resource"] = None
    for results in ([], KINDS[:3]):
        copy = new_enriched_copy(bare, results)
        assert copy.resource is not None
        assert copy.resource.attributes == _reference_enriched_copy(bare, results).resource.attributes


def test_the_fused_builders_write_what_the_two_builders_wrote() -> None:
    for response_id, provenance in itertools.product((None, "resp-1"), (False, True)):
        for results in [*([kind] for kind in KINDS), *itertools.permutations(KINDS[:8], 3), KINDS]:
            base = {"evaltrace.eval.a.outcome": "old", "other": 1}
            fused = dict(base)
            events = enrich_attributes(fused, results, response_id, provenance)
            reference = dict(base)
            reference.update(span_result_attributes(results))
            _same_items(fused, reference)
            assert len(events) == len(results)
            for built, result in zip(events, results, strict=True):
                _same_items(built, evaluation_event_attributes(result, response_id, provenance=provenance))


def test_a_result_missing_a_field_fails_as_it_did_before(spans: list[ReadableSpan]) -> None:
    broken = EvaluationResult.model_construct(evaluator="broken", status="completed")  # no ``passed``, no ``detail``
    with pytest.raises(AttributeError):
        _reference_enriched_copy(spans[0], [broken])
    with pytest.raises(AttributeError):
        new_enriched_copy(spans[0], [broken])


def test_the_judge_link_is_added_after_the_spans_own_links(spans: list[ReadableSpan]) -> None:
    linked = replaced(spans[0], links=[Link(spans[0].context, {"kept": True})])
    judged = [result for result in KINDS if result.metadata == JUDGED_META]
    copy = new_enriched_copy(linked, judged)
    assert [dict(link.attributes or {}) for link in copy.links] == [
        {"kept": True},
        *({semconv.EVALTRACE_JUDGE_EVALUATOR: result.evaluator} for result in judged),
    ]


def test_a_span_with_its_fields_in_another_order_still_takes_the_field_by_field_copy(spans: list[ReadableSpan]) -> None:
    # plain_state tries the constructor's field order first, then the set comparison copy_span made: same answer.
    span = replaced(spans[0])
    span.__dict__ = dict(reversed(list(span.__dict__.items())))
    assert fields_module.plain_state(span) is span.__dict__
    assert _reference_copy_span(span, None, None, None, None) is not None
    for results in ([], KINDS[:3], KINDS):
        _same_span(new_enriched_copy(span, results), _reference_enriched_copy(span, results))
    span.__dict__["_extra"] = 1  # one field more, in any order: neither copies it field by field
    assert fields_module.plain_state(span) is None
    assert _reference_copy_span(span, None, None, None, None) is None
    _same_span(new_enriched_copy(span, KINDS[:3]), _reference_enriched_copy(span, KINDS[:3]))


# --- s20-evcopy2: plain_state(), new_event() and copy_state() inline in enriched_copy --------------------------------


def _s19_enriched_copy(
    span: ReadableSpan, results: Sequence[EvaluationResult], *, provenance: bool = False
) -> ReadableSpan:
    """spans.enriched_copy before s20-evcopy2, verbatim (its helpers, unchanged, from span_fields)."""
    # The span's attributes are read once and the events built in place: this runs once per evaluated span.
    state = fields_module.plain_state(span)  # the copy's fields below come from it: its parts are read there directly
    if state is not None:
        held = state["_attributes"]
        attributes = held.copy() if type(held) is dict else dict(held or {})
        events = [*state["_events"]]
        end = state["_end_time"]
    else:
        state = span.__dict__
        if type(span) is ReadableSpan and _READ_FIELDS <= state.keys():
            # What the SDK's own properties return (a view of the attributes, a tuple of the events), without their
            # frames and containers: copied below all the same.
            attributes = dict(state["_attributes"] or {})
            events = list(state["_events"])
            end = state["_end_time"]
        else:  # a subclass may override the properties: read through them
            attributes = dict(span.attributes or {})
            events = list(span.events)
            end = span.end_time
        state = None
    response_id = attributes.get(semconv.GEN_AI_RESPONSE_ID)  # response_id_of(original), without its call
    if response_id is not None and (not isinstance(response_id, str) or not response_id):
        response_id = None
    # span_result_attributes() written into the copy's attributes, and each result's event attributes: one pass.
    built = enrich_attributes(attributes, results, response_id, provenance)
    judged = False
    for event_attributes in built:
        events.append(fields_module.new_event(semconv.GEN_AI_EVALUATION_RESULT_EVENT, event_attributes, end))
        # A judge link needs the judge trace id the event carries (judge_link reads it there too).
        if semconv.EVALTRACE_JUDGE_TRACE_ID in event_attributes:
            judged = True
    if judged:  # a second pass only then (zip's keyword call alone was ~2k instructions per span)
        judges = [
            link
            for result, event_attributes in zip(results, built, strict=True)
            if semconv.EVALTRACE_JUDGE_TRACE_ID in event_attributes and (link := judge_link(result)) is not None
        ]
        if judges:
            return replaced(span, attributes=attributes, events=events, links=[*span.links, *judges])
    if state is not None:  # copy_span() of it, without its checks made again
        return fields_module.copy_state(state, attributes, events)
    copy = fields_module.copy_span(span, attributes, events, None, None)
    return copy if copy is not None else replaced(span, attributes=attributes, events=events)


def _s19_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The module's spans and the shapes the inline path checks one by one (each falls back as plain_state did)."""
    base = spans[0]
    reordered = replaced(base)
    reordered.__dict__ = dict(reversed(list(reordered.__dict__.items())))
    no_resource = replaced(base)
    no_resource.__dict__["_resource"] = None
    no_end = replaced(base)
    no_end.__dict__["_end_time"] = None  # plain otherwise: the events' time is "now", through Event's constructor
    listed_links = replaced(base, links=[Link(base.context, {"kept": True})])
    listed_links.__dict__["_links"] = [Link(base.context, {"kept": True})]  # a list: tuple() of it, as copy_state
    bounded_links = replaced(base)
    bounded_links.__dict__["_links"] = BoundedList.from_seq(2, [Link(base.context)])
    bounded_events = replaced(base)
    bounded_events.__dict__["_events"] = BoundedList.from_seq(2, list(base.events))
    # Dropping for real (the dropped counts the copy must keep), with plain attributes: only the events' or the
    # links' own check sends these to the fallback.
    dropping_events = replaced(base)
    dropping_events.__dict__["_events"] = BoundedList.from_seq(1, [Event("e1", {}, 1), Event("e2", {}, 2)])
    dropping_links = replaced(base)
    dropping_links.__dict__["_links"] = BoundedList.from_seq(1, [Link(base.context), Link(base.context, {"b": 1})])
    bounded_attributes = replaced(base)
    bounded_attributes.__dict__["_attributes"] = BoundedAttributes(3, dict(base.attributes or {}))
    none_attributes = replaced(base)
    none_attributes.__dict__["_attributes"] = None
    with_events = replaced(base, events=[Event("own", {"k": "v"}, timestamp=3)])
    assert dropping_events.dropped_events == 1 and dropping_links.dropped_links == 1
    return [*spans, reordered, no_resource, no_end, listed_links, bounded_links, bounded_events, dropping_events,
            dropping_links, bounded_attributes, none_attributes, with_events]  # fmt: skip


@pytest.mark.parametrize("provenance", [False, True])
def test_the_inline_copy_is_the_copy_built_before_it(spans: list[ReadableSpan], provenance: bool) -> None:
    cases = [[], *([kind] for kind in KINDS), *itertools.combinations(KINDS[:10], 2), KINDS, KINDS[::-1]]
    for span in _s19_spans(spans):
        for results in cases:
            copy = new_enriched_copy(span, results, provenance=provenance)
            reference = _s19_enriched_copy(span, results, provenance=provenance)
            _same_span(copy, reference)
            # The same containers shared with the original (the links tuple, the resource...) and none more.
            for key, value in span.__dict__.items():
                if key in copy.__dict__:
                    assert (copy.__dict__[key] is value) is (reference.__dict__[key] is value), key


def test_the_pipelines_spans_take_the_inline_path(spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch) -> None:
    # Proof the comparison above covers the inline code: with the old path made to fail, real spans still copy.
    from evaltrace.evaluation import spans as spans_module

    def refuse(*args: object) -> ReadableSpan:
        raise AssertionError("the fallback was taken")

    monkeypatch.setattr(spans_module, "_enriched_copy", refuse)
    assert spans_module.DIRECT_COPY_OK
    plain = [span for span in spans if fields_module.plain_state(span) is not None and span.end_time is not None]
    assert len(plain) >= len(QUESTIONS)
    for span in plain:
        for results in ([], KINDS[:2], KINDS):
            _same_span(new_enriched_copy(span, results), _s19_enriched_copy(span, results))


def test_an_sdk_without_the_direct_copy_takes_the_old_path(
    spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaltrace.evaluation import spans as spans_module

    # The flag is the conjunction of the three import-time probes (a dropped term would let an SDK whose events or
    # setattr differ take the inline path).
    assert fields_module.DIRECT_COPY_OK == (
        fields_module._SPAN_COPY_OK and fields_module._EVENT_DIRECT_OK and fields_module._PLAIN_SETATTR
    )
    monkeypatch.setattr(spans_module, "DIRECT_COPY_OK", False)
    fallback = spans_module._enriched_copy
    taken: list[ReadableSpan] = []

    def counted(span: ReadableSpan, *args: Any, **kwargs: Any) -> ReadableSpan:
        taken.append(span)
        return fallback(span, *args, **kwargs)

    monkeypatch.setattr(spans_module, "_enriched_copy", counted)
    for span in _s19_spans(spans)[:4]:
        for results in ([], KINDS[:3], KINDS):
            taken.clear()
            _same_span(new_enriched_copy(span, results), _s19_enriched_copy(span, results))
            assert taken == [span]  # the old path, not the inline one


def test_a_result_missing_a_field_fails_on_the_inline_path_as_before(spans: list[ReadableSpan]) -> None:
    broken = EvaluationResult.model_construct(evaluator="broken", status="completed")
    with pytest.raises(AttributeError):
        _s19_enriched_copy(spans[0], [broken])
    with pytest.raises(AttributeError):
        new_enriched_copy(spans[0], [broken])


def _same_public(built: ReadableSpan, reference: ReadableSpan, *, stamped: bool) -> None:
    """Everything ReadableSpan's public properties give, equal and of the same types (instance-dict order aside:
    the constructor sets its own, the fast copy keeps the original's)."""
    assert type(built) is type(reference)
    for name in ("name", "context", "parent", "kind", "start_time", "end_time", "resource", "instrumentation_scope"):
        assert getattr(built, name) == getattr(reference, name), name
    for name in ("dropped_attributes", "dropped_events", "dropped_links"):
        assert getattr(built, name) == getattr(reference, name), name
    assert (built.status.status_code, built.status.description) == (
        reference.status.status_code,
        reference.status.description,
    )
    _same_items(built.attributes, reference.attributes)
    assert type(built.events) is type(reference.events) and len(built.events) == len(reference.events)
    for event, before in zip(built.events, reference.events, strict=True):
        assert type(event) is type(before) and event.name == before.name
        assert event.timestamp == before.timestamp or not stamped
        _same_items(event.attributes, before.attributes)
    assert type(built.links) is type(reference.links)
    assert [(link.context, dict(link.attributes or {})) for link in built.links] == [
        (link.context, dict(link.attributes or {})) for link in reference.links
    ]


def test_with_every_sdk_layout_probe_off_the_public_api_builds_the_same_copies(
    spans: list[ReadableSpan], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an SDK whose private layout differs gets (span_fields' probes all False): no field read or written
    # directly, only the constructors and the properties; the copies must be the fast path's, part for part.
    from evaltrace.evaluation import spans as spans_module

    cases = [[], KINDS[:3], KINDS, KINDS[::-1]]
    shapes = _s19_spans(spans)
    fast = [[new_enriched_copy(span, results) for results in cases] for span in shapes]
    for flag in ("_SPAN_COPY_OK", "_EVENT_DIRECT_OK", "_PLAIN_SETATTR", "SPAN_READ_OK", "DIRECT_COPY_OK"):
        monkeypatch.setattr(fields_module, flag, False)
    monkeypatch.setattr(spans_module, "DIRECT_COPY_OK", False)
    monkeypatch.setattr(spans_module, "SPAN_READ_OK", False)
    made: list[str] = []
    span_init, event_init = ReadableSpan.__init__, Event.__init__

    def spy_span(self: ReadableSpan, *args: Any, **kwargs: Any) -> None:
        made.append("span")
        span_init(self, *args, **kwargs)

    def spy_event(self: Event, *args: Any, **kwargs: Any) -> None:
        made.append("event")
        event_init(self, *args, **kwargs)

    monkeypatch.setattr(ReadableSpan, "__init__", spy_span)
    monkeypatch.setattr(Event, "__init__", spy_event)
    for span, fast_copies in zip(shapes, fast, strict=True):
        for results, fast_copy in zip(cases, fast_copies, strict=True):
            made.clear()
            copy = new_enriched_copy(span, results)
            _same_public(copy, fast_copy, stamped=span.end_time is not None)
            if span.end_time is not None:  # else the result events are stamped "now", at two moments
                assert copy.to_json() == fast_copy.to_json()
            # Every copy by the constructor, every result event too (a span that had no end time: "now", as before).
            assert made.count("span") == 1 and made.count("event") == len(results), made
