"""What the benchmarks measure into: the ``configure()`` pipeline and a raw OTel pipeline, both reading every span.

An exporter that only counts spans hides the work deferred until a span is read (attributes built on first
read, the SDK's value cleaning): every real exporter reads every attribute, so :class:`ReadingExporter` does too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

import evaltrace


class ReadingExporter(SpanExporter):
    """Reads what an OTLP exporter reads of each span (every attribute, event and link), then drops it."""

    def __init__(self) -> None:
        self.spans = 0
        self.values = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        values = 0
        for span in spans:
            values += _read(span.attributes)
            for event in span.events:
                values += _read(event.attributes)
            for link in span.links:
                values += _read(link.attributes)
            values += len(span.name) + span.status.status_code.value + span.kind.value
            values += _read(span.resource.attributes)
        self.spans += len(spans)
        self.values += values
        return SpanExportResult.SUCCESS


# A tuple, not `str | tuple | list`: the union expression builds a new type object on every attribute read, which
# charged ~1.5k instructions per attribute to whichever pipeline records more attributes.
_SIZED = (str, tuple, list)


def _read(attributes: Any) -> int:
    if not attributes:
        return 0
    total = 0
    for key, value in attributes.items():
        total += len(key) + (len(value) if isinstance(value, _SIZED) else 1)
    return total


def evaltrace_pipeline(exporter: SpanExporter, *, evaluation: bool = True) -> evaltrace.EvaltraceHandle:
    """What a user gets from ``configure()``: context stamps, the evaluation processor, a batching export queue."""
    return evaltrace.configure(
        service_name="bench",
        exporters=[exporter],
        local_store=False,
        evaluation=evaluation,
        handle_sigterm=False,
    )


def raw_otel_tracer(exporter: SpanExporter) -> tuple[TracerProvider, Tracer]:
    """The floor: a plain SDK TracerProvider with OTel's BatchSpanProcessor into the same exporter."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 16))
    return provider, provider.get_tracer("floor")
