"""Top-level ``evaltrace.instrument_openai()`` / ``instrument_anthropic()`` / ``instrument_langchain()``: imported lazily so ``import evaltrace`` never needs the extra."""

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


def _instrumentation(provider: str, extra: str) -> Any:
    """``evaltrace.instrumentation.<provider>``, or an ImportError naming the extra when its package is missing.

    The instrumentation module itself imports no SDK (the SDK is patched when imported), so the SDK's presence is
    checked here: without it ``instrument()`` would do nothing, silently.
    """
    import importlib
    import importlib.util

    package = {"cohere": "cohere", "ollama": "ollama", "litellm": "litellm"}[provider]
    try:
        if importlib.util.find_spec(package) is None:
            raise ImportError(f"No module named {package!r}")
        return importlib.import_module(f"evaltrace.instrumentation.{provider}")
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_{provider}() needs: pip install 'evaltrace[{extra}]' ({exc})") from exc


def instrument_cohere(**kwargs: Any) -> Any:
    """Trace every v2 chat call of the official ``cohere`` client (idempotent); return the instrumentor.

    Needs the ``cohere`` extra (``pip install 'evaltrace[cohere]'``). See ``evaltrace.instrumentation.cohere``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _instrumentation("cohere", "cohere").instrument_cohere(**kwargs)


def uninstrument_cohere() -> None:
    """Restore the original ``cohere`` methods (no-op when not instrumented)."""
    from evaltrace.instrumentation.cohere import uninstrument_cohere as _uninstrument

    _uninstrument()


def instrument_ollama(**kwargs: Any) -> Any:
    """Trace every ``chat`` / ``generate`` / ``embed`` call of the ``ollama`` client (idempotent).

    Needs the ``ollama`` extra (``pip install 'evaltrace[ollama]'``). See ``evaltrace.instrumentation.ollama``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _instrumentation("ollama", "ollama").instrument_ollama(**kwargs)


def uninstrument_ollama() -> None:
    """Restore the original ``ollama`` methods and module functions (no-op when not instrumented)."""
    from evaltrace.instrumentation.ollama import uninstrument_ollama as _uninstrument

    _uninstrument()


def instrument_litellm(**kwargs: Any) -> Any:
    """Trace every ``litellm.completion`` / ``acompletion`` call, named after the provider behind it (idempotent).

    Needs the ``litellm`` extra (``pip install 'evaltrace[litellm]'``). See ``evaltrace.instrumentation.litellm``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _instrumentation("litellm", "litellm").instrument_litellm(**kwargs)


def uninstrument_litellm() -> None:
    """Restore ``litellm.completion`` / ``acompletion`` (no-op when not instrumented)."""
    from evaltrace.instrumentation.litellm import uninstrument_litellm as _uninstrument

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
