"""OTel context operations for the per-call hot path. The one module that knows OTel context internals.

Why: ``get_current``, ``attach``, ``detach`` and ``set_span_in_context`` are each two Python calls around one
``ContextVar`` operation or one dict copy, and an instrumented call makes four of them (~7 % of its cost).
With OTel's default runtime context (``ContextVarsRuntimeContext``, a ``ContextVar`` holding the current
``Context``) the names below are that ``ContextVar``'s own methods; with any other runtime context (chosen by
``OTEL_PYTHON_CONTEXT``) they are the public API functions. Which one is decided once, at import, by probing:
a context attached through the public API must be what the ``ContextVar`` returns.

``SPAN_KEY`` is the key under which ``set_span_in_context`` stores the span, found the same way (by calling
it), so ``Context({**parent, SPAN_KEY: span})`` is exactly ``set_span_in_context(span, parent)``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, set_span_in_context


def _runtime_var() -> ContextVar[Context] | None:
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if not isinstance(var, ContextVar):
        return None
    probe = otel_context.set_value("evaltrace-context-probe", True)
    token = otel_context.attach(probe)
    try:
        seen = var.get(None)
    finally:
        otel_context.detach(token)
    return var if seen is probe else None


def _span_key() -> str:
    (key,) = set_span_in_context(INVALID_SPAN, Context()).keys()
    return key


_VAR = _runtime_var()
SPAN_KEY = _span_key()

get_current: Callable[[], Context] = _VAR.get if _VAR is not None else otel_context.get_current
"""The current context (``opentelemetry.context.get_current``)."""

attach: Callable[[Context], Token[Context]] = _VAR.set if _VAR is not None else otel_context.attach
"""Make a context current; returns the token for :data:`detach` (``opentelemetry.context.attach``)."""

detach: Callable[[Token[Context]], Any] = _VAR.reset if _VAR is not None else otel_context.detach
"""Restore the context a token was taken from (``opentelemetry.context.detach``, which logs where this raises)."""

DEFAULT: Context | None = contextvars.Context().run(_VAR.get) if _VAR is not None else None
"""The context a thread or task starts with before anything is attached (the ``ContextVar``'s default, one shared
empty ``Context``): ``get_current() is DEFAULT`` tells code on a worker thread that the context holds nothing, so it
can use a context it built once. None with another runtime context."""
