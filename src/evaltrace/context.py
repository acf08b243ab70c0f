"""Session, user, metadata and tags stamped on every span started inside a block, and context propagation.

``with evaltrace.context(session_id="s1", user_id="u7", tags=["beta"]):`` puts ``session.id``, ``user.id``,
``langfuse.trace.tags`` and ``langfuse.trace.metadata.<key>`` on every span started inside, including spans
of other instrumentations, through ``ContextAttributesProcessor`` (add it to your own provider; ``configure()``
installs ``StampingPipeline``, which stamps the same way in front of its other processors).
The values travel in the OTel context, so they follow the code into asyncio tasks and, with
``wrap_context`` or ``ContextThreadPoolExecutor``, into threads.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv
from evaltrace._internal.deferred_attributes import freeze_ended
from evaltrace._internal.flush_results import flush_call
from evaltrace._internal.forwarding import starting
from evaltrace._internal.jsonutil import capped_json

__all__ = ["ContextAttributesProcessor", "ContextThreadPoolExecutor", "context", "wrap_context"]

P = ParamSpec("P")
R = TypeVar("R")

_CONTEXT_KEY = otel_context.create_key("evaltrace-context-attributes")


@dataclass(frozen=True)
class _Stamp:
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


class _Ends(Protocol):
    """What a stamp bound to a run reads of it: whether it has ended."""

    ended: bool


_NOTHING: Mapping[str, AttributeValue] = {}


class _RunStamp:
    """A stamp bound to a run: what it stamps while the run goes, then what the stamp it was put over stamps.

    An async LangChain run ends in a copy of the caller's context, so what its start made current stays behind
    in the caller's: a fixed stamp would put the run's session on every span the caller starts afterwards.
    Readers read only ``attributes``, at each span's start.
    """

    __slots__ = ("_attributes", "_outer", "_run")

    def __init__(self, attributes: Mapping[str, AttributeValue], outer: _Stamp | _RunStamp | None, run: _Ends):
        self._attributes = attributes
        self._outer = outer
        self._run = run

    @property
    def attributes(self) -> Mapping[str, AttributeValue]:
        """The run's attributes while it goes; once it ended, the outer stamp's (nothing if there was none)."""
        if not self._run.ended:
            return self._attributes
        return self._outer.attributes if self._outer is not None else _NOTHING


def _metadata_attributes(metadata: Mapping[str, Any]) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    for key, value in metadata.items():
        # Top-level langfuse.trace.metadata.<key> attributes are filterable in Langfuse; keep scalars as they are.
        if isinstance(value, str | bool | int | float):
            attributes[f"{semconv.LANGFUSE_TRACE_METADATA}.{key}"] = value
        else:
            attributes[f"{semconv.LANGFUSE_TRACE_METADATA}.{key}"] = capped_json(value)
    return attributes


@contextmanager
def context(
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[None]:
    """Stamp session, user, metadata, tags (and any extra attributes) on every span started in the block.

    Nested blocks merge: inner values win, tags accumulate.

    Args:
        session_id: Conversation/session id (``session.id``; Langfuse groups traces by it).
        user_id: End-user id (``user.id``).
        metadata: Key-value metadata (``langfuse.trace.metadata.<key>``).
        tags: Tags (``langfuse.trace.tags``).
        attributes: Further attributes to stamp verbatim.
    """
    outer: _Stamp | _RunStamp | None = otel_context.get_value(_CONTEXT_KEY)  # type: ignore[assignment]
    merged: dict[str, AttributeValue] = dict(outer.attributes) if outer else {}
    if session_id is not None:
        merged[semconv.SESSION_ID] = session_id
    if user_id is not None:
        merged[semconv.USER_ID] = user_id
    if tags:
        previous = merged.get(semconv.LANGFUSE_TRACE_TAGS, ())
        existing = list(previous) if isinstance(previous, Sequence) and not isinstance(previous, str) else []
        merged[semconv.LANGFUSE_TRACE_TAGS] = [*existing, *(t for t in tags if t not in existing)]
    if metadata:
        merged.update(_metadata_attributes(metadata))
    if attributes:
        merged.update(attributes)
    token = otel_context.attach(otel_context.set_value(_CONTEXT_KEY, _Stamp(merged)))
    try:
        yield
    finally:
        otel_context.detach(token)


def current_context_attributes() -> Mapping[str, AttributeValue]:
    """The attributes ``context()`` blocks in force would stamp on a span started now."""
    stamp: _Stamp | _RunStamp | None = otel_context.get_value(_CONTEXT_KEY)  # type: ignore[assignment]
    return stamp.attributes if stamp else {}


def session_in(context: Mapping[str, object]) -> str | None:
    """The ``session.id`` the ``context()`` blocks in force in ``context`` (an OTel context) stamp, or None."""
    stamp = context.get(_CONTEXT_KEY)
    session = stamp.attributes.get(semconv.SESSION_ID) if isinstance(stamp, _Stamp | _RunStamp) else None
    return session if isinstance(session, str) else None


def session_stamp(context: Mapping[str, object], session_id: str, run: _Ends | None = None) -> dict[str, object]:
    """The context value stamping ``session_id`` as a ``context(session_id=...)`` block opened in ``context`` would.

    For instrumentations that know a conversation's id (a LangGraph thread): spans started in a context holding
    this value, other instrumentations' included, carry ``session.id`` as if the user had opened the block, beside
    what the blocks in force stamp already (``user.id``, tags, metadata). Merge it into a context's values.

    Args:
        context: The OTel context the value goes into.
        session_id: The session to stamp.
        run: What the stamp lasts for (anything with an ``ended`` flag): once it has ended, the value stamps what
            ``context`` stamped, so a context the run's start left current (an async run ends in a copy of it)
            does not carry the session on. None: for a context used at once (a span's start) and dropped.
    """
    stamp = context.get(_CONTEXT_KEY)
    outer = stamp if isinstance(stamp, _Stamp | _RunStamp) else None
    merged = dict(outer.attributes) if outer is not None else {}
    merged[semconv.SESSION_ID] = session_id
    return {_CONTEXT_KEY: _Stamp(merged) if run is None else _RunStamp(merged, outer, run)}


class ContextAttributesProcessor(SpanProcessor):
    """Copies the ``evaltrace.context(...)`` attributes onto every span at start (O(1) when none are set)."""

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        """Stamp the attributes in force in ``parent_context`` (or the current context)."""
        stamp: _Stamp | _RunStamp | None = otel_context.get_value(_CONTEXT_KEY, parent_context)  # type: ignore[assignment]
        if stamp is not None and (attributes := stamp.attributes):
            span.set_attributes(attributes)

    def on_end(self, span: ReadableSpan) -> None:
        """Nothing to do at end."""

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing buffered."""
        return True


class StampingPipeline(SpanProcessor):
    """``configure()``'s pipeline: :class:`ContextAttributesProcessor`'s stamping, then the processors after it.

    One processor instead of the SDK's ``SynchronousMultiSpanProcessor`` over the stamping processor and the rest:
    every span start and end makes one call fewer, and none into the stamping processor's empty ``on_end``.
    """

    def __init__(self, processors: Sequence[SpanProcessor]) -> None:
        self._processors = tuple(processors)
        self._starting = starting(processors)  # export queues alone (``evaluation=False``): no call at start

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        """Stamp the ``context()`` attributes in force, then start the span in each processor."""
        context = parent_context if parent_context is not None else otel_context.get_current()
        stamp: _Stamp | _RunStamp | None = context.get(_CONTEXT_KEY)  # type: ignore[assignment]
        if stamp is not None and (attributes := stamp.attributes):
            span.set_attributes(attributes)
        for processor in self._starting:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """End the span in each processor (its attributes first made a plain mapping for the readers after)."""
        freeze_ended(span)
        for processor in self._processors:
            processor.on_end(span)

    def shutdown(self) -> None:
        """Shut every processor down, in order."""
        for processor in self._processors:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush every processor, in order, within one deadline shared by all (as the SDK's multi-processor does)."""
        deadline = time.monotonic() + timeout_millis / 1000
        flushed = True
        for processor in self._processors:
            remaining = int((deadline - time.monotonic()) * 1000)
            if remaining <= 0:
                return False
            # None (the SDK's base class before 1.31) is success; 0, "" or an exception a failure (flush_results)
            if not flush_call(processor.force_flush, remaining, "flushing a span processor"):
                flushed = False
        return flushed


def wrap_context(func: Callable[P, R]) -> Callable[P, R]:
    """Bind ``func`` to the current context (active span, ``context()`` values) for a call in another thread."""
    ctx = contextvars.copy_context()

    @functools.wraps(func)
    def run_in_context(*args: P.args, **kwargs: P.kwargs) -> R:
        return ctx.copy().run(func, *args, **kwargs)

    return run_in_context


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in the submitter's context, so child spans keep their parent."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        """Submit ``fn`` to run in a copy of the caller's context."""
        ctx = contextvars.copy_context()
        return super().submit(ctx.run, fn, *args, **kwargs)  # type: ignore[arg-type]
