"""One span as the rows the local store writes: its ``spans`` row, its evaluation results and its searchable text.

What the trace list filters on is taken out of the span here, once, on the exporter thread: the span's type,
whether it is an application error (an errored ``evaluation`` span is an evaluation that failed to run, not the
application failing), session and user, the tokens and cost the span records, and each evaluation outcome as the
HTML report decides it (:func:`evaltrace._internal.span_scores.span_scores`).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanKind, StatusCode

from evaltrace._internal import semconv
from evaltrace._internal.span_scores import late_score, span_scores
from evaltrace.exporters.span_json import attrs_dict as _attrs
from evaltrace.exporters.store_span import EvalRow, PlainSpan, StoredSpan
from evaltrace.exporters.store_values import clamp_int, clean_text, span_usage

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; the json module gives the same values, slower
    _orjson = None  # type: ignore[assignment]

__all__ = ["EvalRow", "StoredSpan", "stored_row", "stored_span"]

MAX_SEARCH_TEXT = 32_768
"""Characters of one span's inputs and outputs indexed for ``--search`` (the span itself is stored whole)."""

_SEARCHED = (
    semconv.INPUT_VALUE,
    semconv.OUTPUT_VALUE,
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
)


def _str(value: Any) -> str | None:
    return clean_text(value) if isinstance(value, str) and value else None


def _either(value: Any, fallback: Any) -> str | None:
    """The first of two attribute values that is a non-empty string (most spans have neither: two tests)."""
    if value is None and fallback is None:
        return None
    return _str(value) or _str(fallback)


_is_result_key = operator.methodcaller("startswith", semconv.EVALTRACE_EVAL_PREFIX)


def _carries_results(events: Sequence[Event], attributes: Mapping[str, Any]) -> bool:
    """A cheap test first: most spans carry no evaluation result, and reading them fully costs ~10 us."""
    return (
        attributes.get(semconv.EVALTRACE_SPAN_KIND) == semconv.KIND_EVALUATION
        or any(map(_is_result_key, attributes))  # map with a C callable: no Python frame per attribute
        or (bool(events) and any(event.name == semconv.GEN_AI_EVALUATION_RESULT_EVENT for event in events))
    )


def _evals(
    span: ReadableSpan, events: Sequence[Event], span_id: str, attributes: Mapping[str, Any]
) -> tuple[EvalRow, ...]:
    late = late_score(span, "")
    if late is not None:  # a late ``evaluation`` span: its result is about its parent, and counted once
        return (EvalRow(late.span_id, clean_text(late.name), late.outcome and clean_text(late.outcome), span_id),)
    return tuple(
        EvalRow(span_id, clean_text(row.name), row.outcome and clean_text(row.outcome), span_id)
        for row in span_scores(span)
    )


def _search_text(attributes: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for key in _SEARCHED:
        value = attributes.get(key)
        # An LLM call's input.value / output.value are often its messages' own text: indexed once.
        if isinstance(value, str) and value and value not in parts:
            parts.append(value)
    if not parts:
        return ""
    text = parts[0] if len(parts) == 1 else "\n".join(parts)
    return clean_text(text if len(text) <= MAX_SEARCH_TEXT else text[:MAX_SEARCH_TEXT])


_resource_json: dict[int, tuple[Resource, str, str]] = {}


def _resource(resource: Resource) -> tuple[str, str]:
    """The JSON and ``service.name`` of ``resource``, cached by identity: a process has a handful of resources."""
    cached = _resource_json.get(id(resource))
    if cached is not None and cached[0] is resource:
        return cached[1], cached[2]
    text = clean_text(json.dumps(_attrs(resource.attributes), sort_keys=True, ensure_ascii=False, default=str))
    service = clean_text(str(resource.attributes.get(semconv.SERVICE_NAME, "")))
    if len(_resource_json) > 256:
        _resource_json.clear()
    _resource_json[id(resource)] = (resource, text, service)  # holding the resource keeps its id from being reused
    return text, service


# One encoder for every span: ``json.dumps`` with options builds a new one per call. No circular check: span
# attributes are primitives and tuples of them.
_encode = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False).encode


def _orjson_default(value: Any) -> Any:
    # orjson writes subclasses of str and int itself but hands float subclasses (numpy.float64: OpenTelemetry
    # accepts them) to ``default``: ``str`` would store 0.93 as the string "0.93". A non-finite one becomes
    # ``null`` here and so goes through ``json`` like any NaN.
    if isinstance(value, float):
        return float(value)
    return str(value)


def _dumps(data: dict[str, Any]) -> str:
    """``data`` as JSON text: orjson (~0.8 us for a 600-byte span blob against ~3.7 us for ``json``) when it can.

    orjson refuses what SQLite could not store either (a lone surrogate) and integers beyond 64 bits, and writes
    NaN and infinities as ``null``: the blob holds no ``None`` of its own, so a ``null`` anywhere (or a string
    holding that word) sends the span through ``json``, which keeps those values and cleans the text (its text is
    spaced differently; every reader parses the blob, so the values are what counts).
    """
    if _orjson is not None:
        try:
            blob = _orjson.dumps(data, default=_orjson_default)
        except TypeError:  # orjson.JSONEncodeError
            pass
        else:
            if b"null" not in blob:
                return blob.decode()
    return clean_text(_encode(data))


