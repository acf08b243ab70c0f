"""Fixtures for the evaluation tests: a real OTel pipeline around the processor, and real HTTP backends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from evaltrace.evaluation import EvaluationSpanProcessor


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until true or the (generous) timeout; for cross-thread hand-offs only."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


@dataclass
class Pipeline:
    provider: TracerProvider
    processor: EvaluationSpanProcessor
    exporter: InMemorySpanExporter
    tracer: Tracer

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.by_name(name)
        assert len(found) == 1, f"expected one {name!r}, got {[s.name for s in self.spans()]}"
        return found[0]

    def flush(self, timeout_ms: int = 10_000) -> None:
        assert self.processor.force_flush(timeout_ms)


MakePipeline = Callable[..., Pipeline]


@pytest.fixture
def make_pipeline(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    created: list[Pipeline] = []

    def make(evaluators: Any = (), sinks: Any = (), **options: Any) -> Pipeline:
        options.setdefault("dead_letter_dir", tmp_path / "dead-letter")
        options.setdefault("retry_backoff_s", 0.001)
        exporter = InMemorySpanExporter()
        processor = EvaluationSpanProcessor(
            downstream=[SimpleSpanProcessor(exporter)], evaluators=evaluators, sinks=sinks, **options
        )
        provider = TracerProvider()
        provider.add_span_processor(processor)
        pipeline = Pipeline(provider, processor, exporter, provider.get_tracer("tests"))
        created.append(pipeline)
        return pipeline

    yield make
    for pipeline in created:
        pipeline.provider.shutdown()


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Backend:
    """A real HTTP server on 127.0.0.1 that records requests and answers with queued statuses."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    default_status: int = 200
    delay_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else self.default_status

    def bodies(self) -> list[Any]:
        with self.lock:
            return [r.body for r in self.requests]


def _handler(backend: Backend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            status = backend.next_status()
            with backend.lock:
                backend.requests.append(
                    Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
                )
            if backend.delay_s:
                time.sleep(backend.delay_s)
            payload = b'{"id": "ok"}' if status < 300 else b'{"error": "boom"}'
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (timeout test)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def backend() -> Iterator[Backend]:
    recorder = Backend(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    recorder.url = f"http://{host}:{port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
