"""The engine's wrappers bound to the OpenAI codec: what ``OpenAIInstrumentor``'s first patch loads."""

from __future__ import annotations

from evaltrace._internal.engine import wrappers
from evaltrace._internal.engine.codec import Endpoint
from evaltrace._internal.engine.wrappers import Telemetry as Telemetry
from evaltrace._internal.engine.wrappers import Wrapper
from evaltrace._internal.openai.call import LLMCall


def make_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    """Return the wrapt wrapper for ``endpoint`` (an OpenAI registry row)."""
    return wrappers.make_wrapper(endpoint, telemetry, LLMCall)
