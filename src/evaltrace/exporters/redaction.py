"""Redaction at the export boundary: evaluators judge the real text, exported copies are masked.

``configure(redact=True)`` masks the built-in PII and secret detectors (:mod:`.redaction_patterns`);
``redact=[pattern, ...]`` adds the user's patterns to them; ``redact=Redactor(...)`` or any ``str -> str``
function replaces them. What is masked: every string attribute value of spans, span events (exception messages
and stack traces, evaluation explanations) and links, and the span status description (an exception message,
e.g. a provider error echoing the prompt); score comments, labels and metadata before they reach score sinks
and dead-letter files; ``gen_ai.evaluation.result`` log records. The HTML report reads the (redacted) store.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Status
from opentelemetry.util.types import AttributeValue

from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.span_copy import replaced
from evaltrace.exporters.redaction_patterns import Detector, builtin_detectors, regex_finder

if TYPE_CHECKING:  # annotations only: the schema (pydantic) loads with the evaluation engine, not with exporting
    from evaltrace.schema import Score

RedactFunction = Callable[[str], str]
CUSTOM_LABEL = "CUSTOM"
# Score metadata evaltrace itself writes to find the evaluation again: ids, never user text.
# Ids evaltrace writes into score metadata: never masked (a pattern matching hex must not break the judge link).
_SCORE_ID_KEYS = frozenset(
    {
        "span_id",
        "evaluation_id",
        "evaluator_version",
        "evaluator_type",
        "annotator_kind",
        "judge_trace_id",
        "judge_span_id",
    }
)


class Redactor:
    """Masks sensitive text as ``[REDACTED:<LABEL>]``: the built-in detectors and/or your own patterns.

    ``configure(redact=True)`` uses ``Redactor()``; ``configure(redact=[re.compile(...)])`` uses
    ``Redactor(patterns=[...])``. Pass ``Redactor(patterns=..., builtins=False)`` for your patterns alone.

    Args:
        patterns: Extra patterns, applied before the built-in ones: compiled or string regexes (labelled
            ``CUSTOM``), or a mapping ``{label: regex}``.
        builtins: Also apply the built-in detectors (keys and tokens, credentials in URLs and connection strings,
            e-mails, IP addresses, cards, SSNs, phones, IBANs; see docs/reliability.md "Redaction").

    Raises:
        TypeError: A pattern is neither a string nor a compiled regex.
        re.error: A string pattern does not compile.
    """

    def __init__(
        self,
        patterns: Iterable[str | re.Pattern[str]] | Mapping[str, str | re.Pattern[str]] = (),
        *,
        builtins: bool = True,
    ) -> None:
        labelled = patterns.items() if isinstance(patterns, Mapping) else ((CUSTOM_LABEL, p) for p in patterns)
        self.detectors: list[Detector] = [Detector(str(label), regex_finder(_compile(p))) for label, p in labelled]
        if builtins:
            self.detectors.extend(builtin_detectors())

    def __call__(self, text: str) -> str:
        """Return ``text`` with every detected occurrence masked."""
        for detector in self.detectors:
            found = list(detector.find(text))
            if not found:
                continue
            parts: list[str] = []
            last = 0
            for start, end in found:
                if start < last or end <= start:  # overlapping or empty (a pattern matching nothing)
                    continue
                parts.append(text[last:start])
                parts.append(f"[REDACTED:{detector.label}]")
                last = end
            parts.append(text[last:])
            text = "".join(parts)
        return text


def _compile(pattern: object) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    if isinstance(pattern, str):
        return re.compile(pattern)
    raise TypeError(f"a redaction pattern must be a str or a compiled regex, got {type(pattern).__name__}")


_default: Redactor | None = None


def mask_pii(text: str) -> str:
    """Mask e-mails, IP addresses, phone and card numbers, SSNs, IBANs, API keys, tokens, credentials and private keys."""
    global _default
    if _default is None:  # built lazily: importing phonenumbers costs ~0.1 s, paid only when redaction is used
        _default = Redactor()
    return _default(text)


def _redact_value(value: AttributeValue, redactor: RedactFunction) -> AttributeValue:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, Sequence) and value and isinstance(value[0], str):
        return tuple(redactor(v) for v in value)  # type: ignore[arg-type]
    return value


def _redact_attributes(attributes: Mapping[str, AttributeValue] | None, redactor: RedactFunction) -> dict[str, Any]:
    return {k: _redact_value(v, redactor) for k, v in (attributes or {}).items()}


def redact_span(span: ReadableSpan, redactor: RedactFunction) -> ReadableSpan:
    """Return a copy of ``span`` whose string attribute values and status description went through ``redactor``.

    Attributes of the span, of its events (``exception.message``, ``exception.stacktrace``, evaluation
    explanations) and of its links are redacted; names and ids are kept.
    """
    status = span.status
    if status.description:
        status = Status(status.status_code, redactor(status.description))
    return replaced(
        span,
        attributes=_redact_attributes(span.attributes, redactor),
        events=[Event(e.name, _redact_attributes(e.attributes, redactor), e.timestamp) for e in span.events],
        links=[Link(link.context, _redact_attributes(link.attributes, redactor)) for link in span.links],
        status=status,
    )


def redact_attributes(attributes: Mapping[str, Any], redactor: RedactFunction) -> dict[str, Any]:
    """Return ``attributes`` (e.g. of a log record) with string values, and strings in sequences, redacted."""
    return _redact_attributes(attributes, redactor)


def _redact_json(value: Any, redactor: RedactFunction) -> Any:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, Mapping):
        return {key: _redact_json(item, redactor) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_json(item, redactor) for item in value]
    return value


def redact_score(score: Score, redactor: RedactFunction) -> Score:
    """Return a copy of ``score`` with its comment, string value and metadata redacted (ids kept).

    The copy keeps the score id, so a re-sent or replayed score still upserts the same stored one.
    """
    metadata = score.metadata
    if metadata is not None:
        metadata = {k: v if k in _SCORE_ID_KEYS else _redact_json(v, redactor) for k, v in metadata.items()}
    return score.model_copy(
        update={
            "comment": redactor(score.comment) if score.comment else score.comment,
            "string_value": redactor(score.string_value) if score.string_value else score.string_value,
            "metadata": metadata,
        }
    )


class RedactingSpanExporter(SpanExporter):
    """Wraps an exporter so that it only ever sees redacted copies of the spans."""

    def __init__(self, inner: SpanExporter, redactor: RedactFunction) -> None:
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

    @property
    def on_lost(self) -> Any:
        """The wrapped exporter's ``on_lost`` (spans it lost after a SUCCESS, see ``ExportQueue``); False if none."""
        return getattr(self.inner, "on_lost", False)

    @on_lost.setter
    def on_lost(self, listener: Callable[[int, str], None] | None) -> None:
        # Without this the export queue never heard of the local store's losses behind redaction: counted exported.
        self.inner.on_lost = listener  # type: ignore[attr-defined]

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the wrapped exporter."""
        return self.inner.force_flush(timeout_millis)
