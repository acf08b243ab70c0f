"""OpenAI Agents SDK instrumentation: the SDK's traces and spans become evaltrace's OTel spans.

``instrument_openai_agents()`` registers :class:`EvaltraceTracingProcessor` with the SDK
(``agents.add_trace_processor``, next to the SDK's own exporter). Every run then records an
``invoke_workflow {name}`` span (the SDK trace), ``invoke_agent {agent}`` spans, ``execute_tool {tool}`` spans
(function and MCP tools), handoff, guardrail, MCP ``list_tools`` and custom spans, and one ``chat {model}``
span per model call: our OpenAI span when ``instrument_openai()`` is on, else the SDK's own record of it.

Example:
    >>> import evaltrace
    >>> evaltrace.instrument_openai_agents()  # doctest: +SKIP
"""

from __future__ import annotations

import threading

import agents
from agents.tracing import TracingProcessor

from evaltrace.instrumentation.openai_agents._processor import EvaltraceTracingProcessor
from evaltrace.instrumentation.openai_agents._sessions import unwrap_runner, wrap_runner

__all__ = ["EvaltraceTracingProcessor", "instrument_openai_agents", "uninstrument_openai_agents"]

_lock = threading.Lock()
_processor: EvaltraceTracingProcessor | None = None


def instrument_openai_agents() -> EvaltraceTracingProcessor:
    """Record the Agents SDK's traces as evaltrace spans (idempotent); return the processor.

    Returns:
        The one processor registered with the SDK's trace provider.
    """
    global _processor
    with _lock:
        if _processor is None:
            _processor = EvaltraceTracingProcessor()
            agents.add_trace_processor(_processor)
        else:
            processors = _registered_processors()
            if processors is not None and _processor not in processors:  # removed by uninstrument, or replaced
                agents.add_trace_processor(_processor)
        _processor.enabled = True
        _processor.on_idle = None  # a removal still pending from uninstrument is off
        wrap_runner()  # each run's Agents Session, for its spans
        return _processor


def uninstrument_openai_agents() -> None:
    """Stop recording (no-op when not instrumented); spans already started still end."""
    with _lock:
        unwrap_runner()
        if _processor is None:
            return
        _processor.enabled = False
        if _processor.idle():
            _unregister(_processor)
        else:  # spans it started are still open: it unregisters once they have ended
            processor = _processor
            processor.on_idle = lambda: _unregister_locked(processor)


def _unregister_locked(processor: EvaltraceTracingProcessor) -> None:
    with _lock:
        if not processor.enabled:
            _unregister(processor)


def _unregister(processor: EvaltraceTracingProcessor) -> None:
    """Remove ``processor`` from the SDK's trace provider, when its list can be read (else it stays, disabled)."""
    processors = _registered_processors()
    if processors is not None and processor in processors:
        agents.set_trace_processors([p for p in processors if p is not processor])


def _registered_processors() -> list[TracingProcessor] | None:
    """The processors of the SDK's trace provider, when its (private) list can be read."""
    provider = agents.tracing.get_trace_provider()
    multi = getattr(provider, "_multi_processor", None)
    processors = getattr(multi, "_processors", None)
    if not isinstance(processors, tuple | list):
        return None
    return [p for p in processors if isinstance(p, TracingProcessor)]
