"""Reading exported log records the same way on every supported opentelemetry-sdk (1.30 up).

Older SDKs name the in-memory exporter ``InMemoryLogExporter`` and carry an event's name as the ``event.name``
attribute (their Events API); newer ones have ``InMemoryLogRecordExporter`` and ``LogRecord.event_name``.
"""

from __future__ import annotations

from typing import Any

try:
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
except ImportError:  # opentelemetry-sdk < 1.3x: CI's oldest-versions step
    from opentelemetry.sdk._logs.export import (  # type: ignore[attr-defined,no-redef,unused-ignore]
        InMemoryLogExporter as InMemoryLogRecordExporter,
    )

__all__ = ["InMemoryLogRecordExporter", "event_record"]


def event_record(record: Any) -> tuple[str | None, dict[str, Any]]:
    """Return an event record's name and its attributes (without ``event.name`` where the SDK put it there)."""
    attributes = dict(record.attributes or {})
    name = getattr(record, "event_name", None)
    if name is None:
        name = attributes.pop("event.name", None)
    return name, attributes
