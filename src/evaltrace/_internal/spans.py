"""Span specifications for the decorators, and the three steps of a decorated span's life.

A ``SpanSpec`` is computed once per decorated function (name, kind, static attributes, argument binding) so
that each call only starts a span, captures bounded JSON and ends it. Values are JSON (``input.value`` /
``output.value``); we do not add ``*.mime_type`` attributes: each extra attribute costs the SDK a lock and a
validation per span, and Phoenix and Langfuse both render the JSON text without them.

A span without captured input starts with ``SpanSpec.preset``: the static attributes validated once, when the
function was decorated, instead of by the SDK on every call (``deferred_attributes.start_span``; it takes the
SDK's own path whenever a sampler could read them or a limit could bite). That was ~18k of the ~160k
instructions of a capture-off call (benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv, settings
from evaltrace._internal.capture import ArgBinder, capture_arguments, capture_value
from evaltrace._internal.deferred_attributes import Preset
from evaltrace._internal.deferred_attributes import start_span as start_preset_span
from evaltrace._internal.errors import handle_internal_errors, logger, reraise_internal_errors
from evaltrace._internal.tracing import get_tracer


@dataclass(frozen=True)
class SpanSpec:
    """Everything a decorator knows about its spans before the first call."""

    name: str
    kind: SpanKind
    attributes: Mapping[str, AttributeValue]
    input_attribute: str
    output_attribute: str
    binder: ArgBinder
    capture_input: bool | None  # None: follow settings.capture_content
    capture_output: bool | None
    preset: Preset | None = None  # ``attributes`` validated once; None: they go through the SDK's check per span

    def wants_input(self) -> bool:
        """Whether arguments are captured on this call."""
        return settings.current.capture_content if self.capture_input is None else self.capture_input

    def wants_output(self) -> bool:
        """Whether the result is captured on this call."""
        return settings.current.capture_content if self.capture_output is None else self.capture_output


def error_type(exc: BaseException) -> str:
    """``error.type`` for an exception: its qualified class name (builtins without the module)."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def start_span(
    spec: SpanSpec, args: tuple[Any, ...], kwargs: dict[str, Any], parent: otel_context.Context | None = None
) -> Span:
    """Start (not activate) the span of one call, with its static and input attributes."""
    attributes = spec.attributes
    wanted = spec.capture_input  # spec.wants_input(), inlined: this runs on every decorated call
    if settings.current.capture_content if wanted is None else wanted:
        try:
            attributes = {**attributes, spec.input_attribute: capture_arguments(spec.binder, args, kwargs)}
        except Exception:  # capture is best effort; the call goes ahead untraced-input
            if reraise_internal_errors():
                raise
            logger.exception("evaltrace internal error while capturing arguments")
    preset = spec.preset
    if attributes is spec.attributes and preset is not None:  # nothing per call to add: the validated preset
        return start_preset_span(get_tracer(), spec.name, spec.kind, preset, parent)
    return get_tracer().start_span(spec.name, context=parent, kind=spec.kind, attributes=attributes)


def end_ok(span: Span, spec: SpanSpec, value: Any) -> None:
    """Record the result (when captured) and end the span."""
    wanted = spec.capture_output  # spec.wants_output(), inlined
    if settings.current.capture_content if wanted is None else wanted:
        try:
            span.set_attribute(spec.output_attribute, capture_value(value))
        except Exception:
            if reraise_internal_errors():
                raise
            logger.exception("evaltrace internal error while capturing the result")
    span.end()


def end_error(span: Span, exc: BaseException) -> None:
    """Record ``exc`` on the span (status ERROR, error.type, exception event) and end it."""
    with handle_internal_errors("recording an exception"):
        span.set_attribute(semconv.ERROR_TYPE, error_type(exc))
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.record_exception(exc)
    span.end()
