"""Stream proxies: ``wrapt.ObjectProxy`` over a provider's stream, so ``isinstance`` still holds.

Any stream: an SDK stream object (openai's ``Stream``), a plain generator or async generator, an iterator that is
also a context manager (mistral's ``EventStream``). The codec's accumulator reads the chunks.

The span ends exactly once, on whichever exit comes first: exhaustion, an exception while iterating, ``close()``
/ ``aclose()``, context exit (``break`` inside ``with``), closing ``.response`` (what the ``stream()`` helpers
do), or garbage collection of a stream that was never finished. Per chunk the proxy does O(1) work: one clock
read and one list append, with no Python call: in the generator a ``for`` loop resumes (``iter(proxy)``), or in
``__next__`` for ``next(proxy)``. The chunks are folded into the accumulator in batches of at most ``BATCH`` (or
the accumulator's own ``batch_size``; one
call per batch: ``Accumulator.add_batch`` when it has one, so that the common chunk is read without a call per
chunk), and once more when the span ends, so memory stays bounded whatever the stream's length. Until the first
chunk that carries output, and whenever metrics record (one histogram point per chunk for the gap since the
previous one), each chunk is folded in as it arrives.

A stream read to its end is ``exhausted`` (``evaltrace.stream.completed``) only when its chunks carried the
terminal signal (every chat choice's finish_reason; a Responses terminal event): a server that hung up early is
recorded as ``truncated``, with the span status left UNSET, since nothing was raised and what arrived is kept.
"""

from __future__ import annotations

import inspect
import threading
import time
import weakref
from functools import partial
from time import perf_counter
from typing import TYPE_CHECKING, Any

import wrapt

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine import build
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace._internal.engine.stream_source import _NO_SENTINEL, _inner_iterator
from evaltrace._internal.engine.stream_source import same_code as same_code  # re-exported: SDK bypasses import it here
from evaltrace._internal.errors import handle_internal_errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Iterator

    from evaltrace._internal.engine.call import Call
    from evaltrace._internal.engine.codec import Accumulator

# wrapt 2 makes ObjectProxy generic; wrapt 1.x (still pinned by opentelemetry-instrumentation < 0.55) cannot be
# subscripted at run time, so only the type checker sees the parameter.
if TYPE_CHECKING:
    _ObjectProxy = wrapt.ObjectProxy[Any]
else:
    _ObjectProxy = wrapt.ObjectProxy


BATCH = 64
"""Chunks held before they are folded into the accumulator: one call per batch, a bounded list per stream.

An accumulator may set its own ``batch_size`` (openai's chat chunks: 16). Holding a chunk keeps every object the SDK
built for it alive until its batch is folded; for a heavy chunk that costs the allocator more (measured per chunk on
the application thread) than the extra fold calls of smaller batches.
"""


