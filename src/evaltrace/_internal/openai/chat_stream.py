"""The chat stream's ``for`` loop: a plain text chunk is folded in as it arrives, its objects not held.

``SyncStreamProxy.__iter__`` loops here instead of the engine's ``_chunks`` for a ``ChatAccumulator`` that reads
chunks as ``add`` does (``ChatAccumulator.stream_loop``). Everything but one step is ``_chunks``'s: the same exits
(only an exception raised by the source ends the span here, exhaustion ends it as exhausted), the same held list,
folded under the state's lock every ``size`` chunks and when the span ends. The one step: a chunk that is openai's
own ``ChatCompletionChunk`` with one choice whose buffer exists, a text delta with nothing else (no refusal, tool
call, ``function_call`` or extra field such as reasoning), no finish reason and no usage, while no chunk is held, is
counted and its text appended to its choice's buffer at once (what ``ChatAccumulator.add_batch`` would do with it
later). Any other chunk is held and folded as before.

Why: a held chunk kept a dozen objects alive (the chunk, its choices list, choice and delta, their dicts and field
sets) until its batch was folded, while the SDK built the next chunks' objects, and the allocator paid for it on
every chunk; folded at once, the chunk's objects are freed when the caller drops it, as without instrumentation
(benchmarks/README.md, s28-sse).

Thread rule, as the engine's: a chunk is counted and folded in only while the span has not ended. On a build with
the GIL, ``state.pending`` (None once the span ended, on any thread) is read again as the plain path's last test,
after its last call (``buffers.get`` and, on 3.11, ``type`` may let another thread run: the interpreter checks for a
switch after a call), and from that read to the append there is no call at all (the clock is read after the append).
So another thread's ``end()`` (which sets ``pending`` to None under the state's lock, then reads the count) comes
wholly before that read or wholly after the append: a chunk is either counted and in the text, or neither. A
free-threaded build (``GIL`` False) has no such guarantee: there ``ChatAccumulator.stream_loop`` is None and the
``for`` loop is the engine's ``_chunks``, which folds only under the lock.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import TYPE_CHECKING, Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import chunk_failed

if TYPE_CHECKING:
    from collections.abc import Iterator

GIL: bool = getattr(sys, "_is_gil_enabled", lambda: True)()
"""Whether this build runs with the GIL, read once at import: the loop's thread rule holds only with it."""

NO_INDEX = object()
"""No choice index is this: the index of the choice whose buffer is at hand, before the first."""

FAST_TYPES: tuple[Any, Any, Any] | None = None
"""openai's ``ChatCompletionChunk``, ``Choice`` and ``ChoiceDelta`` once looked up (``fast_types``)."""


def fast_types() -> tuple[Any, Any, Any]:
    """The openai chunk types for the chat fold's exact type checks (three Nones without openai)."""
    global FAST_TYPES
    try:
        from openai.types.chat.chat_completion_chunk import ChatCompletionChunk, Choice, ChoiceDelta
    except ImportError:  # chunks of another SDK: every one takes the general path
        FAST_TYPES = (None, None, None)
    else:
        FAST_TYPES = (ChatCompletionChunk, Choice, ChoiceDelta)
    return FAST_TYPES


def chat_chunks(proxy: Any, source: Iterator[Any]) -> Iterator[Any]:  # noqa: C901  # one frame per chunk, by design
    """``engine.stream._chunks`` for openai's chat chunks, a plain text chunk folded in as it arrives.

    The chunk, its choice and its delta (exactly openai's types: a subclass may read its fields its own way) are
    read through their instance ``__dict__`` as ``ChatAccumulator.add_batch`` reads them. The buffer of a choice is
    looked up when the index differs from the chunk before's, and only once the accumulator has its header (read
    from the first chunks, folded as they arrive) and some chunk made that buffer: a chunk that would have to do
    either is held. A field missing, any other shape, or anything raised while reading holds the chunk too, for the
    fold's general path, which routes an error of ours. A chunk is folded at once only while nothing is held, so
    every choice's fragments stay in stream order whichever way each chunk went.
    """
    state = proxy._self_state
    acc = state.acc
    size = state.size  # fixed for the stream: a local, not an attribute read per chunk
    clock = perf_counter
    chunk_type, choice_type, delta_type = FAST_TYPES or fast_types()
    kind = type  # a local: three exact type tests per chunk
    buffers = acc.choices
    last: Any = NO_INDEX  # the index of the choice whose ``text`` is at hand
    text: Any = None
    mine = False  # True once the exception unwinding this frame was raised in the body or thrown in at the yield
    try:
        for chunk in source:
            try:
                # Read per chunk (not kept as ``_chunks`` keeps it): the end on another thread is seen at once.
                pending = state.pending
                if pending is None:  # before the first chunk with output, with per-chunk metrics, or ended
                    try:
                        state.on_chunk(chunk)
                    except Exception:
                        chunk_failed()
                    yield chunk
                    continue
                folded = False
                if not pending and kind(chunk) is chunk_type:
                    try:
                        fields = chunk.__dict__
                        (choice,) = fields["choices"]  # None, no choice or several: held
                        if fields["usage"] is None and kind(choice) is choice_type:
                            fields = choice.__dict__
                            index = fields["index"]
                            delta = fields["delta"]
                            if (
                                fields["finish_reason"] is None
                                and kind(delta) is delta_type
                                and not delta.__pydantic_extra__
                            ):
                                if index is not last:
                                    buffer = None if acc.header_pending else buffers.get(index)
                                    if buffer is not None:
                                        text, last = buffer.text, index
                                fields = delta.__dict__
                                content = fields["content"]
                                if (
                                    index is last
                                    and fields["refusal"] is None
                                    and fields["tool_calls"] is None
                                    and fields["function_call"] is None
                                    # Read again after the last call above (``buffers.get`` and, on 3.11, ``kind``
                                    # may switch threads): from here to the append nothing can (see the module).
                                    and state.pending is not None
                                ):
                                    state.chunks += 1
                                    if content:
                                        text.append(content)
                                    folded = True
                    except Exception:  # a shape not expected: held, and read again by the fold's general path
                        pass
                # The clock after the fold: a call here before it could let another thread end the span between
                # the ``pending`` read and the append. The yield is outside the ``try``: what is thrown in there is
                # the consumer's.
                state.last = clock()
                if not folded:
                    pending.append(chunk)
                    if len(pending) >= size:
                        try:
                            state.flush()
                        except Exception:
                            chunk_failed()
                yield chunk
            except BaseException:
                mine = True
                raise
    except BaseException as error:
        if not mine:
            state.end(sc.STREAM_END_ERROR, error)
        raise
    state.end(sc.STREAM_END_EXHAUSTED)
