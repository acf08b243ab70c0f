"""``AnthropicInstrumentor``: patches the registry endpoints on ``instrument()``, restores them on ``uninstrument()``.

BaseInstrumentor makes the instance a singleton and ``instrument()`` idempotent; nothing is patched at import.
A resource package anthropic has not imported yet is patched when it is, and the wrapper code loads with the
first patch (see ``evaltrace._internal.import_patches``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.anthropic import registry
from evaltrace._internal.import_patches import ImportPatches, instrument_once, start_wrapping

_INSTRUMENTS = ("anthropic >= 0.40",)
_PATCHES = ImportPatches("anthropic instrumentation")


class AnthropicInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces the official ``anthropic`` client: ``messages.create``, ``.stream`` and ``.parse``, sync and async.

    Example:
        >>> AnthropicInstrumentor().instrument()  # doctest: +SKIP
        >>> AnthropicInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider). The SDK's own call span (anthropic >= 2
    traces its calls itself) is withheld inside the calls we trace, so one call makes one span; the client's other
    calls keep it.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """Return the package requirements this instrumentation needs."""
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        providers = (kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        start_wrapping(
            _PATCHES,
            registry.MODULES,
            registry.ENDPOINTS,
            registry.owning_class,
            "evaltrace._internal.anthropic.wrappers",
            providers,
        )

    def _uninstrument(self, **kwargs: Any) -> None:
        _PATCHES.stop()
        registry.restore_sdk_span()


def instrument_anthropic(**kwargs: Any) -> AnthropicInstrumentor:
    """Start tracing the anthropic client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_anthropic`, to undo.
    """
    return instrument_once(AnthropicInstrumentor(), kwargs)


def uninstrument_anthropic() -> None:
    """Restore the original anthropic methods (no-op when not instrumented)."""
    AnthropicInstrumentor().uninstrument()
