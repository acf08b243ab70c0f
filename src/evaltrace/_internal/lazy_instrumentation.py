"""Top-level ``evaltrace.instrument_openai()`` / ``instrument_anthropic()`` / ``instrument_langchain()``: imported lazily so ``import evaltrace`` never needs the extra."""

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


def instrument_langchain() -> Any:
    """Record every LangChain / LangGraph run as evaltrace spans (idempotent); return the registered handler.

    Needs the ``langchain`` extra (``pip install 'evaltrace[langchain]'``). See
    ``evaltrace.instrumentation.langchain``.
    """
    try:
        from evaltrace.instrumentation.langchain import instrument_langchain as _instrument

        return _instrument()
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_langchain() needs: pip install 'evaltrace[langchain]' ({exc})") from exc


def uninstrument_langchain() -> None:
    """Stop recording LangChain runs (no-op when not instrumented)."""
    from evaltrace.instrumentation.langchain import uninstrument_langchain as _uninstrument

    _uninstrument()


def instrument_bedrock(**kwargs: Any) -> Any:
    """Trace boto3's ``bedrock-runtime`` clients (idempotent); return the instrumentor.

    ``converse``, ``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream``, on clients made
    before or after this call. Needs the ``bedrock`` extra (``pip install 'evaltrace[bedrock]'``). See
    ``evaltrace.instrumentation.bedrock``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    try:
        from evaltrace.instrumentation.bedrock import instrument_bedrock as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_bedrock() needs: pip install 'evaltrace[bedrock]' ({exc})") from exc
    return _instrument(**kwargs)


def uninstrument_bedrock() -> None:
    """Restore botocore's original ``_make_api_call`` (no-op when not instrumented)."""
    from evaltrace.instrumentation.bedrock import uninstrument_bedrock as _uninstrument

    _uninstrument()


def instrument_google_genai(**kwargs: Any) -> Any:
    """Trace the Google Gen AI SDK's ``google.genai`` client (idempotent); return the instrumentor.

    Needs the ``google-genai`` extra (``pip install 'evaltrace[google-genai]'``). See
    ``evaltrace.instrumentation.google_genai``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    try:
        from evaltrace.instrumentation.google_genai import instrument_google_genai as _instrument
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_google_genai() needs: pip install 'evaltrace[google-genai]' ({exc})") from exc
    return _instrument(**kwargs)


def uninstrument_google_genai() -> None:
    """Restore the original ``google.genai`` methods (no-op when not instrumented)."""
    from evaltrace.instrumentation.google_genai import uninstrument_google_genai as _uninstrument

    _uninstrument()
