"""What sits around the export queues: their shutdown in turn by one deadline, and their counts as a metric.

Split from :mod:`evaltrace._internal.export_queue` (which keeps the queue itself) to keep each module small.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

from evaltrace._internal import semconv
from evaltrace._internal.errors import log_internal_error
from evaltrace._internal.export_queue import ExportQueue


def shutdown_downstream(processors: Sequence[SpanProcessor], deadline: float) -> None:
    """Shut each processor down in turn by ``deadline`` (``time.monotonic()``); a failure is logged, never raised.

    Our queues are given what is left of the deadline (at least 50 ms, so each still drains what it can); the SDK's
    processors take no timeout. Used by every processor that forwards spans downstream (the evaluation processor,
    the deferred one that stands in for it).
    """
    for processor in processors:
        try:
            if isinstance(processor, ExportQueue):  # ours takes the deadline; the SDK's take none
                processor.shutdown(max(50, int((deadline - time.monotonic()) * 1000)))
            else:
                processor.shutdown()
        except Exception:
            log_internal_error("shutting down a downstream processor")


def observe_export_counts(meter_provider: Any, queues: Sequence[ExportQueue]) -> None:
    """Publish every queue's counters as the observable counter ``evaltrace.export.spans`` (exporter, outcome).

    Args:
        meter_provider: The MeterProvider (None: the global one, a no-op unless the application set one).
        queues: The queues to observe.
    """
    if not queues:
        return
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation

    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(count, {semconv.EVALTRACE_EXPORTER_NAME: queue.name, semconv.EVALTRACE_EXPORT_OUTCOME: key})
            for queue in queues
            for key, count in queue.stats().items()
            if key in _OUTCOMES
        ]

    meter = (meter_provider or metrics.get_meter_provider()).get_meter("evaltrace")
    meter.create_observable_counter(
        semconv.METRIC_EXPORT_SPANS, [observe], unit="{span}", description="Spans by export outcome"
    )


_OUTCOMES = frozenset(("exported", "export_failed", "dropped_queue_full", "dropped_queue_bytes", "dropped_shutdown"))
