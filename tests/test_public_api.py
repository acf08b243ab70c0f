"""The public surface is pinned: adding or removing a name must be a deliberate change of this list."""

from __future__ import annotations

import evaltrace

EXPECTED = [
    "ConfigError",
    "ContextThreadPoolExecutor",
    "EvaltraceCallbackHandler",
    "EvaltraceError",
    "EvaltraceHandle",
    "LLMCall",
    "SchemaError",
    "ScoreValidationError",
    "__version__",
    "agent",
    "configure",
    "context",
    "current_llm_call",
    "end_session",
    "end_trace",
    "evaluate_traces",
    "evaluator",
    "instrument_anthropic",
    "instrument_bedrock",
    "instrument_cohere",
    "instrument_google_genai",
    "instrument_groq",
    "instrument_langchain",
    "instrument_litellm",
    "instrument_mistral",
    "instrument_ollama",
    "instrument_openai",
    "instrument_openai_agents",
    "instrument_pydantic_ai",
    "llm",
    "llm_call",
    "tool",
    "trace",
    "uninstrument_anthropic",
    "uninstrument_bedrock",
    "uninstrument_cohere",
    "uninstrument_google_genai",
    "uninstrument_groq",
    "uninstrument_langchain",
    "uninstrument_litellm",
    "uninstrument_mistral",
    "uninstrument_ollama",
    "uninstrument_openai",
    "uninstrument_openai_agents",
    "uninstrument_pydantic_ai",
    "workflow",
    "wrap_context",
]


def test_all_is_pinned_and_sorted() -> None:
    assert evaltrace.__all__ == EXPECTED
    assert evaltrace.__all__ == sorted(evaltrace.__all__)


def test_every_public_attribute_is_exported() -> None:
    public = {
        name
        for name, value in vars(evaltrace).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("evaltrace")
    }
    assert public <= set(evaltrace.__all__)
    for name in evaltrace.__all__:
        assert hasattr(evaltrace, name)
