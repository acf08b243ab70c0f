"""Two threads reading one stream: a chunk held while another thread folds a batch is folded later, not dropped.

The stream's ``for`` loop keeps the held list in a local, and ``flush`` (called by another thread's ``next()``) folds
that same list. This test makes the interleaving deterministic: the fold, in thread B, waits after reading its batch
until the loop, in thread A, has held one more chunk. A flush that cleared the whole list after folding dropped that
chunk: read by the consumer, never folded, never counted. The accumulator is a recording stand-in (the engine's own
state and proxy are real); which accumulator folds does not matter to the race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from evaltrace._internal.engine.stream import StreamState, SyncStreamProxy


class _RecordingAccumulator:
    batch_size = 4

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.hook: Callable[[], None] | None = None

    def add(self, chunk: int) -> bool:
        self.seen.append(chunk)
        return True

    def add_batch(self, chunks: list[int]) -> None:
        self.seen.extend(chunks)
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()

    def end_reason(self) -> str:
        return "exhausted"

    def failure(self) -> None:
        return None

    outcome = summary = None


class _Call:
    instruments = None
    span = None
    start = 0.0

    class codec:  # read as ``call.codec.label``
        label = "race"

    class metric_attrs:  # read as ``call.metric_attrs.base``
        base: dict[str, Any] = {}

    def finish(self, outcome: Any, summary: Any, extra: Any) -> None:
        self.extra = extra

    def finish_failed(self, *args: Any) -> None:
        pass

    def fail_with_outcome(self, *args: Any) -> None:
        pass


class _LockedSource:
    """A thread-safe iterator, as a consumer sharing a stream between threads needs."""

    def __init__(self, count: int) -> None:
        self._chunks: Iterator[int] = iter(range(count))
        self._lock = threading.Lock()

    def __iter__(self) -> _LockedSource:
        return self

    def __next__(self) -> int:
        with self._lock:
            return next(self._chunks)

    def close(self) -> None:
        pass


def test_a_chunk_held_while_another_thread_folds_is_folded_and_counted_once() -> None:
    acc = _RecordingAccumulator()
    state = StreamState(_Call(), acc)  # type: ignore[arg-type]
    proxy = SyncStreamProxy(_LockedSource(20), state)
    folding, held = threading.Event(), threading.Event()

    def wait_for_the_loop() -> None:  # runs in thread B, inside flush's fold, after the batch was read
        folding.set()
        assert held.wait(10)

    read_by_b: list[int] = []
    other: threading.Thread | None = None
    read_by_a: list[int] = []
    for chunk in proxy:  # thread A
        read_by_a.append(chunk)
        if folding.is_set() and not held.is_set():
            held.set()  # this loop has held one more chunk while B's fold runs
            assert other is not None
            other.join(10)
        if other is None and len(state.pending or ()) == state.size - 1:
            acc.hook = wait_for_the_loop
            other = threading.Thread(target=lambda: read_by_b.append(next(proxy)))
            other.start()
            assert folding.wait(10)

    assert held.is_set(), "the interleaving under test did not happen"
    read = sorted(read_by_a + read_by_b)
    assert read == list(range(20))
    assert acc.seen == read  # every chunk folded once, in order
    assert state.chunks == 20
