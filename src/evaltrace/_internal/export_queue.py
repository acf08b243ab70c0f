"""The batch span processor in front of each of our exporters: bounded, and every span it loses is counted.

The SDK's ``BatchSpanProcessor`` drops spans when its queue is full with one log line and, before SDK 1.34, no
count anywhere, and it ignores an exporter's ``FAILURE`` result, so a burst or a dead disk loses spans with
nothing to show for it. :class:`ExportQueue` does the same job on the public ``SpanProcessor`` /
``SpanExporter`` API and accounts for every span it was handed::

    received = exported + export_failed + dropped_queue_full + dropped_queue_bytes + dropped_shutdown
               + queued (incl. in flight)

Once :meth:`ExportQueue.shutdown` has returned, ``queued`` is 0: what its deadline left in the queue, and the batch
the export thread was still exporting then, are counted ``dropped_shutdown``. The batch in flight is owned by one
side at a time under the loss lock: if its export finishes after shutdown counted it (the process lives on), a
SUCCESS moves it from ``dropped_shutdown`` to ``exported`` and a failure leaves it where it is, so every span is
still counted exactly once.

The queue is bounded by spans and by bytes: with large prompts a span-count bound alone let one queue hold
gigabytes. A span's size is estimated when it is queued from what is already built (a fixed cost per span, event
and attribute, plus the length of each string value): no encoding on the application's thread.

Each loss is logged once per episode (the first loss logs a WARNING naming the exporter and the cause; the
first success afterwards logs how many were lost in between) and counted in :meth:`ExportQueue.stats`, which
the evaluation processor's ``stats()`` and the pipeline metrics report.

``on_end`` is O(1) in the size of the payload: the size estimate (a ``len`` per attribute), one uncontended lock
for the byte count, a ``deque.append`` and, when a batch is full, one ``Event.set``.

In a child forked from the process (gunicorn ``--preload``...) the queue starts empty, with zeroed counters, and
its thread starts with the child's first span (see ``_internal/forks.py``): the parent's spans are the parent's.
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
from dataclasses import asdict, dataclass

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import forks
from evaltrace._internal.deferred_attributes import DIRECT_CONTEXT_TYPES as _DIRECT_CONTEXT
from evaltrace._internal.episodes import LossEpisode
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.flush_results import flush_call
from evaltrace._internal.span_size import ATTRIBUTE_BYTES as ATTRIBUTE_BYTES
from evaltrace._internal.span_size import EVENT_BYTES as EVENT_BYTES
from evaltrace._internal.span_size import SAMPLED_ITEMS as SAMPLED_ITEMS
from evaltrace._internal.span_size import SPAN_BYTES as SPAN_BYTES
from evaltrace._internal.span_size import estimated_bytes as estimated_bytes
from evaltrace._internal.tracing import suppress_instrumentation

logger = logging.getLogger("evaltrace.export")

DEFAULT_MAX_QUEUE = 8192
DEFAULT_BATCH = 512
DEFAULT_SCHEDULE_DELAY_S = 1.0
DEFAULT_MAX_QUEUE_BYTES = 256_000_000
"""Estimated bytes of spans one queue holds, in flight included (``configure(export_queue_max_bytes=...)``).

About 8,000 spans carrying a 30 kB prompt (the app of issue 24 reached 2.95 GB with the span bound alone). A
decorated call's span is estimated at ~3.4 kB, so for spans of that size the local store's span bound (65,536, about
220 MB) binds first: the byte bound only bites on large spans, and a burst the store absorbs loses nothing to it.
"""


@dataclass
class ExportStats:
    """Counters of one :class:`ExportQueue` (what was received is these plus what is queued or in flight)."""

    exported: int = 0
    export_failed: int = 0
    dropped_queue_full: int = 0
    dropped_queue_bytes: int = 0
    dropped_shutdown: int = 0

    @property
    def lost(self) -> int:
        """Spans that will never reach the exporter's backend."""
        return self.export_failed + self.dropped_queue_full + self.dropped_queue_bytes + self.dropped_shutdown


