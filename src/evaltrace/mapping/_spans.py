"""Span selection and attribute reading: the subtree to map, span kinds, and typed attribute values."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from evaltrace._internal import deferred_attributes
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import MINIMUM_KEY, TRUNCATED_KEY
from evaltrace.mapping import conventions

# Absent attribute; None cannot mark absence because JSON null is a value.
MISSING: Any = object()
_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content"})
_MAX_DEPTH = 64
# JSON text shorter than this holds fewer than _MAX_DEPTH opening brackets (each one is closed): never too deep.
_SHORT_JSON = 2 * _MAX_DEPTH
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The SDK's ``ReadableSpan.attributes`` property (``MappingProxyType(self._attributes or {})``): a span class that
# has it (``ReadableSpan``, the live ``Span`` and the tracer's subclass of it) has its attributes in ``_attributes``.
# As deferred_attributes found it before installing its view: read here at import, this module imported after the
# first preset span start would take the view for it, and copy a starting span's field without its preset.
_ATTRIBUTES_PROPERTY = deferred_attributes.SDK_ATTRIBUTES_PROPERTY


# --- span selection ------------------------------------------------------------------------------------


def context(span: ReadableSpan) -> SpanContext | None:
    """Return the span's context (None for spans rebuilt without one)."""
    ctx: SpanContext | None = span.context
    return ctx


def span_id(span: ReadableSpan) -> int:
    """Return the span's id, 0 when it has no context."""
    ctx = context(span)
    return ctx.span_id if ctx else 0


def select_root(spans: Sequence[ReadableSpan], root: ReadableSpan | int | str | None) -> ReadableSpan:
    """Return the root span: ``root`` itself, the span with that id, else the earliest parentless span.

    Raises:
        ValueError: ``spans`` is empty, or ``root`` is an id not found among them.
    """
    if isinstance(root, ReadableSpan):
        return root
    if not spans:
        raise ValueError("trace_from_spans needs at least one span")
    if root is not None:
        wanted = int(root, 16) if isinstance(root, str) else root
        for span in spans:
            if span_id(span) == wanted:
                return span
        raise ValueError(f"root span {root!r} is not among the {len(spans)} given spans")
    ids = {span_id(s) for s in spans}
    tops = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    return min(tops or spans, key=lambda s: s.start_time or 0)


