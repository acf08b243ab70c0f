"""The evaluation processor of a ``configure()`` with no evaluator, built on first use.

``configure()`` keeps its evaluation processor on by default (it runs the evaluators decorators attach later),
but building it imports the evaluation engine and the pydantic schema: most of ``configure()``'s start-up when no
evaluator is configured. :class:`DeferredEvaluation` stands in for it: while no decorator has attached an
evaluator (the registry is empty) every span passes straight through to the export processors, exactly what the
real processor does then; the first span started or ended once one is registered builds the real processor, and
so does any use of ``handle.evaluation_processor`` (``stats()``, ``end_session()``, a backfill's limits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from evaltrace._internal import forks
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.evaluator_registry import registered
from evaltrace._internal.export_counts import shutdown_downstream
from evaltrace._internal.flush_results import flush_call
from evaltrace._internal.forwarding import starting


class DeferredEvaluation(SpanProcessor):
    """Pass spans to ``downstream`` until an evaluator can apply; then build the processor and delegate to it.

    Args:
        build: Builds the real evaluation processor (over the same ``downstream``); called at most once.
        downstream: The export processors the real processor forwards to.
    """

    def __init__(self, build: Callable[[], SpanProcessor], downstream: Sequence[SpanProcessor]) -> None:
        self._build = build
        self._downstream = tuple(downstream)
        self._starting = starting(downstream)  # the export queues do nothing at start: none is called for it
        self._real: SpanProcessor | None = None
        self._lock = threading.Lock()
        self._shutdown = False
        forks.reinit_after_fork(self)

    def _reinit_after_fork(self) -> None:
        self._lock = threading.Lock()

    @property
    def built(self) -> SpanProcessor | None:
        """The real processor, if it was built."""
        return self._real

    def processor(self) -> SpanProcessor:
        """The real evaluation processor, built now if it was not yet (imports the evaluation engine)."""
        real = self._real
        if real is None:
            with self._lock:
                real = self._real
                if real is None:
                    real = self._real = self._build()
                    if self._shutdown:  # asked for after shutdown (its stats, say): as shut down as this one
                        real.shutdown()
        return real

    def _live(self) -> SpanProcessor | None:
        """The processor spans go through now: None (pass through) while no evaluator can apply."""
        real = self._real
        if real is None and registered and not self._shutdown:
            try:
                real = self.processor()
            except Exception:  # our failure must not reach the application: spans keep passing through
                log_internal_error("building the evaluation processor")
                return None
        return real

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Delegate, or forward the start to ``downstream`` while no evaluator can apply."""
        real = self._real if self._real is not None or not registered else self._live()
        if real is not None:
            real.on_start(span, parent_context=parent_context)
            return
        for processor in self._starting:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception:
                log_internal_error("forwarding a span start to a downstream processor")

    def on_end(self, span: ReadableSpan) -> None:
        """Delegate, or forward ``span`` to ``downstream`` while no evaluator can apply."""
        real = self._real if self._real is not None or not registered else self._live()
        if real is not None:
            real.on_end(span)
            return
        for processor in self._downstream:
            try:
                processor.on_end(span)
            except Exception:
                log_internal_error("forwarding a span to a downstream processor")

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Delegate, or flush ``downstream`` within the timeout."""
        if self._real is not None:
            return self._real.force_flush(timeout_millis)
        deadline = time.monotonic() + timeout_millis / 1000
        ok = True
        for processor in self._downstream:
            # None (the SDK's base force_flush before 1.31) is success; 0, "" or an exception a failure
            timeout = max(0, int((deadline - time.monotonic()) * 1000))
            ok = flush_call(processor.force_flush, timeout, "flushing a downstream processor") and ok
        return ok

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Delegate, or shut ``downstream`` down within the timeout; nothing is built afterwards."""
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            real = self._real
        if real is not None:
            real.shutdown(timeout_millis)  # type: ignore[call-arg]  # ours takes the deadline
            return
        deadline = time.monotonic() + timeout_millis / 1000
        shutdown_downstream(self._downstream, deadline)
