"""Redaction at the export boundary: evaluators judge the real text, exported copies are masked.

``configure(redact=True)`` masks built-in PII and secret patterns; ``redact=callable`` applies the user's
``str -> str`` function to every string attribute value (span and event attributes) of the exported copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue

from evaltrace._internal.errors import log_internal_error

Redactor = Callable[[str], str]

# Order matters: secrets before the generic number patterns they could partly match.
_BUILTIN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("API_KEY", re.compile(r"\b(?:sk|pk|rk)-(?:proj-|live-|test-|lf-)?[A-Za-z0-9_\-]{16,}\b")),
    ("AWS_KEY", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("GITHUB_TOKEN", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("BEARER_TOKEN", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/]{16,}=*")),
    ("EMAIL", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    ("CREDIT_CARD", re.compile(r"\b(?:\d[ \-]?){13,16}\b")),
    ("SSN", re.compile(r"\b\d{3}-\d{2}-\d{4}\b")),
    ("PHONE", re.compile(r"(?<!\w)\+?\d{1,3}[ .\-]?\(?\d{2,4}\)?[ .\-]?\d{3,4}[ .\-]?\d{3,4}(?!\w)")),
)


def mask_pii(text: str) -> str:
    """Replace e-mails, phone numbers, card numbers, SSNs, API keys and tokens with ``[REDACTED:<TYPE>]``."""
    for label, pattern in _BUILTIN_PATTERNS:
        text = pattern.sub(f"[REDACTED:{label}]", text)
    return text


def _redact_value(value: AttributeValue, redactor: Redactor) -> AttributeValue:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, Sequence) and value and isinstance(value[0], str):
        return tuple(redactor(v) for v in value)  # type: ignore[arg-type]
    return value


def _redact_attributes(attributes: Mapping[str, AttributeValue] | None, redactor: Redactor) -> dict[str, Any]:
    return {k: _redact_value(v, redactor) for k, v in (attributes or {}).items()}


def redact_span(span: ReadableSpan, redactor: Redactor) -> ReadableSpan:
    """Return a copy of ``span`` whose string attribute values went through ``redactor``."""
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes=_redact_attributes(span.attributes, redactor),
        events=[Event(e.name, _redact_attributes(e.attributes, redactor), e.timestamp) for e in span.events],
        links=list(span.links),
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingSpanExporter(SpanExporter):
    """Wraps an exporter so that it only ever sees redacted copies of the spans."""

    def __init__(self, inner: SpanExporter, redactor: Redactor) -> None:
        """Redact with ``redactor`` before handing spans to ``inner``."""
        self.inner = inner
        self.redactor = redactor

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export redacted copies; if the redactor fails, drop the batch rather than leak unredacted data."""
        try:
            copies = [redact_span(s, self.redactor) for s in spans]
        except Exception:
            log_internal_error("redacting spans (the batch was not exported)")
            return SpanExportResult.FAILURE
        return self.inner.export(copies)

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return self.inner.force_flush(timeout_millis)
