"""Auto-instrumentations of LLM client libraries (``evaltrace.instrumentation.openai``).

The OpenAI names are imported lazily so that ``import evaltrace.instrumentation`` works without the
``openai`` extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaltrace.instrumentation.openai import OpenAIInstrumentor, instrument_openai, uninstrument_openai

__all__ = ["OpenAIInstrumentor", "instrument_openai", "uninstrument_openai"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from evaltrace.instrumentation import openai

        return getattr(openai, name)
    raise AttributeError(name)