class StreamState:
    """Timing, counters and the accumulator of one stream; ``end`` runs once.

    ``pending`` is the list of chunks not folded in yet while the proxy's fast path is on (the first chunk with
    output seen, no per-chunk metric); None otherwise, and for good once the span ended.
    """

    __slots__ = (
        "__weakref__", "acc", "call", "chunks", "done", "first", "first_wall_ns", "fold", "last", "lock", "pending",
        "pull", "record_gap", "size",
    )  # fmt: skip

    def __init__(self, call: Call, acc: Accumulator) -> None:
        self.call = call
        self.acc = acc
        self.chunks = 0
        self.first: float | None = None
        self.first_wall_ns = 0
        self.last: float | None = None
        self.done = False
        self.pending: list[Any] | None = None
        # Held while chunks are folded in and while the span ends, never per chunk on the fast path: a close()
        # from another thread waits for a batch being folded instead of ending the span half-way through it.
        self.lock = threading.RLock()
        self.pull: Any = None  # the wrapped stream's bound ``__next__`` / ``__anext__``, set by the proxy
        batch = getattr(acc, "add_batch", None)
        self.fold = batch if batch is not None else partial(add_each, acc.add)
        self.size: int = getattr(acc, "batch_size", BATCH)  # chunks held at most before a fold
        # time_per_output_chunk is recorded once per chunk after the first output chunk (conventions.md 1.7), as
        # each arrives: O(1) per chunk, and nothing at all while no MeterProvider records.
        instruments = call.instruments
        enabled = instruments is not None and instruments.enabled()
        record = instruments.time_per_chunk.record if instruments is not None and enabled else None
        self.record_gap = partial(record, attributes=call.metric_attrs.base) if record is not None else None

    def on_chunk(self, chunk: Any) -> None:
        """Fold one chunk in now: count it, stamp it, accumulate it (the proxy's slow path)."""
        with self.lock:
            if self.done:
                return  # the span is ended; its attributes may be built from the accumulator on another thread
            self._on_chunk(chunk)

    def _on_chunk(self, chunk: Any) -> None:
        now = perf_counter()
        self.chunks += 1
        if self.record_gap is not None and self.first is not None:
            self.record_gap(now - self.last)  # type: ignore[operator]  # last is set once first is
        self.last = now
        if self.acc.add(chunk) and self.first is None:
            self.first = now
            self.first_wall_ns = time.time_ns()
            if self.record_gap is None:
                self.pending = []  # from here on the proxy stamps and holds each chunk, and folds them in batches

    def flush(self) -> None:
        """Fold the held chunks into the accumulator (``fold`` routes an error of ours per chunk)."""
        with self.lock:
            pending = self.pending
            if pending:
                # Emptied in place, not replaced: the ``for`` loop's generator holds the list in a local and reads
                # ``state.pending`` again only after a fold (``_chunks``), and ``next()`` may fold the same list.
                # The batch is taken off the front before folding, so a chunk another thread's loop appends while
                # this fold runs stays held for the next fold instead of being cleared with this batch.
                held = len(pending)
                batch = pending[:held]
                del pending[:held]
                self.chunks += held
                self.fold(batch)

    def end(self, reason: str, error: BaseException | None = None) -> None:
        """Finish the span (its stream attributes are built later, from these timestamps); later calls do nothing."""
        with self.lock:  # one end, after any batch another thread is folding in
            if self.done:
                return
            self.done = True
            held, self.pending = self.pending, None  # the fast path is off: a chunk read from now on is not counted
            try:
                if held:
                    with handle_internal_errors(f"processing {self.call.codec.label} stream chunks"):
                        # The held chunks first: the outcome, the end reason and the chunk count include them. A
                        # copy: a chunk the reading thread appends from here on came after the end, and is neither
                        # folded in nor counted.
                        held = held[:]
                        self.chunks += len(held)
                        self.fold(held)
            finally:
                self._finish(reason, error)

    def _finish(self, reason: str, error: BaseException | None) -> None:
        with handle_internal_errors(f"ending a {self.call.codec.label} stream span"):
            call, acc = self.call, self.acc
            first, last = self.first, self.last
            if reason == sc.STREAM_END_EXHAUSTED:
                reason = acc.end_reason()  # read to the end, but did the server finish it?
            span_start = getattr(call.span, "start_time", None)  # the SDK span's own stamp; once per stream
            times = build.chunk_times(span_start, call.start, first, self.first_wall_ns, last)
            extra = partial(build.stream_attributes, reason, self.chunks, times, self.first_wall_ns, first, last)
            if error is None:
                failure = acc.failure()
                if failure is None:
                    call.finish(acc.outcome, acc.summary, extra)
                else:
                    call.finish_failed(acc.outcome, acc.summary, extra, failure)
            else:
                call.fail_with_outcome(error, acc.outcome, extra)
            instruments = call.instruments
            ttfc = times[0]
            if instruments is not None and ttfc is not None:  # after the span and its duration are measured
                instruments.record_first_chunk(call.metric_attrs.base, ttfc)


class _ResponseCloseHook(_ObjectProxy):
    """``stream.response`` for outside callers: closing it (as the stream helpers do) ends the span.

    It holds the stream's state weakly: the state holds the wrapped stream (its bound ``__next__`` /
    ``__anext__``), which a response kept after its stream was dropped must not keep alive. Once the proxy is
    collected its span has ended (garbage collection), so there is nothing left to end.
    """

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped)
        self._self_state = weakref.ref(state)

    def _end(self) -> None:
        state = self._self_state()
        if state is not None:
            state.end(sc.STREAM_END_CLOSED)

    def close(self) -> Any:
        try:
            return self.__wrapped__.close()
        finally:
            self._end()

    async def aclose(self) -> Any:
        try:
            return await self.__wrapped__.aclose()
        finally:
            self._end()


