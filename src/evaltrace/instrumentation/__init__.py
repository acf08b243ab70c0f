"""Auto-instrumentations of LLM client libraries (``evaltrace.instrumentation.<provider>``).

The names are imported lazily so that ``import evaltrace.instrumentation`` works without any provider's extra
installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor, instrument_anthropic, uninstrument_anthropic
    from evaltrace.instrumentation.cohere import CohereInstrumentor, instrument_cohere, uninstrument_cohere
    from evaltrace.instrumentation.litellm import LiteLLMInstrumentor, instrument_litellm, uninstrument_litellm
    from evaltrace.instrumentation.ollama import OllamaInstrumentor, instrument_ollama, uninstrument_ollama
    from evaltrace.instrumentation.openai import OpenAIInstrumentor, instrument_openai, uninstrument_openai

# Public name -> the provider submodule that defines it.
_HOMES = {
    **dict.fromkeys(("AnthropicInstrumentor", "instrument_anthropic", "uninstrument_anthropic"), "anthropic"),
    **dict.fromkeys(("CohereInstrumentor", "instrument_cohere", "uninstrument_cohere"), "cohere"),
    **dict.fromkeys(("LiteLLMInstrumentor", "instrument_litellm", "uninstrument_litellm"), "litellm"),
    **dict.fromkeys(("OllamaInstrumentor", "instrument_ollama", "uninstrument_ollama"), "ollama"),
    **dict.fromkeys(("OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"), "openai"),
}
__all__ = [
    "AnthropicInstrumentor",
    "CohereInstrumentor",
    "LiteLLMInstrumentor",
    "OllamaInstrumentor",
    "OpenAIInstrumentor",
    "instrument_anthropic",
    "instrument_cohere",
    "instrument_litellm",
    "instrument_ollama",
    "instrument_openai",
    "uninstrument_anthropic",
    "uninstrument_cohere",
    "uninstrument_litellm",
    "uninstrument_ollama",
    "uninstrument_openai",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(f"evaltrace.instrumentation.{home}"), name)
