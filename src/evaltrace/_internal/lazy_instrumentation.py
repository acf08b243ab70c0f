"""Top-level ``evaltrace.instrument_openai()`` / ``instrument_anthropic()``: imported lazily so ``import evaltrace`` never needs the extra."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def instrument_openai(**kwargs: Any) -> Any:
    """Trace every call of the official ``openai`` client (idempotent); return the instrumentor.

    Needs the ``openai`` extra (``pip install 'evaltrace[openai]'``). See ``evaltrace.instrumentation.openai``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    try:
        from evaltrace.instrumentation.openai import instrument_openai as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_openai() needs: pip install 'evaltrace[openai]' ({exc})") from exc
    return _instrument(**kwargs)


def uninstrument_openai() -> None:
    """Restore the original ``openai`` methods (no-op when not instrumented)."""
    from evaltrace.instrumentation.openai import uninstrument_openai as _uninstrument

    _uninstrument()


def instrument_anthropic(**kwargs: Any) -> Any:
    """Trace every ``messages`` call of the official ``anthropic`` client (idempotent); return the instrumentor.

    Needs the ``anthropic`` extra (``pip install 'evaltrace[anthropic]'``). See
    ``evaltrace.instrumentation.anthropic``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    try:
        from evaltrace.instrumentation.anthropic import instrument_anthropic as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_anthropic() needs: pip install 'evaltrace[anthropic]' ({exc})") from exc
    return _instrument(**kwargs)


def uninstrument_anthropic() -> None:
    """Restore the original ``anthropic`` methods (no-op when not instrumented)."""
    from evaltrace.instrumentation.anthropic import uninstrument_anthropic as _uninstrument

    _uninstrument()


def _provider(name: str, extra: str) -> ModuleType:
    """``evaltrace.instrumentation.<name>``; a missing extra is named in the ImportError."""
    try:
        return importlib.import_module(f"evaltrace.instrumentation.{name}")
    except ImportError as exc:
        raise ImportError(f"instrument_{name}() needs: pip install 'evaltrace[{extra}]' ({exc})") from exc


def instrument_mistral(**kwargs: Any) -> Any:
    """Trace ``chat`` and ``embeddings`` calls of the official ``mistralai`` client (idempotent); return the instrumentor.

    Needs the ``mistral`` extra. See ``evaltrace.instrumentation.mistral`` and docs/providers/mistral.md.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _provider("mistral", "mistral").instrument_mistral(**kwargs)


def uninstrument_mistral() -> None:
    """Restore the original ``mistralai`` methods (no-op when not instrumented)."""
    _provider("mistral", "mistral").uninstrument_mistral()


def instrument_groq(**kwargs: Any) -> Any:
    """Trace chat completions and embeddings of the official ``groq`` client (idempotent); return the instrumentor.

    Needs the ``groq`` extra. See ``evaltrace.instrumentation.groq`` and docs/providers/groq.md.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _provider("groq", "groq").instrument_groq(**kwargs)


def uninstrument_groq() -> None:
    """Restore the original ``groq`` methods (no-op when not instrumented)."""
    _provider("groq", "groq").uninstrument_groq()
