"""Global registration of the handler through ``langchain_core``'s configure hook.

``register_configure_hook`` is how LangChain's own tracers join every run: each time a callback manager is
configured (every ``invoke`` / ``stream`` / ``batch`` and every child run), LangChain reads the hook's variable
and adds the handler it holds, unless the manager has one of that class already (so a handler passed in
``callbacks=[...]`` is not doubled). The variable is read with ``.get()`` only; ours is a process-wide slot
rather than a ``ContextVar``, so a handler registered once is seen by every thread and task. LangChain offers no
way to remove a hook: uninstrumenting empties the slot, and an empty slot adds nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from evaltrace._internal.import_patches import instrument_once

_lock = threading.Lock()


class _Slot:
    """The hook's variable: ``get()`` returns the registered handler, or None when uninstrumented."""

    def __init__(self) -> None:
        self.handler: Any = None

    def get(self, default: Any = None) -> Any:
        """The handler LangChain adds to each run's callbacks (None: add nothing)."""
        handler = self.handler
        return default if handler is None else handler


_slot = _Slot()
_hooked = False


class LangChainInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """LangChain / LangGraph as an OpenTelemetry instrumentor: what ``opentelemetry-instrument`` loads.

    Its entry point (``evaltrace_langchain``) lets ``opentelemetry-instrument python app.py`` record an
    application's LangChain and LangGraph runs without code changes; ``instrument()`` registers the same handler
    as :func:`instrument_langchain` (one state: either undoes the other). ``instrument()`` accepts
    ``tracer_provider`` (default: evaltrace's provider, looked up per span); the handler records no metrics, so a
    ``meter_provider`` is ignored.

    Example:
        >>> LangChainInstrumentor().instrument()  # doctest: +SKIP
        >>> LangChainInstrumentor().uninstrument()  # doctest: +SKIP
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """Return the package requirement: ``langchain-core``, whose callback hook records the runs."""
        return ("langchain-core >= 0.3",)

    def _instrument(self, **kwargs: Any) -> None:
        global _hooked
        from langchain_core.tracers.context import register_configure_hook

        from evaltrace.instrumentation.langchain._handler import EvaltraceCallbackHandler

        with _lock:
            if not _hooked:
                # inheritable: child runs (a graph's nodes, a chain's steps) get the handler from their parent.
                register_configure_hook(_slot, inheritable=True, handle_class=EvaltraceCallbackHandler)  # type: ignore[arg-type]
                _hooked = True
            if _slot.handler is None:
                _slot.handler = EvaltraceCallbackHandler(tracer_provider=kwargs.get("tracer_provider"))

    def _uninstrument(self, **kwargs: Any) -> None:
        with _lock:
            _slot.handler = None


def instrument_langchain() -> Any:
    """Record every LangChain and LangGraph run as evaltrace spans (idempotent); return the handler.

    Needs ``langchain-core`` (``pip install 'evaltrace[langchain]'``). Model calls whose SDK evaltrace already
    instruments (``instrument_openai()``, ``instrument_anthropic()``) keep that SDK span as their one span.

    Returns:
        The registered :class:`~evaltrace.instrumentation.langchain.EvaltraceCallbackHandler`.
    """
    # No dependency check: a missing langchain-core is the ImportError of its import, not a logged conflict.
    instrument_once(LangChainInstrumentor(), {"skip_dep_check": True})
    return _slot.handler


def uninstrument_langchain() -> None:
    """Stop recording LangChain runs (no-op when not instrumented); runs in flight still end their spans."""
    LangChainInstrumentor().uninstrument()


def is_instrumented() -> bool:
    """Whether ``instrument_langchain()`` is in effect."""
    return _slot.handler is not None