class ExportQueue(SpanProcessor):
    """Queue ended spans and export them in batches from a daemon thread.

    Args:
        exporter: Where the batches go.
        name: The exporter's name in stats and logs (``local_store``, ``otlp``...).
        max_queue_size: Spans held before new ones are dropped (and counted).
        max_queue_bytes: Estimated bytes of spans held, in flight included, before new ones are dropped (and
            counted as ``dropped_queue_bytes``); 0 = no byte bound.
        max_batch_size: Most spans per ``export`` call; a full batch wakes the worker at once.
        schedule_delay_s: Longest a span waits before its batch is exported. It bounds what a SIGKILL loses.
        synchronous: Export each span on the thread that ends it, with no queue or thread
            (``configure(batch=False)``), counted as the queue counts: unlike the SDK's ``SimpleSpanProcessor``,
            an export that fails is counted (and makes the handle's next ``force_flush`` say False).
    """

    def __init__(
        self,
        exporter: SpanExporter,
        name: str,
        *,
        max_queue_size: int = DEFAULT_MAX_QUEUE,
        max_batch_size: int = DEFAULT_BATCH,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        synchronous: bool = False,
    ) -> None:
        if max_queue_size < 1 or max_batch_size < 1 or schedule_delay_s <= 0 or max_queue_bytes < 0:
            raise ValueError(
                "max_queue_size and max_batch_size must be >= 1, schedule_delay_s > 0 and max_queue_bytes >= 0"
            )
        self.exporter = exporter
        self.name = name
        self._max_queue = max_queue_size
        self._max_bytes = max_queue_bytes
        self._synchronous = synchronous
        self._batch = max_batch_size
        self._delay = schedule_delay_s
        # Each span with its estimated size, so the worker gives back exactly what was counted in.
        self._queue: collections.deque[tuple[ReadableSpan, int]] = collections.deque()
        self._bytes_lock = threading.Lock()
        self._queued_bytes = 0  # queued and in flight
        self._stats = ExportStats()
        self._in_flight = 0  # the batch the export thread holds: set and cleared under the loss lock
        self._taken_at_shutdown = 0  # of it, counted dropped_shutdown by a shutdown that stopped waiting for it
        self._closed = False  # shutdown has counted what was left: the export thread takes no batch after it
        self._unsettled_loss = 0  # lost after export, reported before the batch's SUCCESS was counted
        self._loss_lock = threading.Lock()  # losses come from application threads and the worker alike
        self._episode = LossEpisode(logger, f"exporter {name}")
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._flushes = 0
        self._shutdown = False
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None  # None: not started (yet) in this process
        if getattr(exporter, "on_lost", False) is None:  # the local store: losses after a SUCCESS come later
            exporter.on_lost = self._lost_after_export  # type: ignore[attr-defined]
        if not synchronous:
            self._start_thread()
        forks.reinit_after_fork(self)

    def _start_thread(self) -> None:
        """Start the worker thread unless it runs already or the queue is shut (a forked child starts it lazily)."""
        with self._start_lock:
            if self._thread is None and not self._shutdown:
                thread = threading.Thread(target=self._run, name=f"evaltrace-export-{self.name}", daemon=True)
                thread.start()
                self._thread = thread

    def _reinit_after_fork(self) -> None:
        """In a forked child: new locks and an empty queue, counters at zero; the thread starts on first use.

        What the parent had queued or was exporting is the parent's to export: the child neither exports it again
        nor counts it as lost. A queue shut down before the fork stays shut down.
        """
        self._start_lock = threading.Lock()
        self._loss_lock = threading.Lock()
        self._bytes_lock = threading.Lock()
        self._episode = LossEpisode(logger, f"exporter {self.name}")
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._queue = collections.deque()
        self._queued_bytes = 0
        self._stats = ExportStats()
        self._in_flight = 0
        self._taken_at_shutdown = 0
        self._unsettled_loss = 0
        self._busy = False
        self._flushes = 0
        if not self._shutdown:
            self._thread = None

    # --- SpanProcessor (application thread) -----------------------------------------------------------------

    # No ``on_start``: the base class's does nothing, and the processors that forward starts skip one that does not
    # override it (``starting``): a call per span start fewer.

    def on_end(self, span: ReadableSpan) -> None:
        """Queue ``span``; a queue full (by spans or bytes) or a shut processor drops it, counted by reason."""
        if type(span) in _DIRECT_CONTEXT:  # the SDK's spans: the flag read without three Python-level properties
            context = span._context
            if context is not None and not context[3] & 1:
                return
        else:
            context = span.context
            if context is not None and not context.trace_flags.sampled:
                return
        if self._synchronous:
            if self._shutdown:
                self._drop(_SHUTDOWN)
            else:
                self._export([span])
            return
        queue = self._queue
        if self._shutdown or len(queue) >= self._max_queue:
            self._drop(_SHUTDOWN if self._shutdown else _FULL)
            return
        max_bytes = self._max_bytes
        if max_bytes:
            size = estimated_bytes(span)
            with self._bytes_lock:  # check and count as one: concurrent app threads never overshoot the bound
                admitted = self._queued_bytes + size <= max_bytes
                if admitted:
                    self._queued_bytes += size
                    queue.append((span, size))
            if not admitted:
                self._drop(_BYTES)
                return
        else:
            queue.append((span, 0))
        if self._thread is None:  # the first span of a forked child
            self._start_thread()
        if len(queue) >= self._batch and not self._wake.is_set():
            self._wake.set()

    def _drop(self, reason: str) -> None:
        with self._loss_lock:
            if reason == _SHUTDOWN:
                self._stats.dropped_shutdown += 1
                self._episode.loss(1, "span ended after shutdown")
            elif reason == _FULL:
                self._stats.dropped_queue_full += 1
                self._episode.loss(
                    1, f"export queue full ({self._max_queue} spans): the backend is slower than the app"
                )
            else:
                self._stats.dropped_queue_bytes += 1
                self._episode.loss(
                    1,
                    f"export queue full ({self._max_bytes:,} bytes of spans, export_queue_max_bytes): "
                    "the backend is slower than the app",
                )

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued now.

        Spans lost are not reported here but in :attr:`lost` (``EvaltraceHandle.force_flush`` says False after
        one): this processor hangs off the application's own TracerProvider, and older SDKs (1.30 among them) stop a
        provider's ``force_flush`` at the first processor returning False, which would leave the application's
        processors after ours unflushed for good after one lost span.

        Returns:
            False when the queue is not empty at the deadline or the exporter's flush failed.
        """
        return self._flush(timeout_millis)

    @property
    def lost(self) -> int:
        """Spans lost so far (dropped, or their export failed): see :class:`ExportStats`."""
        if self._closed and self._queue:
            self._drop_left_after_close()
        with self._loss_lock:
            return self._stats.lost

    def _drop_left_after_close(self) -> None:
        """Count as ``dropped_shutdown`` the spans an ``on_end`` racing ``shutdown()`` queued after it had counted.

        Such an ``on_end`` passed the shutdown check before ``shutdown()`` began and appended once it had returned:
        no thread exports the span any more. Done when the counters are read (not per span): ``queued`` stays 0.
        """
        left = size = 0
        with self._loss_lock:
            while True:
                try:
                    _, bytes_ = self._queue.popleft()
                except IndexError:
                    break
                left += 1
                size += bytes_
            if left:
                self._stats.dropped_shutdown += left
                self._episode.loss(left, "span ended after shutdown")
        if size:
            with self._bytes_lock:
                self._queued_bytes -= size

    def _flush(self, timeout_millis: int) -> bool:
        deadline = time.monotonic() + timeout_millis / 1000
        thread = self._thread
        if thread is not None and not thread.is_alive():
            return not self._queue
        # No thread (a forked child that has ended no span yet): nothing is queued, the exporter is still flushed.
        with self._idle:
            self._flushes += 1
            self._wake.set()
            try:
                while self._queue or self._busy:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._idle.wait(min(remaining, 0.05))
            finally:
                self._flushes -= 1
        # The exporter may be the application's: None (an older SDK's base class) is success, any other falsy answer
        # (0, "") or an exception a failure (see flush_results).
        timeout = max(0, int((deadline - time.monotonic()) * 1000))
        return flush_call(self.exporter.force_flush, timeout, f"flushing exporter {self.name}")

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Export what is queued within the deadline, count what is left as lost, then shut the exporter.

        What is left includes the batch the export thread is still exporting at the deadline (a hung backend):
        it is counted ``dropped_shutdown`` here, and moves to ``exported`` only if that export succeeds later.
        """
        if self._shutdown:
            return
        deadline = time.monotonic() + timeout_millis / 1000
        self._shutdown = True
        self._wake.set()
        with self._start_lock:  # a thread being started now is joined; none starts after this
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._loss_lock:  # the batch in flight, if any, is this shutdown's to count; the thread takes no other
            self._closed = True
            in_flight, self._in_flight = self._in_flight, 0
            if in_flight:
                self._taken_at_shutdown = in_flight
                self._stats.dropped_shutdown += in_flight
                self._episode.loss(in_flight, "shutdown deadline reached while a batch was still being exported")
        left = size = 0
        while True:  # one span at a time, as the export thread pops (it takes no batch once closed)
            try:
                _, bytes_ = self._queue.popleft()
            except IndexError:
                break
            left += 1
            size += bytes_
        if size:
            with self._bytes_lock:
                self._queued_bytes -= size
        if left:
            with self._loss_lock:
                self._stats.dropped_shutdown += left
                self._episode.loss(left, "shutdown deadline reached with spans still queued")
        try:
            if "timeout_millis" in inspect.signature(self.exporter.shutdown).parameters:  # bounded by our deadline
                remaining = max(0, int((deadline - time.monotonic()) * 1000))
                self.exporter.shutdown(timeout_millis=remaining)  # type: ignore[call-arg]
            else:
                self.exporter.shutdown()
        except Exception:
            log_internal_error(f"shutting down exporter {self.name}")

    def _lost_after_export(self, spans: int, cause: str) -> None:
        """Spans the exporter lost after it reported SUCCESS for them: moved from ``exported`` to ``export_failed``.

        The local store's writer process acknowledges a batch after ``export`` returned; what it then loses
        (its death, a store it cannot open, spans SQLite refused) is counted and logged as any failed export.
        """
        with self._loss_lock:
            # Reported before the batch's SUCCESS was counted (the thread writer reports during ``export``; the
            # writer process's acknowledgement may beat the export queue's thread): settled when it is counted.
            self._unsettled_loss += spans
            self._settle()
            self._episode.loss(spans, cause or "the exporter lost spans after accepting them")

    def _settle(self) -> None:
        """Move losses reported after export from ``exported`` to ``export_failed`` (called with the loss lock)."""
        moved = min(self._unsettled_loss, self._stats.exported)
        if moved:
            self._unsettled_loss -= moved
            self._stats.exported -= moved
            self._stats.export_failed += moved

    def stats(self) -> dict[str, int]:
        """The counters, plus ``queued`` (waiting or being exported), ``received``, ``lost`` and ``queued_bytes``.

        ``queued_bytes`` is the estimated size of the spans queued or in flight (bounded by ``max_queue_bytes``).
        """
        if self._closed and self._queue:
            self._drop_left_after_close()
        data: dict[str, int] = asdict(self._stats)
        data["queued"] = len(self._queue) + self._in_flight
        data["received"] = sum(data.values())
        data["lost"] = self._stats.lost
        data["queued_bytes"] = self._queued_bytes
        return data

    # --- worker thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            woken = self._wake.wait(self._delay)
            self._wake.clear()
            stopping = self._shutdown
            # Woken by a full batch: export full batches only. Draining to the last span would export the
            # spans that keep arriving meanwhile in batches of a few, each paying the batch's fixed cost (the
            # exporter's setup, a request): with a fast exporter that was ~20k instructions per decorator span.
            # What is left goes with the next full batch or at the schedule delay, a flush or shutdown.
            self._drain(full_only=woken and not stopping and not self._flushes)
            if stopping:
                return

    def _drain(self, *, full_only: bool = False) -> None:
        queue = self._queue
        with self._idle:
            self._busy = True
        try:
            while queue:
                if full_only and len(queue) < self._batch:
                    break
                entries: list[tuple[ReadableSpan, int]] = []
                # Popped and made the batch in flight in one step under the loss lock (once per batch): shutdown
                # then finds each span either in the queue or in flight, and counts it; none after it closed.
                with self._loss_lock:
                    if self._closed:
                        break
                    for _ in range(min(self._batch, len(queue))):
                        try:  # a shutdown whose join timed out may empty the queue between our len() and popleft()
                            entries.append(queue.popleft())
                        except IndexError:
                            break
                    self._in_flight = len(entries)
                if not entries:
                    break
                try:
                    self._export([span for span, _ in entries])  # clears _in_flight as it counts the batch
                finally:
                    size = sum(size for _, size in entries)
                    if size:
                        with self._bytes_lock:  # resident until exported: an export in progress still holds them
                            self._queued_bytes -= size
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            with suppress_instrumentation():  # the exporter's own HTTP calls must not become spans
                result = self.exporter.export(batch)
        except Exception as exc:
            log_internal_error(f"exporting spans to {self.name}")
            result = SpanExportResult.FAILURE
            cause = f"{type(exc).__name__}: {exc}"
        else:
            cause = "the exporter reported FAILURE"
        with self._loss_lock:
            self._in_flight = 0  # settled here, with its count: shutdown never counts it too
            taken, self._taken_at_shutdown = self._taken_at_shutdown, 0
            if result is SpanExportResult.SUCCESS:
                # A batch shutdown stopped waiting for (and counted lost) arrived after all: counted once, exported.
                self._stats.dropped_shutdown -= taken
                self._stats.exported += len(batch)
                self._settle()
                if not self._queue:  # a loss episode ends when the backlog is gone, not at each batch
                    self._episode.ok()
            elif not taken:  # a batch shutdown took is counted dropped_shutdown already
                self._stats.export_failed += len(batch)
                self._episode.loss(len(batch), cause)


_SHUTDOWN, _FULL, _BYTES = "shutdown", "queue_full", "queue_bytes"  # why on_end dropped a span
