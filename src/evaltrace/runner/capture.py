"""Run one (case, variant) under tracing and build its Trace from the spans it produced.

A private TracerProvider is installed as evaltrace's provider for the duration of a run; a collector keeps
finished spans per trace id, so each case (one root span, one trace id) gets exactly its own spans even when
cases run concurrently. The root span carries ``evaltrace.run_id`` / ``case_id`` / ``variant`` and the case
input and output, and ``evaltrace.context(attributes=...)`` stamps the same ids on every span inside.
"""

from __future__ import annotations

import threading
import traceback
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, Tracer, TraceState
from opentelemetry.util.types import Attributes

from evaltrace._internal import semconv as sc
from evaltrace._internal.daemon_pool import UserAbort
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.tracing import INSTRUMENTATION_NAME, set_tracer_provider
from evaltrace._version import __version__
from evaltrace.context import ContextAttributesProcessor, context
from evaltrace.mapping import trace_from_spans
from evaltrace.runner.adapters import Adapter, AdapterFailure
from evaltrace.runner.outputs import finish_trace
from evaltrace.runner.response_mapping import MappedOutput
from evaltrace.runner.span_timeline import span_timeline
from evaltrace.schema import EvalCase, Trace, TraceError

__all__ = ["CASE_SPAN_NAME", "CaseCapture", "capture_run"]

CASE_SPAN_NAME = "evaltrace.case"
"""Name of the root span of one (case, variant) execution."""
_STACK_LIMIT = 4000


class _NoJudgeTraces(Sampler):
    """Drop a judge call's own trace (``evaltrace.judge``, set at its start): it belongs to no case.

    A run keeps only its cases' traces; dropped at the start, the judge trace is never recorded, so no result
    names a trace the run does not keep.
    """

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """DROP for a judge span; the SDK's default decision (parent-based, always on) for the rest."""
        if attributes and attributes.get(sc.EVALTRACE_JUDGE):
            return SamplingResult(Decision.DROP)
        return DEFAULT_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        """Named in the SDK's debug output."""
        return "NoJudgeTraces"


class _Collector(SpanProcessor):
    """Keeps finished spans grouped by trace id until the case that owns the trace takes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: defaultdict[int, list[ReadableSpan]] = defaultdict(list)

    def on_end(self, span: ReadableSpan) -> None:
        """Store the span under its trace id (O(1))."""
        if span.context is not None:
            with self._lock:
                self._spans[span.context.trace_id].append(span)

    def pop(self, trace_id: int) -> list[ReadableSpan]:
        """Take (and forget) the spans of one trace."""
        with self._lock:
            return self._spans.pop(trace_id, [])

    def shutdown(self) -> None:
        """Drop what is left."""
        with self._lock:
            self._spans.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is exported."""
        return True


class CaseCapture:
    """Executes cases with an adapter on a private provider and returns their Traces."""

    def __init__(self, tracer: Tracer, collector: _Collector) -> None:
        self._tracer = tracer
        self._collector = collector

    async def execute(
        self,
        adapter: Adapter,
        case: EvalCase,
        variant_name: str,
        run_id: str,
        *,
        case_input: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Trace:
        """Run ``case`` through ``adapter``; the system's failures become ``Trace.error``, never exceptions.

        Args:
            adapter: The variant's adapter.
            case: The case.
            variant_name: The variant's name.
            run_id: The run's id.
            case_input: What the system is called with instead of ``case.input`` (one turn of a conversation).
            session_id: ``session.id`` stamped on every span (the turns of a simulated-user case share one).

        Returns:
            The Trace built from the case's spans.
        """
        ids = {sc.EVALTRACE_RUN_ID: run_id, sc.EVALTRACE_CASE_ID: case.id, sc.EVALTRACE_VARIANT: variant_name}
        given = dict(case.input if case_input is None else case_input)
        failure: TraceError | None = None
        output: Any = None
        with context(session_id=session_id, attributes=ids):
            attributes = {**ids, sc.EVALTRACE_SPAN_KIND: sc.KIND_TASK, sc.INPUT_VALUE: capped_json(given)}
            with self._tracer.start_as_current_span(
                CASE_SPAN_NAME, attributes=attributes, record_exception=False, set_status_on_exception=False
            ) as span:
                try:
                    output = await adapter.call(given)
                except AdapterFailure as exc:
                    failure = TraceError(type=exc.error_type, message=exc.message)
                except Exception as exc:
                    stack = "".join(traceback.format_exception(exc))[-_STACK_LIMIT:]
                    # SystemExit/KeyboardInterrupt raised by the system arrive wrapped: name what it raised.
                    raised = exc.cause if isinstance(exc, UserAbort) else exc
                    failure = TraceError(type="exception", message=f"{type(raised).__name__}: {raised}", stack=stack)
                if failure is None:
                    raw = output.body if isinstance(output, MappedOutput) else output
                    span.set_attribute(sc.OUTPUT_VALUE, capped_json(raw))
                else:
                    span.set_status(Status(StatusCode.ERROR, failure.message))
        span_context = span.get_span_context()
        spans = self._collector.pop(span_context.trace_id)
        # The conversation's ends are added by finish_trace(), which knows what the adapter returned.
        trace = trace_from_spans(spans, root=span_context.span_id, conversation_ends=False)
        extra = {**span_timeline(spans), **(getattr(adapter, "trace_extra", None) or {})}
        return finish_trace(trace, output, failure, extra)


@contextmanager
def capture_run(service_name: str) -> Iterator[CaseCapture]:
    """Install a private TracerProvider as evaltrace's provider for the block and yield a CaseCapture.

    The previous provider is restored afterwards. Spans made through evaltrace's tracer (decorators, the
    OpenAI instrumentation) inside the block are captured; they are not exported anywhere else.

    Args:
        service_name: ``service.name`` of the provider's resource (the eval name).
    """
    collector = _Collector()
    provider = TracerProvider(resource=Resource.create({sc.SERVICE_NAME: service_name}), sampler=_NoJudgeTraces())
    provider.add_span_processor(ContextAttributesProcessor())
    provider.add_span_processor(collector)
    previous = set_tracer_provider(provider)
    try:
        yield CaseCapture(provider.get_tracer(INSTRUMENTATION_NAME, __version__), collector)
    finally:
        set_tracer_provider(previous)
        provider.shutdown()
