"""Top-level ``evaltrace.instrument_openai()`` / ``instrument_anthropic()``: imported lazily so ``import evaltrace`` never needs the extra."""

from __future__ import annotations

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


def instrument_openai_agents() -> Any:
    """Record the OpenAI Agents SDK's traces and spans as evaltrace spans (idempotent); return the processor.

    Needs the ``openai-agents`` extra (``pip install 'evaltrace[openai-agents]'``). See
    ``evaltrace.instrumentation.openai_agents``.
    """
    try:
        from evaltrace.instrumentation.openai_agents import instrument_openai_agents as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_openai_agents() needs: pip install 'evaltrace[openai-agents]' ({exc})") from exc
    return _instrument()


def uninstrument_openai_agents() -> None:
    """Stop recording the OpenAI Agents SDK's traces (no-op when not instrumented)."""
    import sys

    if "evaltrace.instrumentation.openai_agents" not in sys.modules:
        return  # never instrumented: nothing to undo, and no need to import the SDK
    from evaltrace.instrumentation.openai_agents import uninstrument_openai_agents as _uninstrument

    _uninstrument()


def instrument_pydantic_ai(**kwargs: Any) -> Any:
    """Turn on pydantic-ai's own GenAI spans for every agent, on evaltrace's provider; return the settings.

    Needs the ``pydantic-ai`` extra (``pip install 'evaltrace[pydantic-ai]'``). See
    ``evaltrace.instrumentation.pydantic_ai``.

    Args:
        **kwargs: ``tracer_provider`` / ``meter_provider`` or other ``InstrumentationSettings`` keywords.
    """
    try:
        from evaltrace.instrumentation.pydantic_ai import instrument_pydantic_ai as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_pydantic_ai() needs: pip install 'evaltrace[pydantic-ai]' ({exc})") from exc
    return _instrument(**kwargs)


def uninstrument_pydantic_ai() -> None:
    """Turn pydantic-ai's spans off again (no-op when ``instrument_pydantic_ai`` did not turn them on)."""
    import sys

    if "evaltrace.instrumentation.pydantic_ai" not in sys.modules:
        return  # never instrumented: nothing to undo, and no need to import pydantic-ai
    from evaltrace.instrumentation.pydantic_ai import uninstrument_pydantic_ai as _uninstrument

    _uninstrument()
