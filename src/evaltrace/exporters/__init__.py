"""Span exporters evaltrace adds on its own: the local trace store, a console printer, and redaction."""

from __future__ import annotations

from evaltrace.exporters.console import ConsoleSpanExporter
from evaltrace.exporters.local_store import (
    LocalStoreExporter,
    LocalStoreOptions,
    LocalTraceStore,
    TraceFilter,
    TraceSummary,
)
from evaltrace.exporters.redaction import RedactingSpanExporter, Redactor, mask_pii

__all__ = [
    "ConsoleSpanExporter",
    "LocalStoreExporter",
    "LocalStoreOptions",
    "LocalTraceStore",
    "RedactingSpanExporter",
    "Redactor",
    "TraceFilter",
    "TraceSummary",
    "mask_pii",
]
