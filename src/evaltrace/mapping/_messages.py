"""gen_ai message-part JSON -> TraceMessages: roles, text, reasoning, tool calls and results, media parts."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.openai.parts import DOCUMENT_KEY
from evaltrace._internal.thinking import split_thinking
from evaltrace.mapping._spans import MISSING, compact, is_truncated, json_attr, loads, note_ignored
from evaltrace.mapping.conventions import Messages
from evaltrace.mapping.conventions._media import media_part
from evaltrace.schema import Role, ToolCall, TraceMessage

_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "system": "system",
    "developer": "system",
    "function": "tool",
}


class MessageReader:
    """Reads the messages of LLM spans, remembering tool names by call id so that results can name their tool."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.tool_names: dict[str, str] = {}

    def system(self, span: ReadableSpan) -> list[TraceMessage]:
        """Return the span's system instructions as system messages."""
        value = json_attr(span, sc.GEN_AI_SYSTEM_INSTRUCTIONS, self.notes)
        if value is MISSING:
            return []
        if isinstance(value, str) or is_truncated(value):
            return [TraceMessage(role="system", content=value)]
        if not isinstance(value, list):
            note_ignored(self.notes, span, sc.GEN_AI_SYSTEM_INSTRUCTIONS, "is not a JSON array of parts")
            return []
        return self._convert("system", value, None)

    def messages(self, span: ReadableSpan, key: str, default_role: Role) -> list[TraceMessage]:
        """Return the messages of attribute ``key`` (input or output messages), ``default_role`` for unknown roles."""
        value = json_attr(span, key, self.notes)
        if value is MISSING:
            return []
        if is_truncated(value):
            return [TraceMessage(role=default_role, content=value)]
        if not isinstance(value, list):
            note_ignored(self.notes, span, key, "is not a JSON array of messages")
            return []
        return self.message_list(span, key, value, default_role)

    def foreign(self, span: ReadableSpan, found: Messages) -> tuple[list[TraceMessage], list[TraceMessage]]:
        """Return the (system + input, output) messages a foreign convention found on ``span``."""
        system = self._convert("system", found.system, None) if found.system else []
        inputs = self.message_list(span, "foreign input messages", found.inputs, "user")
        return system + inputs, self.message_list(span, "foreign output messages", found.outputs, "assistant")

    def message_list(self, span: ReadableSpan, key: str, value: list[Any], default_role: Role) -> list[TraceMessage]:
        """Return the messages of a parsed GenAI message array (``key`` names it in notes)."""
        out: list[TraceMessage] = []
        for item in value:
            if not isinstance(item, dict):
                note_ignored(self.notes, span, key, f"has a message that is not an object: {str(item)[:80]!r}")
                continue
            role = _ROLES.get(str(item.get("role")), default_role)
            parts = item.get("parts")
            if parts is None and "content" in item:  # older {"role", "content"} shape
                parts = [{"type": "text", "content": item["content"]}]
            name = item.get("name") if isinstance(item.get("name"), str) else None
            out.extend(self._convert(role, parts if isinstance(parts, list) else [], name))
        return out

    def _convert(self, role: Role, parts: list[Any], name: str | None) -> list[TraceMessage]:
        texts, reasoning, calls, results, others, servers = _split_parts(parts)
        if (calls or servers) and not any(texts):  # some write an empty text part beside tool calls
            texts = []
        if role == "assistant":
            texts, inline = _strip_think(texts)
            reasoning += inline
        out = [self._tool_message(part, name) for part in results]
        for part in servers:  # the provider's own tool steps, in order, before the answer they led to
            if part["type"] == "tool_call":
                out.append(TraceMessage(role=role, tool_call=self._tool_call(part)))
            else:
                out.append(self._tool_message(part, None))
        if role == "tool" and not results and texts:
            out.append(TraceMessage(role="tool", name=name, content="\n".join(texts)))
            return out
        content: str | dict[str, Any] | None = "\n".join(texts) if texts else None
        if others:
            content = {"parts": others}
        thinking = "\n".join(reasoning) if reasoning else None
        tool_calls = [self._tool_call(part) for part in calls]
        if content is not None or thinking is not None or tool_calls:
            first = tool_calls[0] if tool_calls else None
            out.append(TraceMessage(role=role, content=content, thinking=thinking, tool_call=first, name=name))
            out.extend(TraceMessage(role=role, tool_call=call) for call in tool_calls[1:])
        return out

    def _tool_call(self, part: dict[str, Any]) -> ToolCall:
        call_id = part.get("id") if isinstance(part.get("id"), str) else None
        name = str(part.get("name") or "")
        if call_id:
            self.tool_names[call_id] = name
        return ToolCall(id=call_id, name=name, arguments=tool_arguments(part.get("arguments")))

    def _tool_message(self, part: dict[str, Any], name: str | None) -> TraceMessage:
        call_id = part.get("id") if isinstance(part.get("id"), str) else None
        tool_name = self.tool_names.get(call_id or "")
        if tool_name is None:  # no call id to look up (Ollama): the part's own name, else the message's
            own = part.get("name")
            tool_name = own if isinstance(own, str) and own else name
        # GenAI semconv names the result ``response``; pydantic-ai's parts (every format version) say ``result``.
        result = part["response"] if "response" in part else part.get("result")
        return TraceMessage(role="tool", name=tool_name, tool_call_id=call_id, content=tool_content(result))


