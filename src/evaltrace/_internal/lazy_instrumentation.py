"""Top-level ``evaltrace.instrument_<provider>()`` / ``uninstrument_<provider>()``, imported lazily.

``import evaltrace`` never needs a provider's extra: each function loads ``evaltrace.instrumentation.<provider>``
when called. The instrumentation modules import no SDK themselves (an SDK is patched when it is imported), so the
SDK's presence is checked here, and a missing one is an ImportError naming the extra to install: without the
check, ``instrument_<provider>()`` would silently do nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

# Provider -> the SDK package its instrumentation needs, and the extra that installs it (when not the same name).
_SDKS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "langchain": "langchain_core",
    "bedrock": "botocore",
    "google_genai": "google.genai",
    "cohere": "cohere",
    "ollama": "ollama",
    "litellm": "litellm",
    "mistral": "mistralai",
    "groq": "groq",
    "openai_agents": "agents",
    "pydantic_ai": "pydantic_ai",
}
_EXTRAS = {"google_genai": "google-genai", "openai_agents": "openai-agents", "pydantic_ai": "pydantic-ai"}


def _load(provider: str) -> ModuleType:
    """``evaltrace.instrumentation.<provider>``, or an ImportError naming the extra when its SDK is missing."""
    extra = _EXTRAS.get(provider, provider)
    try:
        if importlib.util.find_spec(_SDKS[provider]) is None:
            raise ImportError(f"No module named {_SDKS[provider]!r}")
        return importlib.import_module(f"evaltrace.instrumentation.{provider}")
    except ImportError as exc:  # the extra is missing: say which one
        raise ImportError(f"instrument_{provider}() needs: pip install 'evaltrace[{extra}]' ({exc})") from exc


def _uninstrument(provider: str) -> None:
    """Undo ``instrument_<provider>()``; nothing to do (and no SDK to import) when it was never loaded."""
    module = sys.modules.get(f"evaltrace.instrumentation.{provider}")
    if module is not None:
        getattr(module, f"uninstrument_{provider}")()


def instrument_openai(**kwargs: Any) -> Any:
    """Trace every call of the official ``openai`` client (idempotent); return the instrumentor.

    Needs the ``openai`` extra (``pip install 'evaltrace[openai]'``). See ``evaltrace.instrumentation.openai``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("openai").instrument_openai(**kwargs)


def uninstrument_openai() -> None:
    """Restore the original ``openai`` methods (no-op when not instrumented)."""
    _uninstrument("openai")


def instrument_anthropic(**kwargs: Any) -> Any:
    """Trace every ``messages`` call of the official ``anthropic`` client (idempotent); return the instrumentor.

    Needs the ``anthropic`` extra (``pip install 'evaltrace[anthropic]'``). See
    ``evaltrace.instrumentation.anthropic``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("anthropic").instrument_anthropic(**kwargs)


def uninstrument_anthropic() -> None:
    """Restore the original ``anthropic`` methods (no-op when not instrumented)."""
    _uninstrument("anthropic")


def instrument_langchain() -> Any:
    """Record every LangChain / LangGraph run as evaltrace spans (idempotent); return the registered handler.

    Needs the ``langchain`` extra (``pip install 'evaltrace[langchain]'``). See
    ``evaltrace.instrumentation.langchain``.
    """
    return _load("langchain").instrument_langchain()


def uninstrument_langchain() -> None:
    """Stop recording LangChain runs (no-op when not instrumented)."""
    _uninstrument("langchain")


def instrument_bedrock(**kwargs: Any) -> Any:
    """Trace boto3's ``bedrock-runtime`` clients (idempotent); return the instrumentor.

    ``converse``, ``converse_stream``, ``invoke_model`` and ``invoke_model_with_response_stream``, on clients made
    before or after this call. Needs the ``bedrock`` extra (``pip install 'evaltrace[bedrock]'``). See
    ``evaltrace.instrumentation.bedrock``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("bedrock").instrument_bedrock(**kwargs)


def uninstrument_bedrock() -> None:
    """Restore botocore's original ``_make_api_call`` (no-op when not instrumented)."""
    _uninstrument("bedrock")


