"""Build the spans the processor forwards: an enriched copy of an evaluated span, or a child evaluation span.

An ended span is immutable (``add_event`` on it only logs a warning), so results become visible on it by
forwarding a *copy*: a new ``ReadableSpan`` with the same context, parent, times, kind, status, resource,
links and instrumentation scope, the original events plus one ``gen_ai.evaluation.result`` event per result,
and the ``evaltrace.eval.*`` attributes. The copy replaces the original downstream; the original is never
forwarded as well. A result whose judge call was traced adds a span link to that judge trace's root.

Results that arrive after the hold deadline go out on a new span ``evaluation {name}`` instead (conventions.md 1.4
option b): the post-hoc *carrier* of OpenInference's annotation spec (spec/annotations.md). It has exactly one span
link, to the evaluated span (to the root, for a trace-level result): the link, not the parent, names the target
there. It stays parented to the evaluated span as well, which the spec allows ("parentage MAY describe how the
carrier was created") and which keeps it under its span in Jaeger and in ``evaltrace traces show``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from evaltrace._internal import semconv
from evaltrace._internal.deferred_attributes import copy_span, new_event
from evaltrace._internal.span_copy import replaced
from evaltrace._internal.span_fields import (
    DIRECT_COPY_OK,
    SPAN_FIELD_ORDER,
    SPAN_FIELDS,
    SPAN_READ_OK,
    copy_state,
    plain_state,
)
from evaltrace._internal.tracing import INSTRUMENTATION_NAME
from evaltrace._version import __version__
from evaltrace.evaluation._enrich import enrich_attributes
from evaltrace.evaluation.convert import (
    error_type,
    evaluation_event_attributes,
    judge_trace_id,
    openinference_evaluation_attributes,
    response_id_of,
    span_result_attributes,
)
from evaltrace.schema import EvaluationResult

_ids = RandomIdGenerator()
# The SDK's ReadableSpan fields enriched_copy reads directly (its properties return them, or a container of them).
_READ_FIELDS = frozenset(("_attributes", "_events", "_end_time"))
_SCOPE = InstrumentationScope(INSTRUMENTATION_NAME, __version__)
_GEN_AI_RESPONSE_ID = semconv.GEN_AI_RESPONSE_ID
_RESULT_EVENT = semconv.GEN_AI_EVALUATION_RESULT_EVENT
_JUDGE_TRACE_ID = semconv.EVALTRACE_JUDGE_TRACE_ID
_new = object.__new__


def _ns(result_time: object) -> int:
    timestamp = getattr(result_time, "timestamp", None)
    return int(timestamp() * 1e9) if callable(timestamp) else 0


def enriched_copy(span: ReadableSpan, results: Sequence[EvaluationResult], *, provenance: bool = False) -> ReadableSpan:
    """Return a copy of ``span`` carrying the results as events and ``evaltrace.eval.*`` attributes.

    The span's own status is never changed: an evaluation's verdict or error is not the application's. One
    ``gen_ai.evaluation.result`` event per result, stamped with the span's end time: a span event outside its
    span's interval renders oddly in Jaeger, and the exact evaluation time is on the log event and the score.
    ``provenance`` adds the evaluator's version and type (see
    :func:`~evaltrace.evaluation.convert.evaluation_event_attributes`). A result with a traced judge call adds a
    link to the judge trace's root span (the span's own links are kept, first).
    """
    if DIRECT_COPY_OK and type(span) is ReadableSpan:
        # plain_state(), new_event() and copy_state() inline, one frame (their frames were ~2k per span), when the
        # state is plain_state's (the same checks, in its order) and the events get the span's end time.
        state = span.__dict__
        if (tuple(state) == SPAN_FIELD_ORDER or state.keys() == SPAN_FIELDS) and state["_resource"] is not None:
            held = state["_attributes"]
            links = state["_links"]
            if (
                type(held) is not BoundedAttributes
                and type(state["_events"]) is not BoundedList
                and type(links) is not BoundedList
            ):
                end = state["_end_time"]
                if end is not None:
                    # _enriched_copy() below, from here on the same steps in the same order, with plain_state(),
                    # new_event() and copy_state() inline: one frame instead of four per evaluated span.
                    attributes = held.copy() if type(held) is dict else dict(held or {})
                    events = [*state["_events"]]
                    response_id = attributes.get(_GEN_AI_RESPONSE_ID)
                    if response_id is not None and (not isinstance(response_id, str) or not response_id):
                        response_id = None
                    built = enrich_attributes(attributes, results, response_id, provenance)
                    judged = False
                    for event_attributes in built:
                        event = _new(Event)  # new_event(): the fields Event's constructor sets, in its order
                        event.__dict__ = {"_name": _RESULT_EVENT, "_timestamp": end, "_attributes": event_attributes}
                        events.append(event)
                        if _JUDGE_TRACE_ID in event_attributes:
                            judged = True
                    if not judged:  # else the judge links: the same second pass, below
                        fields = state.copy()  # copy_state()
                        fields["_instrumentation_info"] = None
                        fields["_attributes"] = attributes
                        fields["_events"] = events
                        if type(links) is not tuple:
                            fields["_links"] = tuple(links)
                        copy: ReadableSpan = _new(ReadableSpan)
                        copy.__dict__ = fields
                        return copy
                    return _judged_copy(span, results, built, attributes, events, state)
    return _enriched_copy(span, results, provenance)


def _judged_copy(
    span: ReadableSpan,
    results: Sequence[EvaluationResult],
    built: list[dict[str, Any]],
    attributes: dict[str, Any],
    events: list[Event],
    state: dict[str, Any] | None,
) -> ReadableSpan:
    """The copy once an event carries a judge trace id: with the judge links, else as without them."""
    judges = [
        link
        for result, event_attributes in zip(results, built, strict=True)
        if _JUDGE_TRACE_ID in event_attributes and (link := judge_link(result)) is not None
    ]
    if judges:
        return replaced(span, attributes=attributes, events=events, links=[*span.links, *judges])
    if state is not None:
        return copy_state(state, attributes, events)
    copy = copy_span(span, attributes, events, None, None)
    return copy if copy is not None else replaced(span, attributes=attributes, events=events)


def _enriched_copy(span: ReadableSpan, results: Sequence[EvaluationResult], provenance: bool) -> ReadableSpan:
    """:func:`enriched_copy` of any other span (through plain_state, copy_span, the constructor)."""
    # The span's attributes are read once and the events built in place: this runs once per evaluated span.
    state = plain_state(span)  # the copy's fields below come from it: its parts are read there directly
    if state is not None:
        held = state["_attributes"]
        attributes = held.copy() if type(held) is dict else dict(held or {})
        events = [*state["_events"]]
        end = state["_end_time"]
    else:
        state = span.__dict__
        if SPAN_READ_OK and type(span) is ReadableSpan and _READ_FIELDS <= state.keys():
            # What the SDK's own properties return (probed: span_fields._span_read_ok) (a view of the attributes, a tuple of the events), without their
            # frames and containers: copied below all the same.
            attributes = dict(state["_attributes"] or {})
            events = list(state["_events"])
            end = state["_end_time"]
        else:  # a subclass may override the properties: read through them
            attributes = dict(span.attributes or {})
            events = list(span.events)
            end = span.end_time
        state = None
    response_id = attributes.get(_GEN_AI_RESPONSE_ID)  # response_id_of(original), without its call
    if response_id is not None and (not isinstance(response_id, str) or not response_id):
        response_id = None
    # span_result_attributes() written into the copy's attributes, and each result's event attributes: one pass.
    built = enrich_attributes(attributes, results, response_id, provenance)
    judged = False
    for event_attributes in built:
        events.append(new_event(_RESULT_EVENT, event_attributes, end))
        # A judge link needs the judge trace id the event carries (judge_link reads it there too).
        if _JUDGE_TRACE_ID in event_attributes:
            judged = True
    if judged:  # a second pass only then (zip's keyword call alone was ~2k instructions per span)
        return _judged_copy(span, results, built, attributes, events, state)
    if state is not None:  # copy_span() of it, without its checks made again
        return copy_state(state, attributes, events)
    copy = copy_span(span, attributes, events, None, None)
    return copy if copy is not None else replaced(span, attributes=attributes, events=events)


def judge_link(result: EvaluationResult) -> Link | None:
    """A link to the root span of the judge trace behind ``result`` (None without one)."""
    trace_hex = judge_trace_id(result)
    span_hex = result.metadata.get(semconv.JUDGE_SPAN_ID_KEY) if result.metadata else None
    if trace_hex is None or not isinstance(span_hex, str):
        return None
    try:
        context = SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=TraceFlags(1))
    except ValueError:  # metadata written by hand: no link rather than a broken one
        return None
    return Link(context, {semconv.EVALTRACE_JUDGE_EVALUATOR: result.evaluator})


def evaluation_span(
    span: ReadableSpan,
    result: EvaluationResult,
    *,
    provenance: bool = False,
    revision: int | None = None,
    trace_scope: bool = False,
    span_id: int | None = None,
) -> ReadableSpan | None:
    """Return the carrier span ``evaluation {name}`` of one late result (None for a span without context).

    Kind INTERNAL, ``evaltrace.span.kind=evaluation``, ``langfuse.observation.type=evaluator``,
    ``openinference.span.kind=EVALUATOR``; one span link to ``span`` (its target, and its parent too); for a
    judgement, the OpenInference feedback object ``evaluations.0.evaluation.*``, or
    ``trace.evaluations.0.evaluation.*`` when ``trace_scope`` (a trace-level result; ``revision`` implies it).
    It spans the evaluation's own start and finish times. Its status is ERROR only when the evaluation itself errored
    (outcome ``error``, with ``error.type`` as the description): the span is the *evaluation's* operation, and an
    evaluation that judged the output a fail, or was not evaluated, ran correctly, so its status stays UNSET
    and its verdict is in ``evaltrace.eval.<name>.outcome``. ``revision`` (trace-level results after the trace
    completed) is set as ``evaltrace.evaluation.revision``. ``span_id`` fixes the new span's id (a re-judged stored
    trace: the same result of the same evaluator replaces its span instead of adding one); random by default.
    """
    parent = span.context
    if parent is None:
        return None
    context = SpanContext(
        trace_id=parent.trace_id,
        span_id=span_id if span_id is not None else _ids.generate_span_id(),
        is_remote=False,
        trace_flags=parent.trace_flags,
        trace_state=parent.trace_state,
    )
    event_attributes = evaluation_event_attributes(result, response_id_of(span.attributes), provenance=provenance)
    attributes = {
        semconv.EVALTRACE_SPAN_KIND: semconv.KIND_EVALUATION,
        semconv.LANGFUSE_OBSERVATION_TYPE: semconv.LANGFUSE_TYPE_EVALUATOR,
        semconv.OPENINFERENCE_SPAN_KIND: semconv.OPENINFERENCE_KIND_EVALUATOR,
        **event_attributes,
        **span_result_attributes([result]),
        **openinference_evaluation_attributes(result, trace_scope=trace_scope or revision is not None),
    }
    if revision is not None:
        attributes[semconv.EVALTRACE_EVAL_REVISION] = revision
    end = max(_ns(result.finished_at), _ns(result.started_at))
    failure = error_type(result)
    status = Status(StatusCode.ERROR, failure) if failure is not None else Status(StatusCode.UNSET)
    return ReadableSpan(
        name=semconv.EVALUATION_SPAN_NAME_PREFIX + result.evaluator,
        context=context,
        parent=parent,
        resource=span.resource,
        attributes=attributes,
        events=[Event(semconv.GEN_AI_EVALUATION_RESULT_EVENT, event_attributes, timestamp=end)],
        links=[Link(parent)],  # exactly one: the target (the judge trace is named by an attribute instead)
        kind=SpanKind.INTERNAL,
        status=status,
        start_time=_ns(result.started_at),
        end_time=end,
        instrumentation_scope=_SCOPE,
    )
