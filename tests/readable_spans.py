"""Shared by the mapping tests: a finished span rebuilt as the pipeline holds it, with other attributes.

The evaluation pipeline maps a plain ``ReadableSpan`` copy of each span it ends (``span_copy.replaced``), not the
SDK's own span class: these tests build that copy themselves, with the attribute container they need to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def rebuilt(span: ReadableSpan, attributes: Mapping[str, Any] | None) -> ReadableSpan:
    """A plain ``ReadableSpan`` with all of ``span`` (ids, parent, resource, events, status, times) but its attributes."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=span.events,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
    )
