"""Shutdown of the export queue: the batch still being exported at the deadline is counted, exactly once.

Only a full batch wakes the export thread here (schedule delay 30 s), so the batch in flight is exactly one
``max_batch_size``; the tests wait on events (the request arrived, the export started), never on a sleep.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal.export_queue import ExportQueue


class _HangingBackend:
    """An OTLP/HTTP endpoint on 127.0.0.1 that holds every POST until ``release`` is set, then answers 200."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                backend.arrived.set()
                backend.release.wait(30)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1/traces"
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def hanging_backend() -> Iterator[_HangingBackend]:
    server = _HangingBackend()
    yield server
    server.close()


class _HeldExporter(SpanExporter):
    """A real exporter whose export blocks until the test releases it, then returns ``result`` (or raises)."""

    def __init__(self, result: SpanExportResult | None) -> None:
        self.result = result  # None: the export raises
        self.started = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.started.set()
        self.release.wait(30)
        if self.result is None:
            raise ConnectionError("the backend hung up")
        return self.result


def _end_spans(queue: ExportQueue, count: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(queue)
    tracer = provider.get_tracer("test")
    for i in range(count):
        tracer.start_span(f"s{i}").end()


def _accounted(stats: dict[str, int]) -> int:
    return (
        stats["exported"]
        + stats["export_failed"]
        + stats["dropped_queue_full"]
        + stats["dropped_queue_bytes"]
        + stats["dropped_shutdown"]
    )


def test_shutdown_counts_the_batch_a_hung_http_backend_holds(hanging_backend: _HangingBackend) -> None:
    # Before: the 100 spans being exported when shutdown(200 ms) returned were neither exported nor counted lost
    # (dropped_shutdown 200, queued 100 forever).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=hanging_backend.url, timeout=30)
    queue = ExportQueue(exporter, "otlp", max_batch_size=100, schedule_delay_s=30)
    _end_spans(queue, 300)
    assert hanging_backend.arrived.wait(30)  # the first batch is in flight, held by the backend
    queue.shutdown(200)
    stats = queue.stats()
    assert (stats["received"], stats["queued"], stats["exported"], stats["dropped_shutdown"]) == (300, 0, 0, 300)
    assert queue.lost == 300
    hanging_backend.release.set()  # the backend answers after all: whatever the exporter makes of it, counted once
    assert queue._thread is not None
    queue._thread.join(30)
    assert not queue._thread.is_alive()
    stats = queue.stats()
    assert (stats["received"], stats["queued"], _accounted(stats)) == (300, 0, 300)
    assert stats["exported"] in (0, 100)


@pytest.mark.parametrize(
    ("late", "exported", "dropped", "failed"),
    [
        (SpanExportResult.SUCCESS, 100, 200, 0),  # it arrived: exported, no longer counted lost
        (SpanExportResult.FAILURE, 0, 300, 0),  # counted lost once, by shutdown
        (None, 0, 300, 0),  # the exporter raised: the same
    ],
    ids=["late-success", "late-failure", "late-raise"],
)
def test_a_batch_finishing_after_shutdown_counted_it_is_counted_once(
    late: SpanExportResult | None, exported: int, dropped: int, failed: int
) -> None:
    exporter = _HeldExporter(late)
    queue = ExportQueue(exporter, "held", max_batch_size=100, schedule_delay_s=30)
    _end_spans(queue, 300)
    assert exporter.started.wait(30)
    queue.shutdown(50)
    stats = queue.stats()
    assert (stats["received"], stats["queued"], stats["dropped_shutdown"]) == (300, 0, 300)
    exporter.release.set()
    assert queue._thread is not None
    queue._thread.join(30)
    assert not queue._thread.is_alive()
    stats = queue.stats()
    assert (stats["received"], stats["queued"]) == (300, 0)
    assert (stats["exported"], stats["dropped_shutdown"], stats["export_failed"]) == (exported, dropped, failed)
    assert stats["lost"] == 300 - exported
    assert queue.lost == 300 - exported


class _ReleasingQueue(collections.deque[tuple[ReadableSpan, int]]):
    """The queue deque; shutdown's first pop (on ``shutdown_thread``) first lets the in-flight export end.

    That is the window between shutdown's count of the batch in flight and its pop loop: the export thread's
    batch ends there and the thread runs to its end (joined) before shutdown pops a single span.
    """

    def __init__(self, exporter: _HeldExporter, shutdown_thread: int) -> None:
        super().__init__()
        self.exporter = exporter
        self.shutdown_thread = shutdown_thread
        self.export_thread: threading.Thread | None = None
        self.hooked = False

    def popleft(self) -> tuple[ReadableSpan, int]:
        if threading.get_ident() == self.shutdown_thread and not self.hooked:
            self.hooked = True
            self.exporter.release.set()
            assert self.export_thread is not None
            self.export_thread.join(30)  # it takes what it may, exports it, and stops (shutdown woke it)
        return super().popleft()


def test_the_export_thread_takes_no_batch_after_shutdown_counted_the_queue() -> None:
    # The export thread is busy when shutdown counts the batch in flight; its batch ends before shutdown pops the
    # queue. It must take no batch then: shutdown has counted the queue's spans as its own (dropped_shutdown), and
    # a batch taken then would still be in flight, uncounted, when shutdown returns (before: queued 10 at return
    # with a second export held; here every remaining span was exported after shutdown had begun to drop them).
    exporter = _HeldExporter(SpanExportResult.SUCCESS)
    queue = ExportQueue(exporter, "held", max_batch_size=10, schedule_delay_s=30)
    releasing = _ReleasingQueue(exporter, threading.get_ident())
    queue._queue = releasing  # before the first span: the export thread drains this deque
    _end_spans(queue, 50)
    assert exporter.started.wait(30)
    assert queue._thread is not None
    releasing.export_thread = queue._thread
    queue.shutdown(50)
    assert releasing.hooked  # the window was opened: shutdown popped after the export thread had stopped
    assert not queue._thread.is_alive()
    stats = queue.stats()
    assert (stats["received"], stats["queued"], stats["exported"], stats["dropped_shutdown"]) == (50, 0, 10, 40)
    assert stats["queued_bytes"] == 0
    assert queue.lost == 40


class _SlowSpan(ReadableSpan):
    """A finished span whose attributes are read only when the test lets them (on_end sizes the span first)."""

    entered = threading.Event()
    go = threading.Event()

    @property
    def attributes(self) -> Any:
        _SlowSpan.entered.set()
        _SlowSpan.go.wait(30)
        return {}


def test_a_span_ending_while_shutdown_runs_is_counted_not_left_queued() -> None:
    # Before: the on_end passed the shutdown check, shutdown returned (queued 0), then the span was queued for
    # good with no export thread: received 1, queued 1, never exported nor counted lost.
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    slow = _SlowSpan(name="slow", context=tracer.start_span("ctx").get_span_context())
    queue = ExportQueue(_HeldExporter(SpanExportResult.SUCCESS), "race", max_batch_size=10, max_queue_bytes=10**9)
    ending = threading.Thread(target=queue.on_end, args=(slow,))
    ending.start()
    assert _SlowSpan.entered.wait(30)  # on_end is past the shutdown check, sizing the span
    queue.shutdown(100)
    assert queue.stats()["queued"] == 0
    _SlowSpan.go.set()
    ending.join(30)
    assert not ending.is_alive()
    stats = queue.stats()
    assert (stats["received"], stats["queued"], stats["dropped_shutdown"], stats["queued_bytes"]) == (1, 0, 1, 0)
    assert queue.lost == 1
    assert queue._thread is not None
    assert not queue._thread.is_alive()  # shutdown stopped it: nothing would ever export the span
