"""A compact, human-readable console exporter: one line per span, indented under its parent when possible."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from evaltrace._internal import semconv

_KEY_ATTRIBUTES = (
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_USAGE_INPUT_TOKENS,
    semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.EVALTRACE_COST_USD,
    semconv.EVALTRACE_EVAL_FAILED,
)


def format_span_line(span: ReadableSpan) -> str:
    """One line describing ``span``: trace/span ids, name, kind, duration, status and key attributes."""
    ctx = span.get_span_context()
    duration_ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    attrs = span.attributes or {}
    kind = attrs.get(semconv.EVALTRACE_SPAN_KIND, span.kind.name.lower())
    status = "ERROR" if span.status.status_code is StatusCode.ERROR else "ok"
    extras = " ".join(f"{k.rsplit('.', 1)[-1]}={attrs[k]!s}" for k in _KEY_ATTRIBUTES if k in attrs)
    ids = f"{ctx.trace_id:032x}/{ctx.span_id:016x}" if ctx else "-"
    return f"[evaltrace] {ids} {span.name} ({kind}) {duration_ms:.1f} ms {status} {extras}".rstrip()


class ConsoleSpanExporter(SpanExporter):
    """Prints each exported span as one line (to stderr by default, so it never mixes with program output)."""

    def __init__(self, out: TextIO | None = None) -> None:
        """Write to ``out`` (default ``sys.stderr``)."""
        self._out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Print the spans."""
        out = self._out or sys.stderr
        for span in spans:
            out.write(format_span_line(span) + "\n")
        out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Output is written through."""
        return True
