"""Pure: Mistral's Conversations API (``beta.conversations``, the Agents API) -> ``invoke_agent`` span attributes.

A conversation call sends ``inputs`` (a string, or entries: ``message.input``, ``function.result``...) to an agent
(``agent_id``) or a model with ``instructions``, ``tools`` and ``completion_args``, and the server answers with the
entries it produced: ``message.output`` (text, thinking and tool-reference chunks), ``function.call`` (a client
tool to run), ``tool.execution`` (a built-in tool the server ran: web search, code interpreter...) and
``agent.handoff``. They become one assistant output message: text, reasoning, ``tool_call`` parts and
``server_tool_call`` parts. The API has no finish reason, so ``gen_ai.response.finish_reasons`` is left out
(never invented); the output message's own is ``tool_call`` when the reply asks for a client tool, else ``stop``.

Streams (``start_stream`` / ``append_stream``) yield ``ConversationEvents`` whose ``data`` is typed by ``type``:
``conversation.response.started`` (the conversation id), ``message.output.delta``, ``function.call.delta``,
``tool.execution.started`` / ``.delta`` (a built-in tool's arguments, in fragments) / ``.done``,
``agent.handoff.done``, ``conversation.response.done`` (the usage: the terminal event) and
``conversation.response.error``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    output_message,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
)
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace.instrumentation.mistral.request import (
    chat_params,
    content_parts,
    get,
    given,
    known,
    thinking_references,
    thinking_text,
)

Attributes = dict[str, Any]


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """The agent, model, conversation and ``completion_args`` of one call; inputs, instructions, tools with capture."""
    params = given(params)
    args = get(params, "completion_args")
    completion = chat_params(_as_dict(args)) if args is not None else {}
    attrs = openai_request.request_attributes(EndpointKind.CHAT, completion)
    model = params.get("model")
    if isinstance(model, str) and model:
        attrs[sc.GEN_AI_REQUEST_MODEL] = model
    for key, name in ((sc.GEN_AI_AGENT_ID, "agent_id"), (sc.GEN_AI_CONVERSATION_ID, "conversation_id")):
        value = params.get(name)
        if isinstance(value, str) and value:
            attrs[key] = value
    # The agent version the call runs (``start`` / ``restart``): a string or a number; the attribute is a string.
    version = params.get("agent_version")
    if (isinstance(version, str) and version) or (isinstance(version, int) and not isinstance(version, bool)):
        attrs[sc.GEN_AI_AGENT_VERSION] = str(version)
    if not capture:
        return attrs
    instructions = params.get("instructions")
    system = [text_part(instructions)] if isinstance(instructions, str) and instructions else None
    # Function tools flattened; built-in ones (``{"type": "web_search"}``) kept by their type.
    tools = openai_request.tool_definitions({"tools": list(params.get("tools") or ())})
    attrs.update(list_values.request_content_attributes(input_messages(params.get("inputs")), system, tools, max_len))
    return attrs


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    return dict(dump()) if callable(dump) else {}


def input_messages(inputs: Any) -> list[Message]:
    """``inputs`` (a string, or conversation entries) -> GenAI input messages."""
    if isinstance(inputs, str):
        return [{"role": "user", "parts": [text_part(inputs)]}] if inputs else []
    messages: list[Message] = []
    for entry in inputs or ():
        kind = get(entry, "type")
        if kind == "function.result":
            result = get(entry, "result")
            messages.append({"role": "tool", "parts": [tool_response_part(get(entry, "tool_call_id"), result)]})
        elif kind == "function.call":
            part = tool_call_part(get(entry, "tool_call_id"), get(entry, "name"), get(entry, "arguments"))
            messages.append({"role": "assistant", "parts": [part]})
        else:  # message.input (the default type), or a message.output given back as history
            messages.append({"role": str(get(entry, "role") or "user"), "parts": content_parts(get(entry, "content"))})
    return messages


def usage_of(usage: Any) -> Usage | None:
    """``ConversationUsageInfo`` -> Usage (prompt and completion tokens)."""
    if usage is None:
        return None
    return Usage(input_tokens=get(usage, "prompt_tokens"), output_tokens=get(usage, "completion_tokens"))


def server_tool_part(entry: Any) -> Part:
    """A ``tool.execution`` entry (a built-in tool the server ran) -> a ``server_tool_call`` part."""
    return _server_tool_call(get(entry, "id"), get(entry, "name"), get(entry, "arguments"))


def _server_tool_call(call_id: Any, name: Any, arguments: Any) -> Part:
    kind = str(name or "")
    call: dict[str, Any] = {"type": kind}
    if arguments:
        call["arguments"] = arguments
    return {"type": "server_tool_call", "id": call_id, "name": kind, "server_tool_call": call}


def handoff_part(entry: Any) -> Part:
    """An ``agent.handoff`` entry -> a part naming the agents the conversation passed between."""
    return {
        "type": "agent_handoff",
        "previous_agent": get(entry, "previous_agent_name") or get(entry, "previous_agent_id"),
        "next_agent": get(entry, "next_agent_name") or get(entry, "next_agent_id"),
    }


def _message_parts(content: Any) -> list[Part]:
    """A ``message.output`` entry's content -> parts, its thinking joined into one reasoning part first."""
    if isinstance(content, str):
        return [text_part(content)] if content else []
    content = [known(c) for c in content or ()]
    thoughts = [c for c in content if get(c, "type") == "thinking"]
    thinking = "".join(thinking_text(c) for c in thoughts)
    parts: list[Part] = [reasoning_part(thinking)] if thinking else []
    for thought in thoughts:  # what the thinking cited, after it
        parts.extend(thinking_references(thought))
    parts.extend(content_parts([c for c in content or () if get(c, "type") != "thinking"]))
    return parts


