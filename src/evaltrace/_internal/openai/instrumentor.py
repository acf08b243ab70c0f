"""``OpenAIInstrumentor``: patches the registry endpoints on ``instrument()``, restores them on ``uninstrument()``.

BaseInstrumentor makes the instance a singleton and ``instrument()`` idempotent; nothing is patched at import.
A resource package openai has not imported yet is patched when it is (openai loads most of them on first use),
and the wrapper code loads with the first patch: ``instrument_openai()`` itself imports neither.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.import_patches import ImportPatches, instrument_once, start_wrapping
from evaltrace._internal.openai import registry

_INSTRUMENTS = ("openai >= 1.40",)
_PATCHES = ImportPatches("openai instrumentation")


class OpenAIInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces the official ``openai`` client: chat completions, Responses and embeddings, sync and async.

    Example:
        >>> OpenAIInstrumentor().instrument()  # doctest: +SKIP
        >>> OpenAIInstrumentor().uninstrument()  # doctest: +SKIP

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
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
            "evaltrace._internal.openai.wrappers",
            providers,
        )

    def _uninstrument(self, **kwargs: Any) -> None:
        _PATCHES.stop()


def instrument_openai(**kwargs: Any) -> OpenAIInstrumentor:
    """Start tracing the openai client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_openai`, to undo.
    """
    return instrument_once(OpenAIInstrumentor(), kwargs)


def uninstrument_openai() -> None:
    """Restore the original openai methods (no-op when not instrumented)."""
    OpenAIInstrumentor().uninstrument()
