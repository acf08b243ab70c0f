"""Pure: the v1 ``cohere.Client`` ``chat`` / ``chat_stream`` -> request attributes, responses and events -> ``Outcome``.

The v1 chat is not OpenAI-shaped: the new user turn is ``message`` (a string), the earlier turns ``chat_history``
(roles ``USER`` / ``CHATBOT`` / ``SYSTEM`` / ``TOOL``, text in ``message``), the system prompt ``preamble``, tool
results of the previous turn ``tool_results`` (``{call: {name, parameters}, outputs: [...]}``) and tools
``{name, description, parameter_definitions}``. Here they become GenAI messages in the order the model reads them
(history, tool results, then the message), ``gen_ai.system_instructions`` and function tool definitions (a JSON
schema built from the parameter definitions). Tool calls have a name and ``parameters`` (an object) but no id.

The response (``NonStreamedChatResponse``) holds ``text``, ``tool_calls``, ``finish_reason`` and ``meta`` (the
same ``ApiMeta`` usage as v2's). A stream's events (``StreamedChatResponse``, by ``event_type``): ``stream-start``
(the generation id), ``text-generation`` (text fragments), ``tool-calls-chunk`` / ``tool-calls-generation``,
citation and search events (not recorded), and ``stream-end``, the terminal signal, which carries the finish reason
(``COMPLETE``, ``MAX_TOKENS``, ``ERROR_LIMIT``, ``ERROR_TOXIC``, ``ERROR``) and the whole response.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.openai.parts import Message, Part, field, text_part, tool_call_part, tool_response_part
from evaltrace.instrumentation.cohere.codec import finish_reason, usage_attributes, usage_of, with_documents

_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system", "TOOL": "tool"}

FAILED = frozenset({"ERROR", "TIMEOUT", "ERROR_LIMIT"})
"""v1 finish reasons that say the generation failed although the SDK raised nothing (``ERROR_LIMIT``: the
context limit was hit)."""


def _call_part(call: Any) -> Part:
    parameters = field(call, "parameters")
    return tool_call_part(None, field(call, "name"), parameters if parameters is not None else {})


def _result_part(result: Any) -> Part:
    """A ``ToolResult`` -> ``tool_call_response`` with the tool's name (the only link: v1 calls have no id)."""
    call = field(result, "call")
    part = tool_response_part(None, field(result, "outputs"))
    name = field(call, "name")
    if name is not None:
        part["name"] = name
    return part


def _history_message(message: Any) -> Message:
    role = _ROLES.get(str(field(message, "role") or "USER").upper(), "user")
    if role == "tool":
        return {"role": "tool", "parts": [_result_part(r) for r in field(message, "tool_results") or ()]}
    text = field(message, "message")
    parts: list[Part] = [text_part(text)] if isinstance(text, str) and text else []
    parts.extend(_call_part(call) for call in field(message, "tool_calls") or ())
    return {"role": role, "parts": parts}


def input_messages(params: dict[str, Any]) -> list[Message]:
    """``documents`` (one ``user`` message), ``chat_history``, ``tool_results`` (a ``tool`` message), ``message``.

    A v1 document is a map of strings (its text, title, ``id``...): recorded as v2's are (``codec.with_documents``).
    """
    messages = [_history_message(m) for m in params.get("chat_history") or ()]
    documents = params.get("documents")
    if isinstance(documents, list | tuple):
        messages = with_documents(messages, [{"data": d, "id": field(d, "id")} for d in documents])
    results = params.get("tool_results")
    if results:
        messages.append({"role": "tool", "parts": [_result_part(r) for r in results]})
    text = params.get("message")
    if isinstance(text, str) and text:
        messages.append({"role": "user", "parts": [text_part(text)]})
    return messages


def system_instructions(params: dict[str, Any]) -> list[Part] | None:
    """``preamble`` as the system instructions."""
    preamble = params.get("preamble")
    return [text_part(preamble)] if isinstance(preamble, str) and preamble else None


