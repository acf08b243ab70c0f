"""Global registration of the handler through ``langchain_core``'s configure hook.

``register_configure_hook`` is how LangChain's own tracers join every run: each time a callback manager is
configured (every ``invoke`` / ``stream`` / ``batch`` and every child run), LangChain reads the hook's variable
and adds the handler it holds, unless the manager has one of that class already (so a handler passed in
``callbacks=[...]`` is not doubled). The variable is read with ``.get()`` only; ours is a process-wide slot
rather than a ``ContextVar``, so a handler registered once is seen by every thread and task. LangChain offers no
way to remove a hook: uninstrumenting empties the slot, and an empty slot adds nothing.

``LangChainInstrumentor().instrument()`` (what ``opentelemetry-instrument`` calls, through the
``evaltrace_langchain`` entry point) imports nothing of LangChain: the hook is registered when the application
imports ``langchain_core.tracers.context`` (at once when it is imported already), so an application without
LangChain pays nothing and one with it loads no LangChain module earlier than it would.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Collection
from types import ModuleType
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.import_patches import instrument_once

_HOOKS_MODULE = "langchain_core.tracers.context"  # where register_configure_hook and the hooks list live
# Reentrant: wrapt runs the import hook inside register_post_import_hook() when the module is loaded already.
_lock = threading.RLock()


class _Slot:
    """The hook's variable: ``get()`` returns the registered handler, or None when uninstrumented."""

    def __init__(self) -> None:
        self.handler: Any = None

    def get(self, default: Any = None) -> Any:
        """The handler LangChain adds to each run's callbacks (None: add nothing)."""
        handler = self.handler
        return default if handler is None else handler


_slot = _Slot()
_hooked = False  # our configure hook is in LangChain's list (once per process: it cannot be removed)
_import_hooked = False  # our post-import hook on _HOOKS_MODULE is registered (once per process, like wrapt's)
_wanted = False  # instrumented: the handler is (or is made when LangChain loads) in the slot
_tracer_provider: Any = None


def _activate(module: ModuleType) -> None:
    """LangChain's hooks module is loaded: register our configure hook once, and put a handler in the slot."""
    global _hooked
    # Runs inside the application's import statement: our failure must never break its import.
    with handle_internal_errors("registering the LangChain callback handler"), _lock:
        if not _wanted or _slot.handler is not None:
            return
        from evaltrace.instrumentation.langchain._handler import EvaltraceCallbackHandler

        if not _hooked:
            # inheritable: child runs (a graph's nodes, a chain's steps) get the handler from their parent.
            module.register_configure_hook(_slot, inheritable=True, handle_class=EvaltraceCallbackHandler)
            _hooked = True
        _slot.handler = EvaltraceCallbackHandler(tracer_provider=_tracer_provider)


class LangChainInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """LangChain / LangGraph as an OpenTelemetry instrumentor: what ``opentelemetry-instrument`` loads.

    Its entry point (``evaltrace_langchain``) lets ``opentelemetry-instrument python app.py`` record an
    application's LangChain and LangGraph runs without code changes; ``instrument()`` registers the same handler
    as :func:`instrument_langchain` (one state: either undoes the other), when LangChain is imported.
    ``instrument()`` accepts ``tracer_provider`` (default: evaltrace's provider, looked up per span); the handler
    records no metrics, so a ``meter_provider`` is ignored.

    Example:
        >>> LangChainInstrumentor().instrument()  # doctest: +SKIP
        >>> LangChainInstrumentor().uninstrument()  # doctest: +SKIP
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """Return the package requirement: ``langchain-core``, whose callback hook records the runs."""
        return ("langchain-core >= 0.3",)

    def _instrument(self, **kwargs: Any) -> None:
        global _import_hooked, _wanted, _tracer_provider
        with _lock:
            _wanted, _tracer_provider = True, kwargs.get("tracer_provider")
            if not _import_hooked:
                _import_hooked = True
                wrapt.register_post_import_hook(_activate, _HOOKS_MODULE)  # runs now if LangChain is loaded
            elif _HOOKS_MODULE in sys.modules:
                _activate(sys.modules[_HOOKS_MODULE])

    def _uninstrument(self, **kwargs: Any) -> None:
        global _wanted
        with _lock:
            _wanted = False
            _slot.handler = None


def instrument_langchain() -> Any:
    """Record every LangChain and LangGraph run as evaltrace spans (idempotent); return the handler.

    Needs ``langchain-core`` (``pip install 'evaltrace[langchain]'``). Model calls whose SDK evaltrace already
    instruments (``instrument_openai()``, ``instrument_anthropic()``) keep that SDK span as their one span.

    Returns:
        The registered :class:`~evaltrace.instrumentation.langchain.EvaltraceCallbackHandler`.
    """
    # Loaded here (a missing extra is this ImportError), so the handler is in the slot once instrumented.
    import langchain_core.tracers.context  # noqa: F401

    instrument_once(LangChainInstrumentor(), {"skip_dep_check": True})
    return _slot.handler


def uninstrument_langchain() -> None:
    """Stop recording LangChain runs (no-op when not instrumented); runs in flight still end their spans."""
    LangChainInstrumentor().uninstrument()


def is_instrumented() -> bool:
    """Whether ``instrument_langchain()`` (or the instrumentor) is in effect."""
    return _wanted
