"""What a processor that forwards spans to others (the pipeline, the evaluation stand-in) calls at span start."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import SpanProcessor

_BASE_ON_START = SpanProcessor.on_start


def starting(processors: Sequence[SpanProcessor]) -> tuple[SpanProcessor, ...]:
    """The processors of ``processors`` that do something at span start: those overriding ``on_start``.

    A processor that forwards starts calls only these: the base class's ``on_start`` does nothing (the export
    queues inherit it), so calling it would be a Python call per span start for nothing. An ``on_start`` set on
    the instance counts too. The choice is made when the forwarding processor is built: an ``on_start`` patched
    later onto an instance, or onto a class that inherited the base one, is not called.
    """
    return tuple(
        p
        for p in processors
        if getattr(type(p), "on_start", None) is not _BASE_ON_START or "on_start" in getattr(p, "__dict__", ())
    )
