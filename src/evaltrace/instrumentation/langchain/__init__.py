"""LangChain / LangGraph instrumentation: a callback handler that records runs as evaltrace spans.

Graphs and agents become ``invoke_agent`` spans, chains and graph nodes ``task`` spans, tools ``execute_tool``
spans, retrievers ``retrieval`` spans whose documents RAG evaluators read as the retrieved context, and model
calls ``chat {model}`` spans unless evaltrace instruments the model's SDK (then the SDK call's span is the one).

Example:
    >>> from evaltrace.instrumentation.langchain import instrument_langchain, uninstrument_langchain
    >>> instrument_langchain()  # doctest: +SKIP
    >>> uninstrument_langchain()  # doctest: +SKIP

``opentelemetry-instrument python app.py`` does the same through the ``evaltrace_langchain`` entry point
(:class:`LangChainInstrumentor`).

The handler class is imported lazily: ``langchain-core`` loads only when it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaltrace.instrumentation.langchain._register import (
    LangChainInstrumentor,
    instrument_langchain,
    uninstrument_langchain,
)

if TYPE_CHECKING:
    from evaltrace.instrumentation.langchain._handler import EvaltraceCallbackHandler

__all__ = ["EvaltraceCallbackHandler", "LangChainInstrumentor", "instrument_langchain", "uninstrument_langchain"]


def __getattr__(name: str) -> Any:
    if name == "EvaltraceCallbackHandler":
        from evaltrace.instrumentation.langchain._handler import EvaltraceCallbackHandler

        return EvaltraceCallbackHandler
    raise AttributeError(name)
