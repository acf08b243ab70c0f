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

from evaltrace._internal.lazy_instrumentation import (
    instrument_anthropic,
    instrument_openai,
    uninstrument_anthropic,
    uninstrument_openai,
)
from evaltrace._version import __version__
from evaltrace.config import EvaltraceHandle, configure
from evaltrace.context import ContextThreadPoolExecutor, context, wrap_context
from evaltrace.decorators import agent, llm, tool, trace, workflow
from evaltrace.evaluation import evaluator
from evaltrace.exceptions import ConfigError, EvaltraceError, SchemaError, ScoreValidationError
from evaltrace.manual_llm import LLMCall, current_llm_call, llm_call

__all__ = [
    "ConfigError",
    "ContextThreadPoolExecutor",
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
    "evaluator",
    "instrument_anthropic",
    "instrument_openai",
    "llm",
    "llm_call",
    "tool",
    "trace",
    "uninstrument_anthropic",
    "uninstrument_openai",
    "workflow",
    "wrap_context",
]