def tool_arguments(value: Any) -> dict[str, Any]:
    """Return tool-call arguments as an object; anything that is not a JSON object is kept as ``{"_raw": value}``."""
    if value is None or value is MISSING:
        return {}
    if isinstance(value, str):
        parsed = loads(value) if value.strip() else {}
        return parsed if isinstance(parsed, dict) else {"_raw": value}
    return value if isinstance(value, dict) else {"_raw": value}


def tool_content(value: Any) -> dict[str, Any] | str:
    """Return a tool result as message content: strings and objects as they are, anything else as JSON text.

    A result of documents (a Cohere tool's, an Anthropic ``tool_result`` of document blocks) is its parts without
    their document marker: evaltrace's mark of a request's documents, not the tool's, which a judge is not shown.
    A result of one document (a Bedrock ``toolResult`` of one text ``document``) is that part, without it too.
    """
    if _is_document(value):
        return {k: v for k, v in value.items() if k != DOCUMENT_KEY}
    if isinstance(value, dict | str):
        return value
    if isinstance(value, list) and any(_is_document(p) for p in value):
        value = [{k: v for k, v in p.items() if k != DOCUMENT_KEY} if _is_document(p) else p for p in value]
    return "" if value is None else compact(value)


def _is_document(part: Any) -> bool:
    return isinstance(part, dict) and part.get(DOCUMENT_KEY) is True and part.get("type") == "text"


def _split_parts(
    parts: list[Any],
) -> tuple[list[str], list[str], list[dict[str, Any]], list[dict[str, Any]], list[Any], list[dict[str, Any]]]:
    """Sort message parts into texts, reasoning, tool calls, tool responses, everything else, and server tools.

    The last are the provider-run tool calls and responses, as ``tool_call`` / ``tool_call_response`` parts in
    their order.
    """
    servers: list[dict[str, Any]] = []
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    others: list[Any] = []
    documents = False
    parts = [p for p in parts if isinstance(p, dict | str)]  # null or numeric parts carry nothing
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif kind == "text":
            texts.append(str(part.get("content") or ""))
            if part.get(DOCUMENT_KEY) is True:  # a document the request sent: kept as a part, marked
                documents = True
        elif kind == "reasoning" or kind == "thinking":  # pydantic-ai names GenAI's reasoning part "thinking"
            if part.get("content"):  # a redacted (encrypted) thinking block has no text to show
                reasoning.append(str(part["content"]))
        elif kind == "tool_call":
            calls.append(part)
        elif kind == "tool_call_response":
            results.append(part)
        elif kind == "server_tool_call":  # a tool the provider ran (web search, code execution, MCP)
            servers.append(_server_call(part))
        elif kind == "server_tool_call_response":
            servers.append(_server_response(part))
        else:
            others.append(part)
    # A media message keeps its text parts in place among the others; so does a message with documents, whose
    # marked parts tell the question apart from the documents sent with it (evaluators' ``question_text``).
    if others or documents:
        skip = (
            "reasoning",
            "thinking",
            "tool_call",
            "tool_call_response",
            "server_tool_call",
            "server_tool_call_response",
        )  # a tuple: a foreign part's type may be a list
        others = [_other_part(p) for p in parts if not (isinstance(p, dict) and p.get("type") in skip)]
    return texts, reasoning, calls, results, others, servers


def _server_call(part: dict[str, Any]) -> dict[str, Any]:
    """A ``server_tool_call`` part as a tool call: a step the provider ran is a tool call the trace made.

    Before, such a part made its message structured content, so an answer grounded on a web search had no
    ``final_answer`` and every answer evaluator skipped it. The arguments are the call object's ``arguments``
    (Anthropic's input), else its other fields (a code execution's code), without its ``type``.

    A call whose arguments were cut at capture (an OpenAI built-in search's query past its share) carries the
    truncation mark and ``original_lengths`` on the call object, beside its arguments, so the span's arguments
    stay what the model sent; the mapped call's arguments take the mark, else the cut would be lost unsaid.
    """
    call = part.get("server_tool_call")
    arguments: Any = None
    if isinstance(call, dict):
        arguments = call["arguments"] if "arguments" in call else {k: v for k, v in call.items() if k != "type"}
        if "arguments" in call and is_truncated(call):
            mark = {TRUNCATED_KEY: True, "original_lengths": call.get("original_lengths")}
            arguments = {**arguments, **mark} if isinstance(arguments, dict) else {"_raw": arguments, **mark}
    return {"type": "tool_call", "id": part.get("id"), "name": part.get("name"), "arguments": arguments}


def _server_response(part: dict[str, Any]) -> dict[str, Any]:
    """A ``server_tool_call_response`` part as a tool result: its response object is the content."""
    return {"type": "tool_call_response", "id": part.get("id"), "response": part.get("server_tool_call_response")}


def _strip_think(texts: list[str]) -> tuple[list[str], list[str]]:
    """Move ``<think>`` reasoning that some models inline in their text out of it (closed or not)."""
    kept: list[str] = []
    thoughts: list[str] = []
    for text in texts:
        split = split_thinking(text)
        thoughts.extend(split.thoughts)
        if split.answer or split.answer == text:
            kept.append(split.answer)
    return kept, thoughts


def _other_part(part: Any) -> Any:
    if isinstance(part, dict) and (media := media_part(part)) is not None:  # typed, without a data: payload
        part = media
    if isinstance(part, dict) and part.get("type") == "blob" and isinstance(part.get("content"), str):
        return {**part, "content": f"<{len(part['content'])} base64 characters>"}
    return part
