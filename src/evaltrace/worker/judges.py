"""The worker's own judge calls: each a trace of its own, sent to the worker's exporters and never evaluated.

``evaltrace worker`` has no ``configure()``: without a tracer provider its judges' traces (see
``evaluators/_judge_trace.py``) would go nowhere (or to an unrelated global provider). Unless ``configure()``
gave evaltrace a provider in this process, the worker installs one of its own while it runs, whose spans go to
the evaluation processor's ``on_end`` only, like received spans (never ``on_start``: the processor reads spans
fed without it as the worker's), where the ``evaltrace.judge`` marker forwards them unevaluated to the exporters.
"""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from evaltrace._internal import semconv, settings, tracing

SERVICE_NAME = "evaltrace-worker"


class _JudgeFeed(SpanProcessor):
    """Hands each ended judge span to the evaluation processor, as the receivers hand it received spans."""

    def __init__(self, processor: SpanProcessor) -> None:
        self._processor = processor

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: the processor must see these spans as it sees received ones, by their end only."""

    def on_end(self, span: ReadableSpan) -> None:
        """Forward the span (the processor never evaluates a judge span; it goes to the exporters)."""
        self._processor.on_end(span)

    def shutdown(self) -> None:
        """The worker shuts the processor down itself."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing buffered here."""
        return True


def install(processor: SpanProcessor) -> TracerProvider | None:
    """Make a provider feeding ``processor`` evaltrace's, when judge tracing is on and no provider is set.

    Returns:
        The provider installed (give it to :func:`uninstall`), or None when evaltrace has one already
        (``configure()`` ran in this process: judge traces go there) or ``EVALTRACE_TRACE_JUDGES=false``.

    Raises:
        ConfigError: ``EVALTRACE_TRACE_JUDGES`` is neither true nor false.
    """
    if not settings.trace_judges_from_env() or tracing.own_provider() is not None:
        return None
    provider = TracerProvider(resource=Resource.create({semconv.SERVICE_NAME: SERVICE_NAME}), shutdown_on_exit=False)
    provider.add_span_processor(_JudgeFeed(processor))
    tracing.set_tracer_provider(provider)
    return provider


def uninstall(provider: TracerProvider | None) -> None:
    """Undo :func:`install` (if the provider is still evaltrace's), once the processor has drained."""
    if provider is None:
        return
    if tracing.get_tracer_provider() is provider:
        tracing.set_tracer_provider(None)
    provider.shutdown()
