"""What Langfuse is sent: LLM spans without their list values ``input.value`` / ``output.value``.

LLM spans carry ``input.value`` / ``output.value`` so that list views reading the OpenInference attributes
(Phoenix) show the exchange: plain text for one user text and one text answer, else the messages as JSON
(``_internal.list_values``), which is also what Langfuse shows when a span reaches it by another route. Langfuse
reads ``input.value`` *before* ``gen_ai.input.messages`` (conventions.md 4.2, "Input/output precedence"); on our
own route the list values are dropped from a span whose messages are present, so Langfuse renders the
``gen_ai.*`` messages themselves as a chat (system instructions included), and its trace list still shows the
root span's input and output. Spans without
messages (decorated functions, tools) keep their ``input.value``/``output.value``, which is what Langfuse shows
for them. The copy is made on the export thread and only for spans that hold both.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from evaltrace._internal import semconv
from evaltrace._internal.span_copy import replaced

# (messages attribute, the list-value attributes it supersedes in Langfuse)
_SUPERSEDED = (
    (semconv.GEN_AI_INPUT_MESSAGES, (semconv.INPUT_VALUE, semconv.INPUT_MIME_TYPE)),
    (semconv.GEN_AI_OUTPUT_MESSAGES, (semconv.OUTPUT_VALUE, semconv.OUTPUT_MIME_TYPE)),
)


def for_langfuse(span: ReadableSpan) -> ReadableSpan:
    """Return ``span``, or a copy without the list values its messages supersede in Langfuse."""
    attributes = span.attributes
    if not attributes:
        return span
    drop = [key for messages, keys in _SUPERSEDED if messages in attributes and keys[0] in attributes for key in keys]
    if not drop:
        return span
    return replaced(span, attributes={key: value for key, value in attributes.items() if key not in drop})


class LangfuseViewExporter(SpanExporter):
    """Wraps the Langfuse OTLP exporter; every span is passed on, LLM spans as :func:`for_langfuse` makes them.

    Args:
        inner: The OTLP/HTTP exporter aimed at Langfuse.
    """

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export ``spans`` through the wrapped exporter."""
        return self.inner.export([for_langfuse(span) for span in spans])

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the wrapped exporter."""
        return self.inner.force_flush(timeout_millis)