def _reply(parts: list[Part]) -> Message:
    """The one assistant output message; it asks for a client tool (``tool_call``) or has answered (``stop``)."""
    return output_message(parts, "tool_calls" if any(p.get("type") == "tool_call" for p in parts) else "stop")


def outcome(response: Any, capture: bool) -> Outcome:
    """``ConversationResponse`` -> Outcome: model (of the last entry that names one), usage, conversation id."""
    parts: list[Part] = []
    model = None
    for entry in get(response, "outputs") or ():
        model = get(entry, "model") or model
        if not capture:
            continue
        kind = get(entry, "type")
        if kind == "message.output":
            parts.extend(_message_parts(get(entry, "content")))
        elif kind == "function.call":
            parts.append(tool_call_part(get(entry, "tool_call_id"), get(entry, "name"), get(entry, "arguments")))
        elif kind == "tool.execution":
            parts.append(server_tool_part(entry))
        elif kind == "agent.handoff":
            parts.append(handoff_part(entry))
    conversation = get(response, "conversation_id")
    return Outcome(
        response_model=model,
        output_messages=[_reply(parts)] if capture else None,
        usage=usage_of(get(response, "usage")),
        attributes={sc.GEN_AI_CONVERSATION_ID: conversation} if isinstance(conversation, str) else None,
    )


class _Streamed:
    """A streamed tool call: its id, its name and its arguments' fragments (joined once, at the end).

    The base of ``_Call`` and ``_Execution``, which stay siblings: ``outcome`` tells a client tool call from a
    built-in tool's run with ``isinstance``, which a subclass of either would answer for both.
    """

    __slots__ = ("arguments", "call_id", "name")

    def __init__(self, call_id: Any, name: Any) -> None:
        self.call_id = call_id
        self.name = name
        self.arguments: list[str] = []


class _Call(_Streamed):
    """A streamed client tool call: ``function.call.delta`` events under one ``tool_call_id``."""

    __slots__ = ()


class _Execution(_Streamed):
    """A streamed built-in tool run: ``tool.execution.started``, then ``.delta`` argument fragments, then ``.done``."""

    __slots__ = ()

    def part(self) -> Part:
        return _server_tool_call(self.call_id, self.name, "".join(self.arguments))


_S = TypeVar("_S", _Call, _Execution)  # constrained, not bound: each is a member of the entries union


class _Message:
    """One ``message.output`` entry's deltas: text and thinking fragments, and its other chunks."""

    __slots__ = ("cited", "other", "text", "thinking")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.cited: list[Part] = []  # what its thinking cited, after the reasoning (as in a whole response)
        self.other: list[Part] = []  # its other chunks, each after the text that came before it

    def add_other(self, parts: list[Part]) -> None:
        """Parts between text fragments: the text so far becomes its own part first, as a whole entry orders it."""
        text = "".join(self.text)
        if text:
            self.other.append(text_part(text))
            self.text = []
        self.other.extend(parts)

    def parts(self) -> list[Part]:
        thinking, text = "".join(self.thinking), "".join(self.text)
        return [*([reasoning_part(thinking)] if thinking else ()), *self.cited, *self.other,
                *([text_part(text)] if text else ())]  # fmt: skip


