"""Auto-instrumentations of LLM client libraries (``evaltrace.instrumentation.openai`` / ``.anthropic``).

The names are imported lazily so that ``import evaltrace.instrumentation`` works without the ``openai`` or
``anthropic`` extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltrace.instrumentation.anthropic import AnthropicInstrumentor, instrument_anthropic, uninstrument_anthropic
    from evaltrace.instrumentation.openai import OpenAIInstrumentor, instrument_openai, uninstrument_openai

__all__ = [
    "AnthropicInstrumentor",
    "OpenAIInstrumentor",
    "instrument_anthropic",
    "instrument_openai",
    "uninstrument_anthropic",
    "uninstrument_openai",
]
_ANTHROPIC = frozenset({"AnthropicInstrumentor", "instrument_anthropic", "uninstrument_anthropic"})


def __getattr__(name: str) -> Any:
    if name in __all__ and name not in _ANTHROPIC:
        from evaltrace.instrumentation import openai

        return getattr(openai, name)
    if name in _ANTHROPIC:
        from evaltrace.instrumentation import anthropic

        return getattr(anthropic, name)
    raise AttributeError(name)
