"""The proxy of a sync ``anthropic.Stream``: the engine's, with a ``for`` loop that skips the SDK's re-yield.

anthropic's ``Stream.__iter__`` is a generator that re-yields ``self._iterator`` (the SSE parser) and, before each
item, tells the stream's observer (``self._observer``, anthropic's own tracing hook). Under the engine's proxy every
event resumed that frame on top of the proxy's own generator. Here the proxy's generator loops over ``_iterator``
itself and notifies the observer as that frame would: the same events, in the same order, the observer told of
each before the application gets it, the same errors. That is done only when the class's ``__iter__`` has exactly
that bytecode (checked once per class); any other SDK version or subclass is read through the engine's path. When
the ``_observer`` property's getter is also the recognised one (two ``getattr`` on ``self.response``), the loop
reads the observer with those two calls itself, per event as the property does, without the property's frame.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.stream import BATCH, SyncStreamProxy, same_code

if TYPE_CHECKING:
    from collections.abc import Iterator


class EventStreamProxy(SyncStreamProxy):
    """``SyncStreamProxy`` for ``anthropic.Stream``: ``for`` reads the SDK's parser directly when recognised."""

    def __iter__(self) -> Iterator[Any]:
        """The engine's generator, or, for anthropic's observer-notifying ``Stream.__iter__``, ``_observed``."""
        wrapped = self.__wrapped__
        shape = _shape_of(type(wrapped))
        if shape is not None:
            inner = getattr(wrapped, "_iterator", None)  # what that ``__iter__`` loops over (made on first use)
            if inner is not None:
                try:
                    source = iter(inner)
                except TypeError:
                    pass
                else:
                    return _observed(self, source, wrapped, shape)
        return super().__iter__()


def _observed_reyield(self: Any) -> Iterator[Any]:  # the shape of anthropic's ``Stream.__iter__`` (2.x)
    for item in self._iterator:
        if (observer := self._observer) is not None:
            observer.item(item)
        yield item


def _observer_of(self: Any) -> Any:  # the shape of anthropic's ``Stream._observer`` property's getter
    return getattr(getattr(self.response, "stream", None), "stream_observer", None)


_SHAPES: dict[type, bool | None] = {}
"""Per stream class: None when its ``__iter__`` is not ``_observed_reyield``'s, else whether its ``_observer`` is
``_observer_of``'s (so ``_observed`` may read what it reads without the property's frame). Looked up once a stream."""


def _shape_of(cls: type) -> bool | None:
    try:
        return _SHAPES[cls]
    except KeyError:
        pass
    shape: bool | None = None
    if _same_code(getattr(cls, "__iter__", None), _observed_reyield):
        observer = next((c.__dict__["_observer"] for c in cls.__mro__ if "_observer" in c.__dict__), None)
        getter = observer.fget if type(observer) is property else None
        # the getter's ``getattr`` must be the builtin, as ours is
        shape = _same_code(getter, _observer_of) and "getattr" not in getattr(getter, "__globals__", {"getattr": 1})
    _SHAPES[cls] = shape
    return shape


def _same_code(function: Any, shape: Any) -> bool:
    """Whether ``function`` has ``shape``'s code (the engine's ``same_code``: bytecode, names, constants, flags, args)."""
    return same_code(getattr(function, "__code__", None), shape.__code__)


def _observed(proxy: SyncStreamProxy, source: Iterator[Any], stream: Any, inline: bool) -> Iterator[Any]:
    """The engine's per-chunk generator (``engine.stream._chunks``) with the SDK ``__iter__``'s observer call.

    Written out rather than shared: a hook per event would cost the call this saves. The observer is read per
    event, as the SDK's frame reads it: when ``inline``, as the property's own two ``getattr`` do (no property
    frame; the first as an attribute read whose ``AttributeError`` means no body, as ``getattr``'s default does),
    else through ``stream._observer``. An exception raised there or by the observer is the stream's, as it was
    in the SDK's frame; one raised while this frame folds or yields the event is not.
    """
    state = proxy._self_state
    from_source = True  # False once this frame handles an event: an exception there is not the stream's
    try:
        for event in source:
            if inline:
                response = stream.response
                try:  # the getter's ``getattr(self.response, "stream", None)``, as an attribute read
                    body = response.stream
                except AttributeError:
                    body = None
                observer = getattr(body, "stream_observer", None)
            else:
                observer = stream._observer
            if observer is not None:
                observer.item(event)
            try:  # a handler costs nothing until it runs, where a flag set twice per event is four bytecodes
                pending = state.pending
                if pending is not None:
                    state.last = perf_counter()
                    pending.append(event)
                    if len(pending) >= BATCH:
                        try:
                            state.flush()
                        except Exception:
                            chunk_failed()
                else:
                    try:
                        state.on_chunk(event)
                    except Exception:
                        chunk_failed()
                yield event
            except BaseException:
                from_source = False
                raise
    except BaseException as error:
        if from_source:
            state.end(sc.STREAM_END_ERROR, error)
        raise
    state.end(sc.STREAM_END_EXHAUSTED)
