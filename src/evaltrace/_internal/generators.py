"""Tracing of sync and async generator functions.

The span starts when the generator function is called (so its parent is the caller's span), covers the whole
iteration, is the current span only while the generator body runs (never between items, where the consumer
runs), and ends exactly once: on exhaustion, on an exception, on ``close()``/``aclose()``, and when the
generator is garbage-collected, iterated or not (a weakref finalizer covers the never-started case, which
``close()`` does not reach).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from evaltrace._internal import semconv
from evaltrace._internal.capture import ItemCollector
from evaltrace._internal.spans import SpanSpec, end_error, end_ok, start_span

END_REASON_ATTRIBUTE = "evaltrace.generator.end_reason"


class _SpanOnce:
    """Holds a generator's span and ends it at most once, whichever exit path comes first."""

    __slots__ = ("__weakref__", "ended", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.ended = False

    def claim(self) -> bool:
        """Return True exactly once: the caller then owns ending the span."""
        if self.ended:
            return False
        self.ended = True
        return True


def _end_unfinished(state: _SpanOnce, reason: str) -> None:
    if state.claim():
        state.span.set_attribute(END_REASON_ATTRIBUTE, reason)
        state.span.end()


def trace_generator(
    spec: SpanSpec, func: Callable[..., Generator[Any, Any, Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Generator[Any, Any, Any]:
    """Call the generator function ``func`` and return a generator that traces its iteration."""
    span = start_span(spec, args, kwargs)
    span_context = trace.set_span_in_context(span)
    state = _SpanOnce(span)
    token = otel_context.attach(span_context)
    try:
        inner = func(*args, **kwargs)
    except BaseException as exc:  # a generator function that raises before returning a generator
        otel_context.detach(token)
        if state.claim():
            end_error(span, exc)
        raise
    otel_context.detach(token)
    outer = _iterate(spec, inner, state, span_context)
    weakref.finalize(outer, _end_unfinished, state, semconv.STREAM_END_GC)
    return outer


def _iterate(
    spec: SpanSpec, inner: Generator[Any, Any, Any], state: _SpanOnce, span_context: otel_context.Context
) -> Generator[Any, Any, Any]:
    items = ItemCollector()
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        token = otel_context.attach(span_context)
        try:
            if to_throw is not None:
                thrown, to_throw = to_throw, None
                item = inner.throw(thrown)
            else:
                item = inner.send(to_send)
        except StopIteration as stop:
            if state.claim():
                end_ok(state.span, spec, items.as_output() if stop.value is None else stop.value)
            return stop.value
        except BaseException as exc:
            if state.claim():
                end_error(state.span, exc)
            raise
        finally:
            otel_context.detach(token)
        items.add(item)
        try:
            to_send = yield item
        except GeneratorExit:  # close(), or the generator being garbage-collected mid-iteration
            token = otel_context.attach(span_context)
            try:
                inner.close()
            finally:
                otel_context.detach(token)
                _end_unfinished(state, semconv.STREAM_END_CLOSED)
            raise
        except BaseException as exc:  # throw(): deliver it inside the body on the next step
            to_throw = exc


def trace_async_generator(
    spec: SpanSpec,
    func: Callable[..., AsyncGenerator[Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> AsyncGenerator[Any, Any]:
    """Call the async generator function ``func`` and return an async generator that traces its iteration."""
    span = start_span(spec, args, kwargs)
    span_context = trace.set_span_in_context(span)
    state = _SpanOnce(span)
    inner = func(*args, **kwargs)  # creating an async generator runs none of its body
    outer = _aiterate(spec, inner, state, span_context)
    weakref.finalize(outer, _end_unfinished, state, semconv.STREAM_END_GC)
    return outer


async def _aiterate(
    spec: SpanSpec, inner: AsyncGenerator[Any, Any], state: _SpanOnce, span_context: otel_context.Context
) -> AsyncGenerator[Any, Any]:
    items = ItemCollector()
    to_send: Any = None
    to_throw: BaseException | None = None
    while True:
        token = otel_context.attach(span_context)
        try:
            if to_throw is not None:
                thrown, to_throw = to_throw, None
                item = await inner.athrow(thrown)
            else:
                item = await inner.asend(to_send)
        except StopAsyncIteration:
            if state.claim():
                end_ok(state.span, spec, items.as_output())
            return
        except BaseException as exc:
            if state.claim():
                end_error(state.span, exc)
            raise
        finally:
            otel_context.detach(token)
        items.add(item)
        try:
            to_send = yield item
        except GeneratorExit:  # aclose(), or asyncio finalising the generator after garbage collection
            token = otel_context.attach(span_context)
            try:
                await inner.aclose()
            finally:
                otel_context.detach(token)
                _end_unfinished(state, semconv.STREAM_END_CLOSED)
            raise
        except BaseException as exc:
            to_throw = exc
