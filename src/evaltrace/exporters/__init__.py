"""Span exporters evaltrace adds on its own: the local trace store, a console printer, and redaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time each name is imported on first use (PEP 562)
    from evaltrace.exporters.console import ConsoleSpanExporter
    from evaltrace.exporters.local_store import LocalStoreExporter
    from evaltrace.exporters.redaction import RedactingSpanExporter, Redactor, mask_pii
    from evaltrace.exporters.store_options import LocalStoreOptions
    from evaltrace.exporters.store_query import TraceFilter, TraceSummary
    from evaltrace.exporters.store_reader import LocalTraceStore

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

# Lazy so that reading the store (``evaltrace traces list``) imports neither the exporters nor the OTel SDK.
_HOMES = {
    "ConsoleSpanExporter": "evaltrace.exporters.console",
    "LocalStoreExporter": "evaltrace.exporters.local_store",
    "LocalStoreOptions": "evaltrace.exporters.store_options",
    "LocalTraceStore": "evaltrace.exporters.store_reader",
    "RedactingSpanExporter": "evaltrace.exporters.redaction",
    "Redactor": "evaltrace.exporters.redaction",
    "TraceFilter": "evaltrace.exporters.store_query",
    "TraceSummary": "evaltrace.exporters.store_query",
    "mask_pii": "evaltrace.exporters.redaction",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evaltrace.exporters' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
