"""``OpenAIInstrumentor``: patches the registry endpoints on ``instrument()``, restores them on ``uninstrument()``.

BaseInstrumentor makes the instance a singleton and ``instrument()`` idempotent; nothing is patched at import.
A resource package openai has not imported yet is patched when it is (openai loads most of them on first use),
and the wrapper code loads with the first patch: ``instrument_openai()`` itself imports neither.
"""

from __future__ import annotations

from collections.abc import Collection
from types import ModuleType
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.import_patches import ImportPatches, wrap_endpoints
from evaltrace._internal.openai import registry

if TYPE_CHECKING:
    from evaltrace._internal.openai.wrappers import Telemetry

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
        telemetry: list[Telemetry] = []  # built by the first patch, with the wrapper code

        def patch(module: ModuleType) -> list[tuple[type[Any], str]]:
            from evaltrace._internal.openai.wrappers import Telemetry, make_wrapper

            if not telemetry:
                telemetry.append(Telemetry(*providers))
            return wrap_endpoints(
                module, registry.ENDPOINTS, registry.owning_class, lambda e: make_wrapper(e, telemetry[0])
            )

        _PATCHES.start(registry.MODULES, patch)

    def _uninstrument(self, **kwargs: Any) -> None:
        _PATCHES.stop()


def instrument_openai(**kwargs: Any) -> OpenAIInstrumentor:
    """Start tracing the openai client (idempotent); return the instrumentor.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.

    Returns:
        The (singleton) instrumentor; call ``uninstrument()`` on it, or :func:`uninstrument_openai`, to undo.
    """
    instrumentor = OpenAIInstrumentor()
    # Already instrumented (by ``opentelemetry-instrument`` through our entry point, or an earlier call): keep
    # that, without BaseInstrumentor's "already instrumented" warning for what is a normal start-up order.
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(**kwargs)
    return instrumentor


def uninstrument_openai() -> None:
    """Restore the original openai methods (no-op when not instrumented)."""
    OpenAIInstrumentor().uninstrument()
