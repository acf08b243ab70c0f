"""``evaltrace.end_trace()``: declare the current trace complete, so trace-level evaluation need not wait."""

from __future__ import annotations

from opentelemetry import trace as otel_trace

from evaltrace._internal import semconv

__all__ = ["end_trace"]


def end_trace() -> bool:
    """Mark the current span as the end of its trace.

    Trace-level evaluators normally wait for the root span to end and then for a quiet period without new
    spans (``trace_quiet_period_s``). Once a marked span has ended, the trace counts as complete as soon as its
    root has ended: no quiet period. The mark is a span attribute (``evaltrace.trace.end=true``), so it also
    works when the spans reach ``evaltrace worker`` from several services. Call it inside the span that
    finishes the work, typically the root::

        with tracer.start_as_current_span("handle request"):
            answer = agent.run(question)
            evaltrace.end_trace()

    Never raises.

    Returns:
        True when a recording span was marked; False when there is no current span (or it is not recorded).
    """
    try:
        span = otel_trace.get_current_span()
        if not span.is_recording():
            return False
        span.set_attribute(semconv.EVALTRACE_TRACE_END, True)
        return True
    except Exception:  # never break the application over a marker
        return False