class StreamProxyBase(_ObjectProxy):
    """State shared by the sync and async proxies, and the garbage-collection exit."""

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped)
        self._self_state = state

    @property
    def response(self) -> Any:
        """The HTTP response, hooked so that closing it ends the span."""
        return _ResponseCloseHook(self.__wrapped__.response, self._self_state)

    def __del__(self) -> None:
        try:
            state = self._self_state
        except Exception:  # __init__ never completed: nothing to end
            return
        if not state.done:
            state.end(sc.STREAM_END_GC)


class SyncStreamProxy(StreamProxyBase):
    """Proxy for ``openai.Stream`` (any iterator)."""

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped, state)
        state.pull = wrapped.__next__

    def __iter__(self) -> Iterator[Any]:
        """What ``for`` reads: a generator over the wrapped stream's own iterator, resumed per chunk, not called.

        It loops over ``iter(wrapped)``, as a ``for`` over the stream itself would (no ``Stream.__next__`` frame
        per chunk), or, when that generator would only re-yield the stream's inner iterator (openai's ``Stream``:
        ``_inner_iterator``), over that iterator itself; an iterator without ``__iter__`` is read through its
        ``__next__``. An accumulator with a ``stream_loop`` of its own (openai chat's, which folds a plain text chunk
        in as it arrives instead of holding it) gets that generator, with ``_chunks``'s exits, instead.
        """
        wrapped = self.__wrapped__
        source = _inner_iterator(wrapped)
        if source is None:
            try:
                source = iter(wrapped)
            except TypeError:
                source = iter(self._self_state.pull, _NO_SENTINEL)
        loop = getattr(self._self_state.acc, "stream_loop", None)  # an accumulator's own loop (openai chat's)
        if loop is not None:
            return loop(self, source)  # type: ignore[no-any-return]
        return _chunks(self, source)

    def __next__(self) -> Any:
        # The whole per-chunk path, written out here (and in _chunks): one Python frame per chunk.
        state = self._self_state
        try:
            chunk = state.pull()
        except StopIteration:
            state.end(sc.STREAM_END_EXHAUSTED)
            raise
        except BaseException as error:
            state.end(sc.STREAM_END_ERROR, error)
            raise
        pending = state.pending
        if pending is not None:
            state.last = perf_counter()
            pending.append(chunk)
            if len(pending) >= state.size:
                try:
                    state.flush()
                except Exception:
                    chunk_failed()
            return chunk
        try:
            state.on_chunk(chunk)
        except Exception:
            chunk_failed()
        return chunk

    def __enter__(self) -> SyncStreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_state.end(sc.STREAM_END_CLOSED)

    def close(self) -> None:
        """Close the stream and end the span (closed early unless already exhausted)."""
        try:
            self.__wrapped__.close()
        finally:
            self._self_state.end(sc.STREAM_END_CLOSED)


