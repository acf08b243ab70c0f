"""evaltrace: trace LLM applications with OpenTelemetry and evaluate them while they run.

Quick start::

    import evaltrace

    evaltrace.configure(service_name="support-bot")   # local store by default; OTLP/Langfuse/Phoenix by kwargs/env

    @evaltrace.tool
    def get_weather(city: str) -> dict: ...

    @evaltrace.agent
    def answer(question: str) -> str: ...
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from evaltrace._version import __version__

if TYPE_CHECKING:  # type checkers and IDEs see the real names; at run time they resolve on first use
    from evaltrace._internal.lazy_instrumentation import (
        instrument_anthropic,
        instrument_bedrock,
        instrument_cohere,
        instrument_google_genai,
        instrument_groq,
        instrument_langchain,
        instrument_litellm,
        instrument_mistral,
        instrument_ollama,
        instrument_openai,
        instrument_openai_agents,
        instrument_pydantic_ai,
        uninstrument_anthropic,
        uninstrument_bedrock,
        uninstrument_cohere,
        uninstrument_google_genai,
        uninstrument_groq,
        uninstrument_langchain,
        uninstrument_litellm,
        uninstrument_mistral,
        uninstrument_ollama,
        uninstrument_openai,
        uninstrument_openai_agents,
        uninstrument_pydantic_ai,
    )
    from evaltrace.backfill import evaluate_traces
    from evaltrace.config import EvaltraceHandle, configure
    from evaltrace.context import ContextThreadPoolExecutor, context, wrap_context
    from evaltrace.decorators import agent, llm, tool, trace, workflow
    from evaltrace.evaluation.evaluator import evaluator  # the function, never the submodule of that name
    from evaltrace.exceptions import ConfigError, EvaltraceError, SchemaError, ScoreValidationError
    from evaltrace.instrumentation.langchain import EvaltraceCallbackHandler
    from evaltrace.manual_llm import LLMCall, current_llm_call, llm_call
    from evaltrace.session_end import end_session
    from evaltrace.trace_end import end_trace

__all__ = [
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

# Where each public name lives. Resolved on first access (PEP 562), so ``import evaltrace`` costs only what the
# application uses: the evaluation engine (pydantic models) loads when an evaluator or the processor is needed.
_HOMES = {
    "ConfigError": "evaltrace.exceptions",
    "ContextThreadPoolExecutor": "evaltrace.context",
    "EvaltraceCallbackHandler": "evaltrace.instrumentation.langchain",
    "EvaltraceError": "evaltrace.exceptions",
    "EvaltraceHandle": "evaltrace.config",
    "LLMCall": "evaltrace.manual_llm",
    "SchemaError": "evaltrace.exceptions",
    "ScoreValidationError": "evaltrace.exceptions",
    "agent": "evaltrace.decorators",
    "configure": "evaltrace.config",
    "context": "evaltrace.context",
    "current_llm_call": "evaltrace.manual_llm",
    "end_session": "evaltrace.session_end",
    "end_trace": "evaltrace.trace_end",
    "evaluate_traces": "evaltrace.backfill",
    "evaluator": "evaltrace.evaluation",
    "instrument_anthropic": "evaltrace._internal.lazy_instrumentation",
    "instrument_langchain": "evaltrace._internal.lazy_instrumentation",
    "instrument_bedrock": "evaltrace._internal.lazy_instrumentation",
    "instrument_google_genai": "evaltrace._internal.lazy_instrumentation",
    "instrument_cohere": "evaltrace._internal.lazy_instrumentation",
    "instrument_litellm": "evaltrace._internal.lazy_instrumentation",
    "instrument_ollama": "evaltrace._internal.lazy_instrumentation",
    "instrument_groq": "evaltrace._internal.lazy_instrumentation",
    "instrument_mistral": "evaltrace._internal.lazy_instrumentation",
    "instrument_openai": "evaltrace._internal.lazy_instrumentation",
    "instrument_openai_agents": "evaltrace._internal.lazy_instrumentation",
    "instrument_pydantic_ai": "evaltrace._internal.lazy_instrumentation",
    "llm": "evaltrace.decorators",
    "llm_call": "evaltrace.manual_llm",
    "tool": "evaltrace.decorators",
    "trace": "evaltrace.decorators",
    "uninstrument_anthropic": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_langchain": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_bedrock": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_google_genai": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_cohere": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_litellm": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_ollama": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_groq": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_mistral": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_openai": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_openai_agents": "evaltrace._internal.lazy_instrumentation",
    "uninstrument_pydantic_ai": "evaltrace._internal.lazy_instrumentation",
    "workflow": "evaltrace.decorators",
    "wrap_context": "evaltrace.context",
}


class _Package(types.ModuleType):
    """Keeps ``evaltrace.context`` the function when the submodule of the same name is imported.

    Importing ``evaltrace.context`` (the module) sets the package attribute ``context`` to the module once it has
    run; binding the module's function instead lets the submodule load lazily, so ``import evaltrace`` (and
    every ``evaltrace`` command) does not import the OpenTelemetry SDK until something needs it.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "context" and isinstance(value, types.ModuleType):
            value = value.context
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evaltrace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups are plain module attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
