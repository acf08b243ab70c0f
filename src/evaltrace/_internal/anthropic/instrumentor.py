"""``AnthropicInstrumentor``: patches every registry endpoint on ``instrument()``, restores them on ``uninstrument()``.

BaseInstrumentor makes the instance a singleton and ``instrument()`` idempotent; nothing is patched at import.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap

from evaltrace._internal.anthropic import registry
from evaltrace._internal.anthropic.wrappers import Telemetry, make_wrapper

_INSTRUMENTS = ("anthropic >= 0.40",)


class AnthropicInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces the official ``anthropic`` client: ``messages.create`` and ``messages.stream``, sync and async.

    Example:
        >>> AnthropicInstrumentor().instrument()  # doctest: +SKIP
        >>> AnthropicInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider). The SDK's own call span (anthropic >= 2
    traces its calls itself) is turned off on each client we trace, so one call makes one span.
    """

    # BaseInstrumentor is a singleton whose __init__ runs on every construction: no state in __init__.
    _wrapped: list[tuple[type[Any], str]]

    def instrumentation_dependencies(self) -> Collection[str]:
        """Return the package requirements this instrumentation needs."""
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        telemetry = Telemetry(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        self._wrapped = []
        for endpoint in registry.ENDPOINTS:
            cls = registry.resolve_class(endpoint)
            if cls is None or isinstance(cls.__dict__.get(endpoint.method), wrapt.FunctionWrapper):
                continue
            wrapt.wrap_function_wrapper(cls, endpoint.method, make_wrapper(endpoint, telemetry))
            self._wrapped.append((cls, endpoint.method))

    def _uninstrument(self, **kwargs: Any) -> None:
        wrapped = getattr(self, "_wrapped", [])
        while wrapped:
            cls, method = wrapped.pop()
            unwrap(cls, method)
        registry.restore_sdk_span()


def instrument_anthropic(**kwargs: Any) -> AnthropicInstrumentor:
    """Start tracing the anthropic client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_anthropic`, to undo.
    """
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(**kwargs)
    return instrumentor


def uninstrument_anthropic() -> None:
    """Restore the original anthropic methods (no-op when not instrumented)."""
    AnthropicInstrumentor().uninstrument()
