"""What a LangChain run's end records: a tool's result, a model call's response (usage, cost, stream timings) or error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace._internal.engine.errortype import error_type_of
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.jsonutil import capped_json, loads_or_raw
from evaltrace._internal.manual_attributes import cost_attributes
from evaltrace._internal.openai.response import Usage
from evaltrace._internal.spans import error_type
from evaltrace.instrumentation.langchain import _codec, _streams
from evaltrace.instrumentation.langchain._context import Run
from evaltrace.instrumentation.langchain._streams import stream_attributes as stream_attributes


def json_value(value: Any) -> str:
    """``value`` as JSON, capped at the configured attribute length."""
    return capped_json(value, settings.current.max_attribute_length)


_COMMAND = frozenset({("langgraph.types", "Command")})


def captured(key: str, value: Any, convert: Callable[[Any], Any] | None = None) -> dict[str, AttributeValue]:
    """``{key: value as capped JSON}`` when content is captured, else nothing."""
    if not settings.current.capture_content:
        return {}
    return {key: json_value(convert(value) if convert is not None else value)}


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def _tool_message_id(message: Any) -> str | None:
    """The call id of a ``ToolMessage``, or of a tool message given as a dict (``{"role": "tool", ...}``)."""
    if isinstance(message, Mapping) and (message.get("role") or message.get("type")) != "tool":
        return None
    call_id = _field(message, "tool_call_id")
    return call_id if isinstance(call_id, str) else None


def _command_tool_message(output: Any, call_id: str | None) -> Any:
    """The tool message a LangGraph ``Command`` returned by a tool adds for this call, if it adds one.

    A tool that updates the graph's state returns ``Command(update={"messages": [ToolMessage(...)]})``: that message
    is the result the model is sent, the rest of the Command is the graph's business. ToolNode converts the update's
    messages (``convert_to_messages``), so a ``{"role": "tool", "tool_call_id": ...}`` dict counts as one. This
    call's message is the one with its call id (a handoff sends the whole history, earlier calls' messages too);
    without a call id, the only tool message there is. Not read (the Command is recorded whole, as any other
    value): a ``Command.update`` given as a list of messages (ToolNode run on a list) and a graph whose messages
    live under another key than ``messages`` (ToolNode's ``messages_key``): the tool's run knows neither.
    """
    if not _codec.is_a(output, _COMMAND):
        return None
    update = getattr(output, "update", None)
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    found = [m for m in messages if _tool_message_id(m) is not None]
    if call_id is not None:
        found = [m for m in found if _tool_message_id(m) == call_id]
    elif len(found) != 1:  # several calls' messages, and no call id to tell which one is this call's
        return None
    return found[-1] if found else None


def tool_result(run: Run, output: Any) -> dict[str, AttributeValue]:
    """A tool's call id (a ``ToolMessage`` knows it) and result; an error message the tool returned is an error."""
    attributes: dict[str, AttributeValue] = {}
    picked = _command_tool_message(output, run.tool_call_id)
    output = picked if picked is not None else output
    message = picked is not None or hasattr(output, "tool_call_id")
    call_id = _field(output, "tool_call_id") if message else None
    if isinstance(call_id, str) and call_id:
        attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
    status = _field(output, "status") if picked is not None else getattr(output, "status", None)
    if status == "error" and run.span is not None:
        run.span.set_status(Status(StatusCode.ERROR, "the tool returned an error message"))
        # A failed span names its error (the conventions' "Recording Errors"): no exception, so no type to name.
        attributes[sc.ERROR_TYPE] = sc.ERROR_TYPE_OTHER
    attributes.update(captured(sc.GEN_AI_TOOL_CALL_RESULT, _field(output, "content") if message else output))
    return attributes


def model_result(run: Run, response: Any) -> dict[str, AttributeValue]:
    """What a model call's ``LLMResult`` says, and its stream timings."""
    generations = getattr(response, "generations", None) or [[]]
    first = generations[0]
    llm_output = getattr(response, "llm_output", None)
    outputs, reasons = _codec.output_messages(first)
    attributes: dict[str, AttributeValue] = {}
    attributes.update(_codec.response_attributes(first, llm_output))
    usage = _codec.usage_attributes(first, llm_output)
    attributes.update(usage)
    model = attributes.get(sc.GEN_AI_RESPONSE_MODEL) or run.model
    priced = Usage(
        input_tokens=usage.get(sc.GEN_AI_USAGE_INPUT_TOKENS),
        output_tokens=usage.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        cached_tokens=usage.get(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        reasoning_tokens=usage.get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
        cache_write_tokens=usage.get(sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    )
    # Priced as an llm_call span is (genai-prices, set_model_price overrides); no price, no cost.
    attributes.update(cost_attributes(priced, model if isinstance(model, str) else None, run.provider, None))
    if reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    attributes.update(captured(sc.GEN_AI_OUTPUT_MESSAGES, outputs))
    if run.chunks:  # streamed (LangChain's invocation params do not always say so)
        output = usage.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)
        attributes.update(stream_attributes(run, _streams.end_reason(first, reasons), output))
    failure = _streams.response_failure(first)
    if failure is not None and run.span is not None:
        # A Responses answer whose status is ``failed`` the integration handed back without raising: failed as
        # instrument_openai() fails it (the provider's code, ``"{code}: {message}"``), no exception event.
        attributes[sc.ERROR_TYPE] = failure[0]
        run.span.set_status(Status(StatusCode.ERROR, failure[1]))
    return attributes


def model_error(error: BaseException) -> dict[str, AttributeValue]:
    """``error.type`` and the HTTP status of a failed model call, as the SDK instrumentations record them.

    Integrations raise the provider SDK's error, or their own subclass of it (langchain-anthropic's
    ``AnthropicRateLimitError``, langchain-openai's): its API error code (``rate_limit_error``,
    ``invalid_api_key``) is the ``error.type``, and its ``status_code`` the response's status. An error that names
    no code (a connection error, a bug) is named by its class, as every other failed span is.
    """
    code = error_type_of(error)
    attributes: dict[str, AttributeValue] = {
        sc.ERROR_TYPE: code if code != type(error).__qualname__ else error_type(error)
    }
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        attributes[sc.HTTP_RESPONSE_STATUS_CODE] = status
    return attributes


# LangGraph's control flow, raised through the runs it leaves (``GraphBubbleUp``'s subclasses in langgraph.errors):
# ``interrupt()`` pausing a thread for a human (resumed by a later ``Command(resume=...)``),
# ``Command(graph=Command.PARENT)`` handing off to the parent graph (how multi-agent handoffs work), and a drain
# (``RunControl.request_drain()``, e.g. on SIGTERM) stopping the run at a step boundary with its checkpoint saved,
# to be resumed later: LangGraph's own ToolNode stream treats a drained tool as paused, not failed, like an
# interrupted one. The graph carries on, returns the interrupt, or resumes: no run failed.
_INTERRUPT = frozenset({("langgraph.errors", "GraphInterrupt")})
_PARENT_COMMAND = frozenset({("langgraph.errors", "ParentCommand")})
_DRAINED = frozenset({("langgraph.errors", "GraphDrained")})


def control_flow_events(error: BaseException) -> list[tuple[str, dict[str, AttributeValue]]] | None:
    """The span events saying which LangGraph control flow ``error`` is, or None when it is no control flow.

    The span ends with status UNSET and no result: a paused or handed-off step neither passed nor failed, and
    nothing it did not return is made up as its output. An interrupt's value is content (the question asked).
    """
    if _codec.is_a(error, _INTERRUPT):
        interrupts = error.args[0] if error.args else ()
        events: list[tuple[str, dict[str, AttributeValue]]] = []
        for interrupt in interrupts if isinstance(interrupts, Sequence) and not isinstance(interrupts, str) else ():
            attributes: dict[str, AttributeValue] = {}
            interrupt_id = getattr(interrupt, "id", None)
            if isinstance(interrupt_id, str) and interrupt_id:
                attributes[sc.EVALTRACE_LANGGRAPH_INTERRUPT_ID] = interrupt_id
            attributes.update(captured(sc.EVALTRACE_LANGGRAPH_INTERRUPT_VALUE, getattr(interrupt, "value", None)))
            events.append((sc.EVALTRACE_LANGGRAPH_INTERRUPT_EVENT, attributes))
        return events or [(sc.EVALTRACE_LANGGRAPH_INTERRUPT_EVENT, {})]
    if _codec.is_a(error, _PARENT_COMMAND):
        command = error.args[0] if error.args else None
        goto = getattr(command, "goto", None)
        goto = [goto] if isinstance(goto, str) else goto
        nodes = [g for g in goto if isinstance(g, str)] if isinstance(goto, Sequence) else []  # not a Send's input
        return [(sc.EVALTRACE_LANGGRAPH_PARENT_COMMAND_EVENT, {sc.EVALTRACE_LANGGRAPH_GOTO: nodes} if nodes else {})]
    if _codec.is_a(error, _DRAINED):
        reason = getattr(error, "reason", None)
        attributes = {sc.EVALTRACE_LANGGRAPH_DRAIN_REASON: reason} if isinstance(reason, str) and reason else {}
        return [(sc.EVALTRACE_LANGGRAPH_DRAIN_EVENT, attributes)]
    return None


def tool_arguments(input_str: str) -> Any:
    """A tool's arguments when LangChain gave only their text: the parsed JSON, else the text."""
    return loads_or_raw(input_str)


# The providers whose LangChain integration (langchain-openai) raises a Responses failure as a ``ValueError``.
_OPENAI_PROVIDERS = frozenset({"openai", "azure.ai.openai"})


def end_model_error(span: Span, error: BaseException, run: Run) -> None:
    """End a failed model call's span as the SDK instrumentations do (API error code, HTTP status); it ends anyway.

    A stream that had begun keeps its timings, and how it ended: broken by an error, or left early by its consumer.
    LangChain reports the generator's close (``GeneratorExit``: the application stopped reading, closed the
    stream or dropped it) as the run's error: that is no failure, as closing an openai stream is none, so the span
    ends with status UNSET, ``closed_early`` and not completed, even before the first chunk. A task's cancellation
    is ``closed_early`` too, and keeps its error status. A Responses failure the integration raised (its
    ``ValueError``) is named as ``instrument_openai()`` names it (see ``_streams.raised_failure``); only an OpenAI model's is read.
    """
    try:
        with handle_internal_errors("recording a failed LangChain model call"):
            if isinstance(error, GeneratorExit):
                span.set_attributes(stream_attributes(run, sc.STREAM_END_CLOSED) or _closed_before_any_chunk())
                return
            # The failure first: naming it reads the error's own properties, which may raise. Only an OpenAI model's
            # ValueError is read as the API's failure: another integration's (or the user's) is theirs, unchanged.
            reported = _streams.raised_failure(error) if run.provider in _OPENAI_PROVIDERS else None
            status = reported[1] if reported is not None else f"{type(error).__name__}: {error}"
            span.set_status(Status(StatusCode.ERROR, status))
            span.record_exception(error)
            span.set_attributes(_error_attributes(error) if reported is None else {sc.ERROR_TYPE: reported[0]})
            left = isinstance(error, asyncio.CancelledError)
            span.set_attributes(stream_attributes(run, sc.STREAM_END_CLOSED if left else sc.STREAM_END_ERROR))
    finally:
        span.end()


def _closed_before_any_chunk() -> dict[str, AttributeValue]:
    """A stream closed before its first chunk: only a generator is closed, so it was one (no chunk, no timing)."""
    return {
        sc.GEN_AI_REQUEST_STREAM: True,
        sc.EVALTRACE_STREAM_COMPLETED: False,
        sc.EVALTRACE_STREAM_END_REASON: sc.STREAM_END_CLOSED,
        sc.EVALTRACE_STREAM_CHUNKS: 0,
    }


def _error_attributes(error: BaseException) -> Mapping[str, AttributeValue]:
    """:func:`model_error`'s attributes, or the error's class when reading its code or status raises."""
    try:
        return model_error(error)
    except Exception:  # the user's error's ``code``/``status_code`` properties: theirs, not a failure of ours
        return {sc.ERROR_TYPE: error_type(error)}
