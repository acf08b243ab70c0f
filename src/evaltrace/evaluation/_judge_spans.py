"""Judge calls made in the evaluation process, traced like those made in the application's own process.

The evaluation process (``configure(evaluation="process")``) has no exporters of its own: a judge's trace (see
``evaluators/_judge_trace.py``) made there would go nowhere. The child installs :class:`Collector` as evaltrace's
tracer provider, under the application's settings and resource; every span that ends there is kept (bounded) and
sent back with the next answer as compact records with their links. The parent rebuilds them and hands them to
the evaluation processor as ended spans, where the ``evaltrace.judge`` marker sends them to the exporters
unevaluated, exactly as a judge call traced in the application's process goes.

A child that makes spans faster than answers carry them away drops the excess, counted and sent along
(``stats()["process"]["judge_spans_dropped"]``), never silently.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from evaltrace._internal import tracing
from evaltrace._version import __version__
from evaltrace.evaluation._records import from_records, links_of, to_records

MAX_HELD = 10_000
"""Spans held in the child between two answers; more are dropped and counted."""

# What an answer carries: (records, resources, links, dropped since the last answer).
Shipment = tuple[list[Any], list[dict[str, Any]], list[Any], int]


class Collector(SpanProcessor):
    """Keeps the spans that end in the evaluation process until the next answer takes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[ReadableSpan] = []
        self._dropped = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: spans are shipped once ended."""

    def on_end(self, span: ReadableSpan) -> None:
        """Keep ``span`` for the next answer (or count it dropped when too many wait)."""
        with self._lock:
            if len(self._held) < MAX_HELD:
                self._held.append(span)
            else:
                self._dropped += 1

    def take(self) -> Shipment | None:
        """The spans ended since the last call, as records; None when there are none and nothing was dropped."""
        with self._lock:
            held, self._held = self._held, []
            dropped, self._dropped = self._dropped, 0
        if not held and not dropped:
            return None
        records, resources = to_records(held)
        return records, resources, links_of(held), dropped

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is exported from here."""
        return True


def install(resource: Mapping[str, Any] | None) -> Collector:
    """Make a provider feeding a new :class:`Collector` evaltrace's in this (the evaluation) process."""
    collector = Collector()
    provider = TracerProvider(resource=Resource(dict(resource or {})), shutdown_on_exit=False)
    provider.add_span_processor(collector)
    tracing.set_tracer_provider(provider)
    return collector


def resource_attributes() -> dict[str, Any] | None:
    """The application's resource, for the child's spans (None: evaltrace follows a provider it does not own)."""
    provider = tracing.get_tracer_provider()
    resource = getattr(provider, "resource", None)
    return dict(resource.attributes) if isinstance(resource, Resource) else None


def rebuild(shipment: Shipment) -> list[ReadableSpan]:
    """The ended spans of a :meth:`Collector.take` shipment, as the parent's exporters take them."""
    records, resources, links, _ = shipment
    scope = InstrumentationScope(tracing.INSTRUMENTATION_NAME, __version__)
    return from_records(records, resources, links, scope)
