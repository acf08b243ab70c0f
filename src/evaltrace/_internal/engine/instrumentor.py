"""``EngineInstrumentor``: a provider's ``BaseInstrumentor`` in a few class attributes.

``instrument()`` patches the endpoints' modules already imported and hooks the others' import
(``import_patches``); the codec module and the engine's wrapper code load with the first patch, so
``instrument_<provider>()`` imports neither the provider's SDK nor the codec. ``uninstrument()`` restores every
method and calls the codec's ``uninstrumented()``. BaseInstrumentor makes each subclass a singleton and
``instrument()`` idempotent.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Collection, Iterable
from typing import Any, ClassVar

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.engine.codec import Endpoint, owning_class
from evaltrace._internal.import_patches import ImportPatches, instrument_once, start_wrapping

__all__ = ["EngineInstrumentor", "instrument_once", "load", "owning_class"]


def load(path: str) -> Any:
    """Import ``"package.module:NAME"`` and return ``NAME``."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class EngineInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Base of every provider's instrumentor: set the class attributes, nothing else.

    Example:
        >>> class MistralInstrumentor(EngineInstrumentor):  # doctest: +SKIP
        ...     instruments = ("mistralai >= 1.0",)
        ...     endpoints = ENDPOINTS  # tuple[Endpoint, ...]
        ...     codec = "evaltrace.instrumentation.mistral.codec:CODEC"

    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per call) and
    ``meter_provider`` (default: the global OTel meter provider).
    """

    instruments: ClassVar[tuple[str, ...]] = ()
    """The package requirements (``"mistralai >= 1.0"``), as ``opentelemetry-instrument`` checks them."""

    endpoints: ClassVar[tuple[Endpoint, ...]] = ()
    """The endpoint rows to wrap."""

    codec: ClassVar[str] = ""
    """``"module:NAME"`` of the ``Codec`` instance, imported by the first patch."""

    wrappers: ClassVar[str] = "evaltrace._internal.engine.wrappers"
    """The module whose ``Telemetry`` and ``make_wrapper`` the patches use: the engine's, with ``codec``. OpenAI
    and Anthropic set ``codec = ""`` and name their own module (its import path is pinned by tests)."""

    _patches: ClassVar[ImportPatches]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._patches = ImportPatches(f"{cls.__name__}")

    def instrumentation_dependencies(self) -> Collection[str]:
        """Return the package requirements this instrumentation needs."""
        return self.instruments

    def _instrument(self, **kwargs: Any) -> None:
        providers = (kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        rows = self.endpoints
        modules: Iterable[str] = tuple(dict.fromkeys(row.module for row in rows))
        start_wrapping(self._patches, modules, rows, owning_class, self.wrappers, providers, self.codec or None)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._patches.stop()
        module, _, name = self.codec.partition(":")
        loaded = sys.modules.get(module) if module else None
        if loaded is not None:  # never imported: no client was patched, nothing to undo
            getattr(loaded, name).uninstrumented()
