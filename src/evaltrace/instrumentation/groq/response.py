"""Pure: a Groq ``ChatCompletion`` -> ``Outcome``: the OpenAI chat outcome, with what Groq adds to it.

A modelled ``message.reasoning`` (a ``reasoning`` part), ``executed_tools`` (``server_tool_call`` parts, each
followed by its ``server_tool_call_response`` once it has run), ``annotations`` (citations, ``grounding``),
``x_groq.usage``'s hardware-cache counts and a compound model's ``usage_breakdown`` (``usage``).
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome
from evaltrace._internal.jsonutil import loads_or_raw, to_jsonable
from evaltrace._internal.openai.parts import Message, Part, reasoning_part
from evaltrace._internal.openai.response import chat_outcome
from evaltrace.instrumentation.groq.grounding import add_citations
from evaltrace.instrumentation.groq.usage import breakdown_attributes

PROVIDER = "groq"


_X_GROQ_USAGE = (
    ("dram_cached_tokens", sc.GROQ_USAGE_DRAM_CACHED_TOKENS),
    ("sram_cached_tokens", sc.GROQ_USAGE_SRAM_CACHED_TOKENS),
)


def x_groq_attributes(x_groq: Any) -> dict[str, Any] | None:
    """``x_groq.usage``'s hardware-cache counts of a response, as ``groq.usage.*`` attributes (None: none sent)."""
    usage = getattr(x_groq, "usage", None)
    if usage is None:
        return None
    attrs = {name: count for key, name in _X_GROQ_USAGE if isinstance(count := getattr(usage, key, None), int)}
    return attrs or None


def executed_tool_part(tool: Any) -> Part:
    """An ``executed_tools`` entry (a tool Groq ran itself) -> a ``server_tool_call`` part."""
    tool_type = str(getattr(tool, "type", None) or "tool")
    call: dict[str, Any] = {"type": tool_type}
    arguments = getattr(tool, "arguments", None)
    if isinstance(arguments, str) and arguments:
        call["arguments"] = loads_or_raw(arguments)
    return {"type": "server_tool_call", "id": None, "name": tool_type, "server_tool_call": call}


_TOOL_RESULTS = ("search_results", "code_results", "browser_results")
"""An executed tool's structured results, which it may send with no ``output``."""

_MEDIA_KEYS = frozenset({"png"})
"""A code result's image (base64): left out of the recorded results, which are JSON and payload-free."""


def _without_media(value: Any) -> Any:
    """A JSON-able value with every media key and every None left out (the SDK's unset optional fields)."""
    if isinstance(value, dict):
        return {key: _without_media(item) for key, item in value.items() if key not in _MEDIA_KEYS and item is not None}
    if isinstance(value, list):
        return [_without_media(item) for item in value]
    return value


def executed_tool_result_part(tool: Any) -> Part | None:
    """An executed tool's ``output`` and structured results (what it gave the model) -> a ``server_tool_call_response``.

    None until the tool has run: a stream sends each tool first with its arguments only, then again with its output
    or its ``search_results`` / ``code_results`` / ``browser_results``. The ``output`` is the model's reading of
    them; without one, they are the result (as JSON, without their images).
    """
    result: dict[str, Any] = {"type": str(getattr(tool, "type", None) or "tool")}
    output = getattr(tool, "output", None)
    if isinstance(output, str):
        result["output"] = output
        return {"type": "server_tool_call_response", "id": None, "server_tool_call_response": result}
    for key in _TOOL_RESULTS:
        value = getattr(tool, key, None)
        if value:
            result[key] = _without_media(to_jsonable(value))
    if len(result) == 1:
        return None
    return {"type": "server_tool_call_response", "id": None, "server_tool_call_response": result}


def _with_groq_parts(message: Message, reasoning: str | None, executed: Any) -> None:
    """Put ``reasoning`` first and the executed tools (each call, then its result) after the answer's parts."""
    parts: list[Part] = message["parts"]
    if reasoning:
        parts.insert(0, reasoning_part(reasoning))
    for tool in executed or ():
        parts.append(executed_tool_part(tool))
        result = executed_tool_result_part(tool)
        if result is not None:
            parts.append(result)


def completion_outcome(completion: Any, content: bool = True) -> Outcome:
    """ChatCompletion -> Outcome: the OpenAI chat outcome, with Groq's reasoning, executed tools and cache counts."""
    outcome = chat_outcome(completion, content)
    x_groq = getattr(completion, "x_groq", None)
    if x_groq is not None:
        outcome.attributes = x_groq_attributes(x_groq)
    _with_breakdown(outcome, getattr(completion, "usage_breakdown", None))
    messages = outcome.output_messages
    if messages is not None:
        for message, choice in zip(messages, getattr(completion, "choices", None) or (), strict=False):
            source = getattr(choice, "message", None)
            # The shared reader found extras only; a modelled ``reasoning`` is Groq's own.
            reasoning = getattr(source, "reasoning", None)
            executed = getattr(source, "executed_tools", None)
            add_citations(message["parts"], getattr(source, "annotations", None))
            _with_groq_parts(message, reasoning if isinstance(reasoning, str) else None, executed)
    return outcome


def _with_breakdown(outcome: Outcome, breakdown: Any) -> None:
    """Add a compound model's ``usage_breakdown`` (and the cost it gives) to the outcome's attributes."""
    if breakdown is None:
        return
    attrs = breakdown_attributes(breakdown, outcome.usage, PROVIDER)
    if attrs:
        outcome.attributes = {**(outcome.attributes or {}), **attrs}