class ConversationStreamAccumulator:
    """Accumulates ``ConversationEvents``: O(1) per event (fragments appended, joined once at the end).

    Entries keep the order the server produced them in (a built-in tool's run before the answer that cites it),
    as in a ``ConversationResponse``'s ``outputs``.
    """

    __slots__ = ("calls", "conversation", "done", "entries", "error", "executions", "messages", "model", "usage")

    def __init__(self) -> None:
        self.entries: list[Part | _Call | _Message | _Execution] = []  # in arrival order
        self.messages: dict[Any, _Message] = {}
        self.calls: dict[Any, _Call] = {}
        self.executions: dict[Any, _Execution] = {}
        self.conversation: str | None = None
        self.model: str | None = None
        self.usage: Any = None
        self.done = False
        self.error: tuple[str, str] | None = None

    def add(self, event: Any) -> bool:
        """Fold one event in; True when it carried output (for time to first chunk)."""
        data = getattr(event, "data", event)
        kind = get(data, "type")
        if kind == "message.output.delta":
            self.model = get(data, "model") or self.model
            self._add_content(data)
            return True
        if kind == "function.call.delta":
            self.model = get(data, "model") or self.model
            self._fold(data, "tool_call_id", self.calls, _Call)  # a client tool call's fragment
            return True
        if kind == "tool.execution.started" or kind == "tool.execution.delta":
            # A built-in tool's run: the done event carries no arguments, so without these fragments the streamed
            # run would lose what a whole response's ``tool.execution`` entry records.
            self._fold(data, "id", self.executions, _Execution)
        elif kind == "tool.execution.done":
            if get(data, "id") not in self.executions:  # no start seen: the done event is all there is
                self.entries.append(server_tool_part(data))
        elif kind == "agent.handoff.done":
            self.entries.append(handoff_part(data))
        elif kind == "conversation.response.started":
            conversation = get(data, "conversation_id")
            self.conversation = conversation if isinstance(conversation, str) else None
        elif kind == "conversation.response.done":
            self.usage = get(data, "usage")
            self.done = True
        elif kind == "conversation.response.error":
            self.error = (str(get(data, "code") or "conversation.response.error"), str(get(data, "message") or ""))
        return False

    def _add_content(self, data: Any) -> None:
        """A ``message.output.delta``: a text fragment, or one chunk (text, thinking, a reference) of its entry."""
        entry_id = get(data, "id")
        message = self.messages.get(entry_id)
        if message is None:
            message = self.messages[entry_id] = _Message()
            self.entries.append(message)
        content = known(get(data, "content"))
        if isinstance(content, str):
            message.text.append(content)
        elif get(content, "type") == "thinking":
            message.thinking.append(thinking_text(content))
            message.cited.extend(thinking_references(content))
        elif get(content, "type") == "text":
            message.text.append(get(content, "text") or "")
        elif content is not None:
            message.add_other(content_parts([content]))

    def _fold(self, data: Any, id_key: str, table: dict[Any, _S], kind: type[_S]) -> None:
        """One argument fragment of the streamed call under ``data[id_key]``: its entry made (in order) on first sight.

        Client tool calls (``function.call.delta``, keyed by ``tool_call_id``) and built-in tool runs
        (``tool.execution.started`` / ``.delta``, keyed by ``id``) fold the same way into their own ``table``.
        """
        call_id = get(data, id_key)
        streamed = table.get(call_id)
        if streamed is None:
            streamed = table[call_id] = kind(call_id, get(data, "name"))
            self.entries.append(streamed)
        arguments = get(data, "arguments")
        if isinstance(arguments, str) and arguments:
            streamed.arguments.append(arguments)

    def end_reason(self) -> str:
        """``exhausted`` only after ``conversation.response.done``, else ``truncated``."""
        return sc.STREAM_END_EXHAUSTED if self.done else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """The ``conversation.response.error`` event's (code, message), if the stream reported one."""
        return self.error

    def summary(self) -> Summary:
        """Model and token counts only."""
        usage = usage_of(self.usage)
        if usage is None:
            return Summary(self.model)
        return Summary(self.model, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the events so far amount to."""
        parts: list[Part] = []
        for entry in self.entries:
            if isinstance(entry, _Message):
                parts.extend(entry.parts())
            elif isinstance(entry, _Call):
                parts.append(tool_call_part(entry.call_id, entry.name, "".join(entry.arguments)))
            elif isinstance(entry, _Execution):
                parts.append(entry.part())
            else:
                parts.append(entry)
        conversation = self.conversation
        return Outcome(
            response_model=self.model,
            output_messages=[_reply(parts)],
            usage=usage_of(self.usage),
            attributes={sc.GEN_AI_CONVERSATION_ID: conversation} if conversation else None,
        )