def subtree(spans: Sequence[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    """Return ``root`` and its descendants among ``spans``, ordered by start time."""
    root_ctx = context(root)
    trace_id = root_ctx.trace_id if root_ctx else None
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        ctx = context(span)
        if span.parent is not None and (ctx is None or ctx.trace_id == trace_id):
            children.setdefault(span.parent.span_id, []).append(span)
    found: dict[int, ReadableSpan] = {}
    stack = [root]
    while stack:
        span = stack.pop()
        if span_id(span) in found:
            continue
        found[span_id(span)] = span
        stack.extend(children.get(span_id(span), ()))
    return sorted(found.values(), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> Mapping[str, Any]:
    """Return the span's attributes (empty when it has none)."""
    return span.attributes or {}


_MISSING = object()  # no ``_attributes`` field: read through the property, which raises as it always did


def plain_attrs(span: ReadableSpan) -> dict[str, Any]:
    """Return a plain-dict copy of the span's attributes, for code that reads many of them.

    Each read through the SDK's view (a mapping proxy over ``BoundedAttributes``) runs several Python-level
    calls; copying once costs about as much as two reads.
    """
    prop = getattr(type(span), "attributes", None)
    if prop is _ATTRIBUTES_PROPERTY or (
        # deferred_attributes' view (after the first preset start): the same field, unless this thread's preset
        # start has not put its preset in yet (only the view puts it in)
        prop is deferred_attributes.view_property and not deferred_attributes.preset_pending()
    ):
        # The SDK's own span classes (a live span in on_start, an ended one in the mapping): the field the property
        # wraps, copied by its own copy(), without the property's frame, its view, and the two ``__len__`` frames
        # its truth tests ran. The same dict as the view's copy() below: the property is
        # ``MappingProxyType(self._attributes or {})`` and the view's copy() is its mapping's.
        raw = getattr(span, "_attributes", _MISSING)  # a subclass without the field: the property path below
        kind = type(raw)
        if kind is BoundedAttributes or kind is dict:
            copied = raw.copy()  # type: ignore[attr-defined]  # one of the two exact types above
            if type(copied) is dict:
                return copied
        elif raw is None:
            return {}
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


def is_llm(span: ReadableSpan, span_attrs: Mapping[str, Any] | None = None) -> bool:
    """Whether the span is a model call.

    By ``evaltrace.span.kind``, else a foreign convention's kind (``openinference.span.kind``, ...), else its
    gen_ai operation, GenAI messages or foreign messages. ``span_attrs``: the span's attributes, read already.
    """
    span_attrs = attrs(span) if span_attrs is None else span_attrs
    kind = span_attrs.get(sc.EVALTRACE_SPAN_KIND)
    if kind is None:
        kind = conventions.foreign_kind(span_attrs)
    if kind is not None:
        return bool(kind == sc.KIND_LLM)
    if span_attrs.get(sc.GEN_AI_OPERATION_NAME) in _LLM_OPERATIONS:
        return True
    if sc.GEN_AI_INPUT_MESSAGES in span_attrs or sc.GEN_AI_OUTPUT_MESSAGES in span_attrs:
        return True
    return conventions.foreign_messages(span_attrs, span.events) is not None


def is_tool(span: ReadableSpan, span_attrs: Mapping[str, Any] | None = None) -> bool:
    """Whether the span is a tool execution (a foreign retriever's documents count as a tool result)."""
    span_attrs = attrs(span) if span_attrs is None else span_attrs
    if span_attrs.get(sc.EVALTRACE_SPAN_KIND) == sc.KIND_TOOL:
        return True
    if span_attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL:
        return True
    return sc.EVALTRACE_SPAN_KIND not in span_attrs and conventions.foreign_kind(span_attrs) in (
        sc.KIND_TOOL,
        "retriever",
    )


# --- attribute values ----------------------------------------------------------------------------------


def timestamp(ns: int | None) -> dt.datetime:
    """Return the UTC datetime of an OTel nanosecond timestamp (the epoch for None)."""
    return _EPOCH + dt.timedelta(microseconds=(ns or 0) // 1000)


def is_truncated(value: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``value`` is the marker ``_internal.jsonutil`` leaves for a value cut at capture."""
    return isinstance(value, dict) and value.get(TRUNCATED_KEY) is True


def json_attr(span: ReadableSpan, key: str, notes: list[str], span_attrs: Mapping[str, Any] | None = None) -> Any:
    """Return the parsed JSON value of ``key`` (text kept when it is not JSON), or ``MISSING``.

    ``span_attrs``: the span's attributes when the caller read them already.
    """
    span_attrs = attrs(span) if span_attrs is None else span_attrs
    raw = span_attrs.get(key)
    if raw is None:
        return MISSING
    if isinstance(raw, str):
        text_mime = key == sc.INPUT_VALUE and span_attrs.get(sc.INPUT_MIME_TYPE) == sc.MIME_TEXT
        text_mime = text_mime or (key == sc.OUTPUT_VALUE and span_attrs.get(sc.OUTPUT_MIME_TYPE) == sc.MIME_TEXT)
        value = raw if text_mime else loads(raw)
    elif isinstance(raw, Mapping):
        value = dict(raw)
    elif isinstance(raw, Sequence) and not isinstance(raw, bytes):
        value = list(raw)
    else:
        value = raw
    if isinstance(value, dict) and value.get(TRUNCATED_KEY) is True:  # is_truncated(value), inline
        notes.append(
            f"{key} of span {span.name!r} ({span_id(span):016x}) was truncated at capture "
            f"(original length {'at least ' if value.get(MINIMUM_KEY) is True else ''}{value.get('original_length')})"
        )
    return value


def note_ignored(notes: list[str], span: ReadableSpan, key: str, problem: str) -> None:
    """Record that attribute ``key`` of ``span`` has ``problem`` and was skipped."""
    notes.append(f"{key} of span {span.name!r} ({span_id(span):016x}) {problem}; ignored")


def number(span: ReadableSpan | Mapping[str, Any], key: str) -> float | None:
    """Return attribute ``key`` as a finite float, or None (absent, boolean, non-numeric or non-finite).

    ``span``: the span, or its attributes read already (a plain dict is read without the SDK's view).
    """
    value = (attrs(span) if isinstance(span, ReadableSpan) else span).get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def _finite(text: str) -> float | str:
    parsed = float(text)
    return parsed if math.isfinite(parsed) else text


# One decoder for every call: ``json.loads`` with hooks builds a new decoder (and scanner) per call.
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=str)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]  # set in __init__


def loads(text: str) -> Any:
    """Parse JSON text; text that is not JSON is returned as is, and non-finite numbers stay text."""
    try:
        # The scanner straight away: captured values are compact JSON with no surrounding whitespace, which
        # is all ``decode`` adds (its two Python frames were a noticeable part of mapping a small span).
        # Anything else (whitespace, trailing text, not JSON) takes ``decode``, which accepts or refuses it.
        value, end = _SCAN(text, 0)
        if end != len(text):
            value = _DECODER.decode(text)
    except StopIteration:
        try:
            value = _DECODER.decode(text)
        except (ValueError, RecursionError):
            return text
    except (ValueError, RecursionError):
        return text
    # Nesting cannot be deeper than the number of opening brackets: most texts need no walk (and short text no
    # count: two str.count calls were ~1.5k instructions per parse).
    if len(text) < _SHORT_JSON or text.count("{") + text.count("[") < _MAX_DEPTH:
        return value
    return value if _shallow(value) else text


def _shallow(value: Any) -> bool:
    """Whether ``value`` nests at most ``_MAX_DEPTH`` deep (pydantic refuses to serialise deeper values)."""
    if not isinstance(value, dict | list):
        return True
    level: list[Any] = [value]
    for _ in range(_MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return True
    return False


def compact(value: Any) -> str:
    """Return ``value`` as compact JSON text (non-JSON values via ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
