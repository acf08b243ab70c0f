"""Patch a client library's classes when their modules are imported, and undo every patch and pending hook.

``instrument_openai()`` used to import every resource module of openai to patch it, including the ones openai
itself loads only when first used (0.3 s and ~680 modules). Here a module already imported is patched at once;
one not imported yet gets a wrapt post-import hook and is patched when (if ever) the application imports it.

wrapt cannot remove a post-import hook, so each module gets one hook per process, which does nothing while
this patcher is stopped: ``stop()`` undoes the patches applied and disarms those not fired yet.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable
from functools import partial
from types import ModuleType
from typing import Any, Protocol, TypeVar

import wrapt
from opentelemetry.instrumentation.utils import unwrap

from evaltrace._internal.errors import handle_internal_errors

# Patch one imported module; return the (class, method name) pairs it wrapped, for unwrap() to restore.
PatchModule = Callable[[ModuleType], Iterable[tuple[type[Any], str]]]


class EndpointRow(Protocol):
    """What :func:`wrap_endpoints` reads of a registry row."""

    @property
    def module(self) -> str: ...

    @property
    def method(self) -> str: ...


E = TypeVar("E", bound=EndpointRow)


class _Instrumentor(Protocol):
    """What :func:`instrument_once` uses of a ``BaseInstrumentor``."""

    @property
    def is_instrumented_by_opentelemetry(self) -> bool: ...

    def instrument(self, **kwargs: Any) -> None: ...


InstrumentorT = TypeVar("InstrumentorT", bound=_Instrumentor)


def wrap_endpoints(
    module: ModuleType,
    endpoints: Iterable[E],
    owning_class: Callable[[ModuleType, E], type[Any] | None],
    make_wrapper: Callable[[E], Any],
) -> list[tuple[type[Any], str]]:
    """Wrap the methods of ``endpoints`` defined in ``module``; skip those this version lacks or already wrapped."""
    wrapped = []
    for endpoint in endpoints:
        if endpoint.module != module.__name__:
            continue
        cls = owning_class(module, endpoint)
        if cls is None or isinstance(cls.__dict__.get(endpoint.method), wrapt.FunctionWrapper):
            continue
        wrapt.wrap_function_wrapper(cls, endpoint.method, make_wrapper(endpoint))
        wrapped.append((cls, endpoint.method))
    return wrapped


class ImportPatches:
    """The patches of one library: applied per module, at start() or at the module's first import."""

    def __init__(self, what: str) -> None:
        """Create a stopped patcher.

        Args:
            what: What is being patched, for the internal-error log (``"openai instrumentation"``).
        """
        self._what = what
        # Reentrant: wrapt runs a hook immediately, inside register_post_import_hook(), when the module is loaded.
        self._lock = threading.RLock()
        self._patch: PatchModule | None = None  # None: stopped, hooks that fire do nothing
        self._hooked: set[str] = set()
        self._wrapped: list[tuple[type[Any], str]] = []

    def start(self, modules: Iterable[str], patch: PatchModule) -> None:
        """Patch ``modules`` already imported with ``patch`` now, the others when they are imported."""
        with self._lock:
            self._patch = patch
            for name in modules:
                if name not in self._hooked:
                    self._hooked.add(name)
                    wrapt.register_post_import_hook(self._on_import, name)  # fires now if already imported
                else:
                    module = sys.modules.get(name)
                    if module is not None:
                        self._apply(module)

    def stop(self) -> None:
        """Restore every patched method and disarm the hooks that have not fired."""
        with self._lock:
            self._patch = None
            while self._wrapped:
                cls, method = self._wrapped.pop()
                unwrap(cls, method)

    @property
    def patched(self) -> list[tuple[type[Any], str]]:
        """The (class, method name) pairs patched now."""
        with self._lock:
            return list(self._wrapped)

    def _on_import(self, module: ModuleType) -> None:
        # Runs inside the application's import statement: our failure must never break its import.
        with handle_internal_errors(f"{self._what}: patching {module.__name__}"), self._lock:
            if self._patch is not None:
                self._apply(module)

    def _apply(self, module: ModuleType) -> None:
        if self._patch is not None:
            self._wrapped.extend(self._patch(module))


def start_wrapping(
    patches: ImportPatches,
    modules: Iterable[str],
    endpoints: Iterable[E],
    owning_class: Callable[[ModuleType, E], type[Any] | None],
    wrappers: str,
    providers: tuple[Any, Any],
    codec: str | None = None,
) -> None:
    """Wrap ``endpoints`` in ``modules`` (now, or when imported) with the ``make_wrapper`` of module ``wrappers``.

    The wrapper module and its ``Telemetry(tracer_provider, meter_provider)`` are loaded by the first patch, so
    instrumenting imports no wrapper code and no client module. With ``codec`` (``"module:NAME"``, loaded then
    too), ``wrappers`` is the engine's and each wrapper is made with ``call_class=Call.for_codec(codec)``.
    """
    rows = list(endpoints)
    made: list[Callable[[Any], Any]] = []

    def patch(module: ModuleType) -> list[tuple[type[Any], str]]:
        code = importlib.import_module(wrappers)
        if not made:
            telemetry = code.Telemetry(*providers)
            if codec is None:
                made.append(partial(code.make_wrapper, telemetry=telemetry))
            else:
                name, _, attr = codec.partition(":")
                call_class = code.Call.for_codec(getattr(importlib.import_module(name), attr))
                made.append(partial(code.make_wrapper, telemetry=telemetry, call_class=call_class))
        return wrap_endpoints(module, rows, owning_class, made[0])

    patches.start(modules, patch)


def instrument_once(instrumentor: InstrumentorT, kwargs: dict[str, Any]) -> InstrumentorT:
    """``instrumentor.instrument(**kwargs)`` unless it is instrumented already; return it.

    Already instrumented (by ``opentelemetry-instrument`` through our entry point, or an earlier call) is kept as is,
    without BaseInstrumentor's "already instrumented" warning for what is a normal start-up order.
    """
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(**kwargs)
    return instrumentor