def _chunks(proxy: SyncStreamProxy, source: Iterator[Any]) -> Iterator[Any]:
    """``SyncStreamProxy.__next__`` as a generator over ``source``: resuming a generator costs less than a call.

    It holds ``proxy``, so a stream iterated without a name (``for chunk in client.create(...)``) is not
    collected, and its span not ended by garbage collection, while it is read. Only an exception raised by
    ``source`` ends the span: one raised while this frame handles a chunk, or thrown in at the ``yield``
    (``GeneratorExit`` when the loop was left and the generator collected), ends nothing, the proxy's own exits do.
    The inner ``try`` tells the two apart at no cost per chunk (a ``try`` is free until something raises), where a
    flag set before and after each chunk's handling cost two stores per chunk.
    """
    state = proxy._self_state
    size = state.size  # fixed for the stream: a local, not an attribute read per chunk
    clock = perf_counter
    mine = False  # True once the exception unwinding this frame was raised in the body or thrown in at the yield
    # The held list, read from the state only when it may have changed: after a fold in here, and while it is None
    # (until the first chunk with output; for good when metrics record per chunk). ``flush`` empties the list in
    # place, so ``next()`` calls interleaved with this loop fold the same list. A span ended from elsewhere (another
    # thread's ``close()``) sets ``state.pending`` to None: the chunks held here from then on are neither folded nor
    # counted, as before, and the next fold's ``flush`` (a no-op) hands this loop the None, at most ``size`` later.
    # ``openai.chat_stream.chat_chunks`` (the openai chat ``for`` loop) copies this loop's exits and its held-list
    # handling: a change to either here must be made there too, and the other way round.
    pending = state.pending
    try:
        for chunk in source:
            try:
                if pending is None:
                    pending = state.pending  # ``next()`` may have turned the fast path on: never fold ahead of it
                    if pending is None:
                        try:
                            state.on_chunk(chunk)
                        except Exception:
                            chunk_failed()
                        pending = state.pending
                        yield chunk
                        continue
                state.last = clock()
                pending.append(chunk)
                if len(pending) >= size:
                    try:
                        state.flush()
                    except Exception:
                        chunk_failed()
                    pending = state.pending
                yield chunk
            except BaseException:
                mine = True
                raise
    except BaseException as error:
        if not mine:
            state.end(sc.STREAM_END_ERROR, error)
        raise
    state.end(sc.STREAM_END_EXHAUSTED)


class IterableStreamProxy(SyncStreamProxy):
    """Proxy for an iterable that is not its own iterator (botocore's ``EventStream``): read through ``iter()``."""

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        StreamProxyBase.__init__(self, wrapped, state)
        self._self_source = iter(wrapped)
        state.pull = self._self_source.__next__

    def __iter__(self) -> Iterator[Any]:
        """The generator over the one iterator ``next()`` reads too."""
        return _chunks(self, self._self_source)


class AsyncStreamProxy(StreamProxyBase):
    """Proxy for ``openai.AsyncStream`` (any async iterator)."""

    def __init__(self, wrapped: Any, state: StreamState) -> None:
        super().__init__(wrapped, state)
        state.pull = wrapped.__anext__

    def __aiter__(self) -> AsyncStreamProxy:
        return self

    async def __anext__(self) -> Any:
        # SyncStreamProxy.__next__ with an await: written out, not shared, so each pays one frame per chunk.
        state = self._self_state
        try:
            chunk = await state.pull()
        except StopAsyncIteration:
            state.end(sc.STREAM_END_EXHAUSTED)
            raise
        except BaseException as error:
            state.end(sc.STREAM_END_ERROR, error)
            raise
        pending = state.pending
        if pending is not None:
            state.last = perf_counter()
            pending.append(chunk)
            if len(pending) >= state.size:
                try:
                    state.flush()
                except Exception:
                    chunk_failed()
            return chunk
        try:
            state.on_chunk(chunk)
        except Exception:
            chunk_failed()
        return chunk

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_state.end(sc.STREAM_END_CLOSED)

    def close(self) -> Any:
        """Close the stream and end the span (closed early unless already exhausted).

        Mirrors the wrapped ``close``: a sync one (LiteLLM's ``CustomStreamWrapper``) closes and ends the span
        now; an async one (``openai.AsyncStream``) returns an awaitable that closes, then ends the span.
        """
        try:
            result = self.__wrapped__.close()
        except BaseException:
            self._self_state.end(sc.STREAM_END_CLOSED)
            raise
        if inspect.isawaitable(result):
            return self._finish_closing(result)
        self._self_state.end(sc.STREAM_END_CLOSED)
        return result

    async def _finish_closing(self, pending: Awaitable[Any]) -> Any:
        try:
            return await pending
        finally:
            self._self_state.end(sc.STREAM_END_CLOSED)

    async def aclose(self) -> None:
        """Close the stream (``aclose`` of an async generator, else ``close``) and end the span."""
        closer = getattr(self.__wrapped__, "aclose", None)
        if closer is None:
            result = self.close()
            if inspect.isawaitable(result):
                await result
            return
        try:
            await closer()
        finally:
            self._self_state.end(sc.STREAM_END_CLOSED)
