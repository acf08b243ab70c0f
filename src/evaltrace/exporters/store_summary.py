"""The root, session and user of a stored trace: one rule, computed in Python, wherever a trace is summarized.

The rule (docs/viewing.md, "Sessions"):

- the **root** is the earliest-starting span whose parent is not in the trace (a remote parent counts as
  absent); spans starting at the same instant: the smallest span id;
- the trace's **session id** is the root's, else that of the first span *by end order* that carries one; spans
  ending at the same instant: the earlier start first, then the smaller span id;
- the **user id** is chosen the same way, independently of the session.

The store's writer (a trace's first batch and every later refresh) and a backfill's session scope both go by
:func:`summarize`, so the session ``sessions list`` files a trace under is the one a backfill judges it in. In
process, spans reach the evaluation pipeline in end order, so its session sampling and ``end_session()`` (the
root's session, else the first span *to arrive* carrying one) agree with it except when spans end at the same
instant or arrive out of end order (spans of one trace sent from several processes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from evaltrace._internal import semconv
from evaltrace.exporters.store_values import clean_text

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["SpanFacts", "TraceSummary", "facts_of", "summarize", "summarize_spans"]


class _SpanLike(Protocol):
    """What the rule reads of a span: a :class:`~evaltrace.exporters.store_span.StoredSpan` has these fields."""

    @property
    def span_id(self) -> str: ...
    @property
    def parent_span_id(self) -> str | None: ...
    @property
    def start_time(self) -> int: ...
    @property
    def end_time(self) -> int: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def user_id(self) -> str | None: ...


class SpanFacts(NamedTuple):
    """The fields of one span the rule reads (a stored span's columns, or an SDK span's via :func:`facts_of`)."""

    span_id: str
    parent_span_id: str | None
    start_time: int
    end_time: int
    session_id: str | None
    user_id: str | None


@dataclass(frozen=True)
class TraceSummary:
    """What :func:`summarize` chose for a trace.

    Attributes:
        root_span_id: The root's span id (None for a trace without spans).
        session_id: The trace's session id, or None when no span carries one.
        user_id: The trace's user id, or None when no span carries one.
    """

    root_span_id: str | None
    session_id: str | None
    user_id: str | None


# C-level keys (no Python call per span): the summary is computed for every trace of several spans stored.
_START_ORDER = attrgetter("start_time", "span_id")
_END_ORDER = attrgetter("end_time", "start_time", "span_id")


def summarize(spans: Sequence[_SpanLike]) -> TraceSummary:
    """The root, session id and user id of the trace made of ``spans`` (any order; see the module's rule)."""
    if not spans:
        return TraceSummary(None, None, None)
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_span_id is None or s.parent_span_id not in ids]
    pool = roots or spans  # parent links in a cycle (a store edited by hand): the earliest span of all
    root = pool[0] if len(pool) == 1 else min(pool, key=_START_ORDER)
    session, user = root.session_id, root.user_id
    if session is None or user is None:
        # Sorted only when the root lacks one (most traces carry neither, or carry them on the root).
        carrying = [s for s in spans if s.session_id is not None or s.user_id is not None]
        for span in sorted(carrying, key=_END_ORDER):
            if session is None:
                session = span.session_id
            if user is None:
                user = span.user_id
            if session is not None and user is not None:
                break
    return TraceSummary(root.span_id, session, user)


def _first(attributes: Any, keys: Iterable[str]) -> str | None:
    """The first of ``keys`` holding a non-empty string, as the store writes it (``store_rows``)."""
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return clean_text(value)
    return None


def facts_of(span: ReadableSpan) -> SpanFacts:
    """What the rule reads of an SDK span: the values the store would write for it."""
    context, parent = span.context, span.parent
    attributes = span.attributes or {}
    start = span.start_time or 0
    return SpanFacts(
        f"{context.span_id:016x}" if context is not None else "",
        f"{parent.span_id:016x}" if parent is not None else None,
        start,
        span.end_time or start,
        _first(attributes, semconv.SESSION_ID_KEYS),
        _first(attributes, semconv.USER_ID_KEYS),
    )


def summarize_spans(spans: Sequence[ReadableSpan]) -> TraceSummary:
    """:func:`summarize` of SDK spans (a backfill's, read back from the store or from OTLP/JSON files)."""
    return summarize([facts_of(s) for s in spans])