def tool_definitions(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    """v1 tools as function tools, their ``parameter_definitions`` as a JSON schema."""
    tools = params.get("tools")
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for name, definition in (field(tool, "parameter_definitions") or {}).items():
            schema = {k: v for k in ("type", "description") if (v := field(definition, k)) is not None}
            properties[str(name)] = schema
            if field(definition, "required"):
                required.append(str(name))
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        definition = {"type": "function", "name": field(tool, "name"), "parameters": parameters}
        description = field(tool, "description")
        if description:
            definition["description"] = description
        out.append(definition)
    return out


def chat_outcome(response: Any, usage: Usage | None, content: bool, reason: Any = None) -> Outcome:
    """``NonStreamedChatResponse`` -> Outcome (``reason``: a stream-end's finish reason, else the response's)."""
    if reason is None:
        reason = field(response, "finish_reason")
    return _outcome(
        field(response, "response_id") or field(response, "generation_id"),
        field(response, "text"),
        field(response, "tool_calls"),
        reason,
        usage,
        content,
    )


def _outcome(response_id: Any, text: Any, calls: Any, reason: Any, usage: Usage | None, content: bool) -> Outcome:
    messages = None
    if content:
        parts: list[Part] = [text_part(text)] if isinstance(text, str) and text else []
        parts.extend(_call_part(call) for call in calls or ())
        mapped = finish_reason(reason)
        if calls and mapped == "stop":  # a v1 answer calling tools ends COMPLETE
            mapped = "tool_call"
        messages = [{"role": "assistant", "parts": parts, "finish_reason": mapped}]
    return Outcome(
        response_id=response_id,
        finish_reasons=[str(reason)] if reason else [],
        output_messages=messages,
        usage=usage,
    )


def failure(reason: Any) -> tuple[str, str] | None:
    """(``error.type``, message) for a failed v1 finish reason (HTTP 200, nothing raised), else None."""
    return (str(reason), str(reason)) if reason in FAILED else None


class V1StreamAccumulator:
    """Accumulates v1 ``chat_stream`` events; ``stream-end`` brings the whole response."""

    __slots__ = ("calls", "end", "generation_id", "texts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[Any] = []
        self.generation_id: str | None = None
        self.end: Any = None  # the stream-end event

    def add(self, event: Any) -> bool:
        """Fold one event in; True when it carries answer text or a tool call."""
        kind = field(event, "event_type")
        if kind == "text-generation":
            text = field(event, "text")
            if isinstance(text, str):
                self.texts.append(text)
            return bool(text)
        if kind == "tool-calls-generation":
            self.calls = list(field(event, "tool_calls") or ())
            return bool(self.calls)
        if kind == "tool-calls-chunk":
            return True
        if kind == "stream-start":
            self.generation_id = field(event, "generation_id")
        elif kind == "stream-end":
            self.end = event
        return False

    def end_reason(self) -> str:
        """``exhausted`` only with ``stream-end``; a failed generation makes it ``error``."""
        if self.failure() is not None:
            return sc.STREAM_END_ERROR
        return sc.STREAM_END_EXHAUSTED if self.end is not None else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """A failed finish reason on ``stream-end``."""
        return failure(field(self.end, "finish_reason")) if self.end is not None else None

    def _usage(self) -> Usage | None:
        return usage_of(field(field(self.end, "response"), "meta"))

    def outcome(self, content: bool = True) -> Outcome:
        """The stream-end's response (with its reason), else what the fragments so far amount to."""
        response = field(self.end, "response")
        reason = field(self.end, "finish_reason")
        if response is not None:
            outcome = chat_outcome(response, self._usage(), content, reason)
            outcome.attributes = usage_attributes(field(response, "meta")) or None
            return outcome
        return _outcome(self.generation_id, "".join(self.texts), self.calls, reason, None, content)

    def summary(self) -> Summary:
        """Token counts only (a v1 response names no model)."""
        usage = self._usage()
        return Summary(None) if usage is None else Summary(None, usage.input_tokens, usage.output_tokens)