def instrument_google_genai(**kwargs: Any) -> Any:
    """Trace the Google Gen AI SDK's ``google.genai`` client (idempotent); return the instrumentor.

    Needs the ``google-genai`` extra (``pip install 'evaltrace[google-genai]'``). See
    ``evaltrace.instrumentation.google_genai``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("google_genai").instrument_google_genai(**kwargs)


def uninstrument_google_genai() -> None:
    """Restore the original ``google.genai`` methods (no-op when not instrumented)."""
    _uninstrument("google_genai")


def instrument_cohere(**kwargs: Any) -> Any:
    """Trace every v2 chat call of the official ``cohere`` client (idempotent); return the instrumentor.

    Needs the ``cohere`` extra (``pip install 'evaltrace[cohere]'``). See ``evaltrace.instrumentation.cohere``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("cohere").instrument_cohere(**kwargs)


def uninstrument_cohere() -> None:
    """Restore the original ``cohere`` methods (no-op when not instrumented)."""
    _uninstrument("cohere")


def instrument_ollama(**kwargs: Any) -> Any:
    """Trace every ``chat`` / ``generate`` / ``embed`` call of the ``ollama`` client (idempotent).

    Needs the ``ollama`` extra (``pip install 'evaltrace[ollama]'``). See ``evaltrace.instrumentation.ollama``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("ollama").instrument_ollama(**kwargs)


def uninstrument_ollama() -> None:
    """Restore the original ``ollama`` methods and module functions (no-op when not instrumented)."""
    _uninstrument("ollama")


def instrument_litellm(**kwargs: Any) -> Any:
    """Trace every ``litellm.completion`` / ``acompletion`` call, named after the provider behind it (idempotent).

    Needs the ``litellm`` extra (``pip install 'evaltrace[litellm]'``). See ``evaltrace.instrumentation.litellm``.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("litellm").instrument_litellm(**kwargs)


def uninstrument_litellm() -> None:
    """Restore ``litellm.completion`` / ``acompletion`` (no-op when not instrumented)."""
    _uninstrument("litellm")


def instrument_mistral(**kwargs: Any) -> Any:
    """Trace the official ``mistralai`` client's chat, FIM, agents, conversations and embeddings (idempotent).

    Needs the ``mistral`` extra. See ``evaltrace.instrumentation.mistral`` and docs/providers/mistral.md.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("mistral").instrument_mistral(**kwargs)


def uninstrument_mistral() -> None:
    """Restore the original ``mistralai`` methods (no-op when not instrumented)."""
    _uninstrument("mistral")


def instrument_groq(**kwargs: Any) -> Any:
    """Trace chat completions and embeddings of the official ``groq`` client (idempotent); return the instrumentor.

    Needs the ``groq`` extra. See ``evaltrace.instrumentation.groq`` and docs/providers/groq.md.

    Args:
        **kwargs: ``tracer_provider`` and/or ``meter_provider`` to use instead of the defaults.
    """
    return _load("groq").instrument_groq(**kwargs)


def uninstrument_groq() -> None:
    """Restore the original ``groq`` methods (no-op when not instrumented)."""
    _uninstrument("groq")


def instrument_openai_agents() -> Any:
    """Record the OpenAI Agents SDK's traces and spans as evaltrace spans (idempotent); return the processor.

    Needs the ``openai-agents`` extra (``pip install 'evaltrace[openai-agents]'``). See
    ``evaltrace.instrumentation.openai_agents``.
    """
    return _load("openai_agents").instrument_openai_agents()


def uninstrument_openai_agents() -> None:
    """Stop recording the OpenAI Agents SDK's traces (no-op when not instrumented)."""
    _uninstrument("openai_agents")


def instrument_pydantic_ai(**kwargs: Any) -> Any:
    """Turn on pydantic-ai's own GenAI spans for every agent, on evaltrace's provider; return the settings.

    Needs the ``pydantic-ai`` extra (``pip install 'evaltrace[pydantic-ai]'``). See
    ``evaltrace.instrumentation.pydantic_ai``.

    Args:
        **kwargs: ``tracer_provider`` / ``meter_provider`` or other ``InstrumentationSettings`` keywords.
    """
    return _load("pydantic_ai").instrument_pydantic_ai(**kwargs)


def uninstrument_pydantic_ai() -> None:
    """Turn pydantic-ai's spans off again (no-op when ``instrument_pydantic_ai`` did not turn them on)."""
    _uninstrument("pydantic_ai")
