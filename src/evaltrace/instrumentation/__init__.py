"""Auto-instrumentations of LLM client libraries (``evaltrace.instrumentation.<provider>``).

Each provider is a codec on the one instrumentation engine (``evaltrace._internal.engine``); the agent frameworks
(``langchain``, ``openai_agents``, ``pydantic_ai``) have modules of their own here. The names are imported lazily
so that ``import evaltrace.instrumentation`` works without any provider's extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor, instrument_anthropic, uninstrument_anthropic
    from evaltrace.instrumentation.bedrock import BedrockInstrumentor, instrument_bedrock, uninstrument_bedrock
    from evaltrace.instrumentation.cohere import CohereInstrumentor, instrument_cohere, uninstrument_cohere
    from evaltrace.instrumentation.google_genai import (
        GoogleGenAIInstrumentor,
        instrument_google_genai,
        uninstrument_google_genai,
    )
    from evaltrace.instrumentation.groq import GroqInstrumentor, instrument_groq, uninstrument_groq
    from evaltrace.instrumentation.langchain import LangChainInstrumentor
    from evaltrace.instrumentation.litellm import LiteLLMInstrumentor, instrument_litellm, uninstrument_litellm
    from evaltrace.instrumentation.mistral import MistralInstrumentor, instrument_mistral, uninstrument_mistral
    from evaltrace.instrumentation.ollama import OllamaInstrumentor, instrument_ollama, uninstrument_ollama
    from evaltrace.instrumentation.openai import OpenAIInstrumentor, instrument_openai, uninstrument_openai

# Public name -> the provider submodule that defines it.
_HOMES = {
    **dict.fromkeys(("AnthropicInstrumentor", "instrument_anthropic", "uninstrument_anthropic"), "anthropic"),
    **dict.fromkeys(("BedrockInstrumentor", "instrument_bedrock", "uninstrument_bedrock"), "bedrock"),
    **dict.fromkeys(("CohereInstrumentor", "instrument_cohere", "uninstrument_cohere"), "cohere"),
    **dict.fromkeys(
        ("GoogleGenAIInstrumentor", "instrument_google_genai", "uninstrument_google_genai"), "google_genai"
    ),
    **dict.fromkeys(("GroqInstrumentor", "instrument_groq", "uninstrument_groq"), "groq"),
    "LangChainInstrumentor": "langchain",
    **dict.fromkeys(("LiteLLMInstrumentor", "instrument_litellm", "uninstrument_litellm"), "litellm"),
    **dict.fromkeys(("MistralInstrumentor", "instrument_mistral", "uninstrument_mistral"), "mistral"),
    **dict.fromkeys(("OllamaInstrumentor", "instrument_ollama", "uninstrument_ollama"), "ollama"),
    **dict.fromkeys(("OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"), "openai"),
}
__all__ = [
    "AnthropicInstrumentor",
    "BedrockInstrumentor",
    "CohereInstrumentor",
    "GoogleGenAIInstrumentor",
    "GroqInstrumentor",
    "LangChainInstrumentor",
    "LiteLLMInstrumentor",
    "MistralInstrumentor",
    "OllamaInstrumentor",
    "OpenAIInstrumentor",
    "instrument_anthropic",
    "instrument_bedrock",
    "instrument_cohere",
    "instrument_google_genai",
    "instrument_groq",
    "instrument_litellm",
    "instrument_mistral",
    "instrument_ollama",
    "instrument_openai",
    "uninstrument_anthropic",
    "uninstrument_bedrock",
    "uninstrument_cohere",
    "uninstrument_google_genai",
    "uninstrument_groq",
    "uninstrument_litellm",
    "uninstrument_mistral",
    "uninstrument_ollama",
    "uninstrument_openai",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(f"evaltrace.instrumentation.{home}"), name)