def _copy(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain dict of ``attributes`` in one C-level copy.

    The SDK hands out a read-only view of its ``BoundedAttributes``, whose ``copy()`` copies the dict inside;
    ``dict(view)`` would run Python code (and take a lock) per key. Tuples stay tuples: both JSON encoders
    write them as arrays.
    """
    if not attributes:
        return {}
    copy = getattr(attributes, "copy", None)
    copied = copy() if copy is not None else None
    return copied if type(copied) is dict else dict(attributes)


# Keyed by the members' values: hashing an enum member runs Python code (``Enum.__hash__``), an int's does not.
_STATUS_NAMES = {code._value_: code.name for code in StatusCode}
_KIND_NAMES = {kind._value_: kind.name for kind in SpanKind}


def _events(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [{"name": e.name, "timestamp": e.timestamp, "attributes": _copy(e.attributes)} for e in events]


def _link(link: Link) -> dict[str, Any]:
    row = {
        "trace_id": f"{link.context.trace_id:032x}",
        "span_id": f"{link.context.span_id:016x}",
        "attributes": _attrs(link.attributes),
    }
    if link.context.trace_state:
        row["trace_state"] = link.context.trace_state.to_header()
    return row


def _links(links: Sequence[Link]) -> list[dict[str, Any]]:
    return [_link(link) for link in links]


_scope_rows: dict[int, tuple[InstrumentationScope | None, dict[str, Any]]] = {}


def _scope(scope: InstrumentationScope | None) -> dict[str, Any]:
    """The ``scope`` object of the blob, cached by identity (a tracer's scope is one object; only read after)."""
    cached = _scope_rows.get(id(scope))
    if cached is not None and cached[0] is scope:
        return cached[1]
    row: dict[str, Any] = {"name": ""}  # no None in the blob (see _dumps): the reader takes a missing version
    if scope is not None:
        row = {"name": scope.name}
        if scope.version is not None:
            row["version"] = scope.version
        if scope.schema_url:
            row["schema_url"] = scope.schema_url
        if scope.attributes:
            row["attributes"] = _attrs(scope.attributes)
    if len(_scope_rows) > 256:
        _scope_rows.clear()
    _scope_rows[id(scope)] = (scope, row)  # holding the scope keeps its id from being reused
    return row


_new_stored_span = tuple.__new__  # a StoredSpan built positionally, without its generated ``__new__`` frame
_SESSION_KEYS = (semconv.SESSION_ID, semconv.LANGFUSE_SESSION_ID, semconv.USER_ID, semconv.LANGFUSE_USER_ID)


def stored_span(span: ReadableSpan) -> StoredSpan:
    """The rows of ``span`` (the same fields :func:`~evaltrace.exporters.span_json.span_to_dict` writes).

    Runs once per span on the exporter thread (~6 us for a decorator span), holding the GIL the application
    needs: attributes are copied once, the blob is one encoder call, and everything else is a dictionary lookup,
    with a short path for what most spans lack (events, links, session, user, evaluation results).
    """
    return _new_stored_span(StoredSpan, _fields(span))


def stored_row(span: ReadableSpan) -> PlainSpan:
    """:func:`stored_span` as a plain tuple (evaluation rows too), which ``marshal`` encodes in one C call."""
    row = _fields(span)
    evals = row[19]
    return row if not evals else (*row[:19], tuple(map(tuple, evals)))


def _fields(span: ReadableSpan) -> tuple[Any, ...]:
    """The fields of ``span``'s :class:`StoredSpan`, in order."""
    ctx = span.context
    assert ctx is not None  # an SDK span always has a context
    span_id = f"{ctx.span_id:016x}"
    attributes = _copy(span.attributes)
    get = attributes.get
    span_type = _str(get(semconv.EVALTRACE_SPAN_KIND))
    span_status = span.status
    status = _STATUS_NAMES[span_status.status_code._value_]
    start = clamp_int(span.start_time or 0)
    resource_json, service = _resource(span.resource)
    events, links = span.events, span.links  # each access copies the SDK's list: once
    data: dict[str, Any] = {
        "attributes": attributes,
        "events": _events(events) if events else [],
        "links": _links(links) if links else [],
        "scope": _scope(span.instrumentation_scope),
    }
    # Kept only when present (most spans have none): what an OTLP export needs to give back what was received.
    if span_status.description is not None:
        data["status_description"] = span_status.description
    if ctx.trace_state:
        data["trace_state"] = ctx.trace_state.to_header()
    parent = span.parent
    if parent is not None and parent.is_remote:
        data["parent_remote"] = True
    if any(map(attributes.__contains__, _SESSION_KEYS)):
        session_id = _either(get(semconv.SESSION_ID), get(semconv.LANGFUSE_SESSION_ID))
        user_id = _either(get(semconv.USER_ID), get(semconv.LANGFUSE_USER_ID))
    else:
        session_id = user_id = None
    input_tokens, output_tokens, cost = span_usage(attributes)
    name = span.name
    return (
        f"{ctx.trace_id:032x}",
        span_id,
        f"{parent.span_id:016x}" if parent is not None else None,
        name if type(name) is str and name.isascii() else clean_text(name),
        _KIND_NAMES[span.kind._value_],
        span_type,
        status,
        int(status == "ERROR" and span_type != semconv.KIND_EVALUATION),  # app_error
        start,
        clamp_int(span.end_time or start),
        resource_json,
        service,
        session_id,
        user_id,
        input_tokens,
        output_tokens,
        cost,
        _dumps(data),
        _search_text(attributes),
        _evals(span, events, span_id, attributes) if _carries_results(events, attributes) else (),
    )
