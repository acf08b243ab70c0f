"""Pure: Bedrock's Converse shape (``converse`` / ``converse_stream``, and Amazon Nova's invoke_model body) -> GenAI.

Content blocks are one-key dicts (``{"text": ...}``, ``{"toolUse": {...}}``, ...), as boto3 parses them and as
Nova's native JSON body carries them. They become GenAI parts (conventions.md 1.5): ``toolUse`` a ``tool_call``,
``toolResult`` a ``tool_call_response`` in a ``tool`` message of its own, ``reasoningContent`` a ``reasoning`` part
(``redactedContent`` an empty redacted one), media ``uri`` parts that never carry their bytes. ``cachePoint``
markers are not content and are skipped.

Usage: Converse's ``inputTokens`` excludes the prompt cache (``inputTokens + outputTokens + cacheReadInputTokens +
cacheWriteInputTokens == totalTokens``), so OTel's inclusive input is their sum, as for Anthropic. Nova's native
body names the cache counts ``cacheReadInputTokenCount`` / ``cacheWriteInputTokenCount``; both spellings are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic.response import usage_of
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace._internal.engine.outcome import Outcome, Summary, Usage
from evaltrace._internal.engine.values import count
from evaltrace._internal.jsonutil import loads_or_raw
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
)

Attributes = dict[str, Any]
REDACTED_REASONING: Part = {"type": "reasoning", "content": "", "redacted": True}

# Bedrock stop reasons (Converse's StopReason, and the native families') -> the output message's GenAI finish
# reason. ``gen_ai.response.finish_reasons`` keeps the value verbatim; an unknown one is kept as sent here too.
FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "refusal": "content_filter",
    # native bodies: Llama, Titan, Cohere, Mistral
    "stop": "stop",
    "length": "length",
    "FINISH": "stop",
    "LENGTH": "length",
    "CONTENT_FILTERED": "content_filter",
    "COMPLETE": "stop",
    "MAX_TOKENS": "length",
    "ERROR_TOXIC": "content_filter",
    "tool_calls": "tool_call",
}


def finish_reason(reason: Any) -> str:
    """The output message's ``finish_reason``: mapped, an unknown one as sent, none (cut off) ``error``."""
    if not isinstance(reason, str) or not reason:
        return "error"
    return FINISH_REASONS.get(reason, reason)


def output_message(parts: list[Part], reason: Any) -> Message:
    """An assistant OutputMessage with the mapped finish reason."""
    return {"role": "assistant", "parts": parts, "finish_reason": finish_reason(reason)}


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# --- request ---------------------------------------------------------------------------------------------


def inference_attributes(config: Any, extra: Any = None) -> Attributes:
    """``inferenceConfig`` (and ``additionalModelRequestFields``' top k) -> ``gen_ai.request.*``.

    Nova's native body spells the limit ``max_new_tokens`` as well as ``maxTokens``; top k is not a Converse
    parameter and travels in ``additionalModelRequestFields`` (``top_k`` for Anthropic, ``inferenceConfig.topK``
    for Nova) or in Nova's own ``inferenceConfig.topK``.
    """
    attrs: Attributes = {}
    if not isinstance(config, Mapping):
        config = {}
    max_tokens = count(config.get("maxTokens"))
    if max_tokens is None:
        max_tokens = count(config.get("max_new_tokens"))
    if max_tokens is not None:
        attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    for key, name in (("temperature", sc.GEN_AI_REQUEST_TEMPERATURE), ("topP", sc.GEN_AI_REQUEST_TOP_P)):
        value = _float(config.get(key))
        if value is not None:
            attrs[name] = value
    stop = config.get("stopSequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    top_k = count(config.get("topK"))
    if top_k is None and isinstance(extra, Mapping):
        top_k = count(extra.get("top_k"))
        if top_k is None:
            top_k = count(extra.get("topK"))
        nested = extra.get("inferenceConfig")
        if top_k is None and isinstance(nested, Mapping):
            top_k = count(nested.get("topK"))
    if top_k is not None:
        attrs[sc.GEN_AI_REQUEST_TOP_K] = top_k
    return attrs


def system_instructions(system: Any) -> list[Part] | None:
    """``system`` (a list of system content blocks) -> ``gen_ai.system_instructions``; cache points skipped."""
    if isinstance(system, str):
        return [text_part(system)] if system else None
    if not isinstance(system, list | tuple):
        return None
    parts = [part for block in system if (part := content_part(block)) is not None]
    return parts or None


def input_messages(messages: Any) -> list[Message]:
    """``messages`` -> ``gen_ai.input.messages``; tool results go into a ``tool`` message ahead of the rest."""
    out: list[Message] = []
    for message in messages if isinstance(messages, list | tuple) else ():
        if not isinstance(message, Mapping):
            continue
        role = message.get("role") or "user"
        content = message.get("content")
        if isinstance(content, str):  # not Converse, but some native bodies accept it
            out.append({"role": role, "parts": [text_part(content)]})
            continue
        results: list[Part] = []
        parts: list[Part] = []
        for block in content if isinstance(content, list | tuple) else ():
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            # A user turn's tool results answer the previous turn; an assistant turn's are a server tool's own.
            if result is not None and role == "user":
                results.append(tool_result_part(result))
            elif (part := content_part(block)) is not None:
                parts.append(part)
        if results:
            out.append({"role": "tool", "parts": results})
        if parts or not results:
            out.append({"role": role, "parts": parts})
    return out


def tool_definitions(tool_config: Any) -> list[dict[str, Any]] | None:
    """``toolConfig.tools`` flattened as semconv shows: ``toolSpec`` as ``function``, a ``systemTool`` by name."""
    tools = tool_config.get("tools") if isinstance(tool_config, Mapping) else None
    if not isinstance(tools, list | tuple):
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        spec = tool.get("toolSpec")
        if isinstance(spec, Mapping):
            entry: dict[str, Any] = {"type": "function", "name": spec.get("name")}
            if spec.get("description") is not None:
                entry["description"] = spec["description"]
            schema = spec.get("inputSchema")
            if isinstance(schema, Mapping) and "json" in schema:
                entry["parameters"] = schema["json"]
            out.append(entry)
        elif isinstance(tool.get("systemTool"), Mapping):
            out.append({"type": "system_tool", "name": tool["systemTool"].get("name")})
    return out or None


# --- content blocks --------------------------------------------------------------------------------------


def content_part(block: Any) -> Part | None:
    """One content block (request or response) -> one GenAI part; None for a ``cachePoint`` marker."""
    if not isinstance(block, Mapping):
        return text_part(block) if isinstance(block, str) else None
    if "text" in block:
        text = block["text"]
        return text_part(text if isinstance(text, str) else str(text))
    if "toolUse" in block:
        use = block["toolUse"] or {}
        part = tool_call_part(use.get("toolUseId"), use.get("name"), use.get("input"))
        if use.get("type") == "server_tool_use":  # a tool the service ran itself (Nova's code interpreter)
            return {
                "type": "server_tool_call",
                "id": use.get("toolUseId"),
                "name": use.get("name"),
                "server_tool_call": {"type": "server_tool_use", "arguments": part.get("arguments")},
            }
        return part
    if "reasoningContent" in block:
        return _reasoning(block["reasoningContent"])
    if "toolResult" in block:
        return tool_result_part(block["toolResult"])
    if "cachePoint" in block:
        return None
    for modality in ("image", "document", "video", "audio"):
        if modality in block:
            return media_part(block[modality], modality)
    if "guardContent" in block:
        text = (block["guardContent"] or {}).get("text") or {}
        return text_part(str(text.get("text") or ""))
    if "citationsContent" in block:
        content = (block["citationsContent"] or {}).get("content") or ()
        return text_part("".join(str(c.get("text") or "") for c in content if isinstance(c, Mapping)))
    kind = next(iter(block), None)
    return {"type": str(kind)} if kind is not None else None


def _reasoning(content: Any) -> Part:
    if not isinstance(content, Mapping):
        return reasoning_part("")
    if "redactedContent" in content:
        return dict(REDACTED_REASONING)
    text = (content.get("reasoningText") or {}).get("text")
    return reasoning_part(text if isinstance(text, str) else "")


def tool_result_part(result: Any) -> Part:
    """``toolResult`` -> ``tool_call_response``: its text blocks joined, a ``json`` block as the object.

    A result with a ``type`` (``nova_code_interpreter_result``) is a server tool's, run by the service: a
    ``server_tool_call_response`` part.
    """
    if not isinstance(result, Mapping):
        return tool_response_part(None, "")
    server_type = result.get("type")
    content = result.get("content")
    response: Any = ""
    if isinstance(content, list | tuple):
        values: list[Any] = []
        for block in content:
            if isinstance(block, Mapping) and "json" in block:
                values.append(block["json"])
            elif isinstance(block, Mapping) and "text" in block:
                values.append(str(block["text"]))
            else:
                values.append(content_part(block))
        if values and all(isinstance(v, str) for v in values):
            response = "".join(values)
        elif len(values) == 1:
            response = values[0]
        else:
            response = values
    if isinstance(server_type, str) and server_type:
        return {
            "type": "server_tool_call_response",
            "id": result.get("toolUseId"),
            "server_tool_call_response": {"type": server_type, "response": response},
        }
    part = tool_response_part(result.get("toolUseId"), response)
    if result.get("status") == "error":
        part["is_error"] = True
    return part


def media_part(media: Any, modality: str) -> Part:
    """An image/document/video/audio block: bytes by media type and size only, an S3 location as its URI."""
    if not isinstance(media, Mapping):
        return {"type": "uri", "modality": modality, "uri": f"<{modality}>"}
    fmt = media.get("format")
    source = media.get("source") or {}
    if "text" in source and modality == "document":  # a plain-text document: its text is content, not media
        return text_part(str(source["text"]))
    location = source.get("s3Location")
    if isinstance(location, Mapping) and location.get("uri"):
        return {"type": "uri", "modality": modality, "uri": str(location["uri"])}
    data = source.get("bytes")
    mime = f"{_MIME_PREFIX.get(modality, modality)}/{fmt}" if isinstance(fmt, str) else ""
    size = len(data) if isinstance(data, bytes | bytearray | str) else 0
    part: Part = {"type": "uri", "modality": modality, "uri": f"data:{mime};base64,<omitted {size} bytes>"}
    if mime:
        part["mime_type"] = mime
    return part


_MIME_PREFIX = {"image": "image", "video": "video", "audio": "audio", "document": "application"}


# --- response --------------------------------------------------------------------------------------------


def converse_usage(usage: Any) -> Usage | None:
    """Converse ``usage`` (or Nova's body usage / a stream's ``metadata.usage``) -> Usage, input inclusive."""
    if not isinstance(usage, Mapping):
        return None
    read = usage.get("cacheReadInputTokens")
    if read is None:
        read = usage.get("cacheReadInputTokenCount")
    write = usage.get("cacheWriteInputTokens")
    if write is None:
        write = usage.get("cacheWriteInputTokenCount")
    return usage_of(count(usage.get("inputTokens")), count(usage.get("outputTokens")), count(read), count(write))


def converse_outcome(body: Any, response_id: str | None, content: bool = True) -> Outcome:
    """A Converse response (or Nova's native body) -> Outcome; ``stopReason`` verbatim."""
    reason = body.get("stopReason")
    messages = None
    if content:
        message = (body.get("output") or {}).get("message") or {}
        blocks = message.get("content") or ()
        parts = [part for block in blocks if (part := content_part(block)) is not None]
        messages = [output_message(parts, reason)]
    return Outcome(
        response_id=response_id,
        finish_reasons=[reason] if isinstance(reason, str) and reason else [],
        output_messages=messages,
        usage=converse_usage(body.get("usage")),
    )


_NO_INDEX = object()
"""``add_batch``'s marker for "no block kept": no event's block index is this object."""


class _Block:
    """One content block of a stream: its start (tool use id and name) and its delta fragments."""

    __slots__ = ("fragments", "kind", "redacted", "start")

    def __init__(self, kind: str, start: Any = None) -> None:
        self.kind = kind  # text, tool, reasoning
        self.start = start
        self.fragments: list[Any] = []  # str, or a list of content blocks for a tool result
        self.redacted = False

    def part(self) -> Part:
        if self.kind == "tool_result":  # fragments are lists of content blocks, not text
            content = [block for fragment in self.fragments for block in fragment]
            return tool_result_part({**(self.start or {}), "content": content})
        joined = "".join(self.fragments)
        if self.kind == "tool":
            use = self.start or {}
            return content_part({"toolUse": {**use, "input": loads_or_raw(joined) if joined else {}}}) or {}
        if self.kind == "reasoning":
            if self.redacted and not joined:
                return dict(REDACTED_REASONING)
            return reasoning_part(joined)
        return text_part(joined)


class ConverseStreamAccumulator:
    """Folds ``converse_stream`` events (and Nova's native stream chunks, the same shape) into one Outcome.

    ``add`` is O(1): fragments are appended per block index and joined once, at the end.
    """

    __slots__ = ("blocks", "response_id", "stop_reason", "stopped", "usage")

    def __init__(self, response_id: str | None = None) -> None:
        self.blocks: dict[int, _Block] = {}
        self.response_id = response_id
        self.stop_reason: str | None = None
        self.usage: Usage | None = None
        self.stopped = False

    def add(self, event: Any) -> bool:
        """Fold one event in; True for a content delta (output, for time to first chunk)."""
        if not isinstance(event, Mapping):
            return False
        delta_event = event.get("contentBlockDelta")
        if delta_event is not None:
            return self._delta(delta_event)
        start = event.get("contentBlockStart")
        if start is not None:
            index = start.get("contentBlockIndex", 0)
            begun = start.get("start") or {}
            if begun.get("toolUse") is not None:
                self.blocks[index] = _Block("tool", begun["toolUse"])
            elif begun.get("toolResult") is not None:
                self.blocks[index] = _Block("tool_result", begun["toolResult"])
            return False
        stop = event.get("messageStop")
        if stop is not None:
            self.stopped = True
            reason = stop.get("stopReason")
            if isinstance(reason, str):
                self.stop_reason = reason
            return False
        metadata = event.get("metadata")
        if metadata is not None:
            usage = converse_usage(metadata.get("usage"))
            if usage is not None:
                self.usage = usage
        return False

    def add_batch(self, events: list[Any]) -> None:
        """``add`` for each event in order, in one frame (the stream proxy's batch fold).

        The common event of a Converse stream is a text delta of an open block, as botocore parses it into plain
        dicts: ``{"contentBlockDelta": {"delta": {"text": str}, "contentBlockIndex": int}}``. For such an event
        ``add`` appends the text to the fragments of the block at that index, whatever its kind, and that is all
        this does, without ``add``'s calls and ``Mapping`` check. Every other event (another kind, a text that is
        not a ``str``, a block not open yet, another type than ``dict``) goes through ``add``.

        Per common event (s17-conv; why each holds is in benchmarks/README.md): the previous delta's block is kept
        for a run of deltas to one ``int`` index (dropped after every event that goes through ``add``, which alone
        opens or replaces a block); the body is tested for None only (``add`` reads it with ``get`` alone); the
        delta keeps its ``dict`` test; ``type``, ``dict`` and ``str`` are locals.
        """
        blocks = self.blocks
        add = self.add
        kept: Any = _NO_INDEX  # the index whose block's fragments ``fragments`` is: an ``int``, or the marker
        fragments: list[Any] = []
        type_of, plain, string = type, dict, str
        for event in events:
            try:
                if type_of(event) is plain:
                    body = event.get("contentBlockDelta")
                    if body is not None:
                        delta = body.get("delta")
                        if type_of(delta) is plain:
                            text = delta.get("text")
                            if type_of(text) is string:
                                index = body.get("contentBlockIndex", 0)
                                if index is not kept:
                                    block = blocks.get(index)
                                    if block is None:  # not open yet: ``add`` opens it
                                        kept = _NO_INDEX
                                        add(event)
                                        continue
                                    fragments = block.fragments
                                    kept = index if type_of(index) is int else _NO_INDEX
                                fragments.append(text)  # ``str(text)`` is ``text`` itself
                                continue
                kept = _NO_INDEX
                add(event)
            except Exception:
                kept = _NO_INDEX
                chunk_failed()

    def _delta(self, event: Any) -> bool:
        index = event.get("contentBlockIndex", 0)
        delta = event.get("delta") or {}
        block = self.blocks.get(index)
        if "text" in delta:
            if block is None:
                block = self.blocks[index] = _Block("text")
            block.fragments.append(str(delta["text"]))
        elif "toolUse" in delta:
            if block is None:
                block = self.blocks[index] = _Block("tool", {})
            block.fragments.append(str((delta["toolUse"] or {}).get("input") or ""))
        elif "toolResult" in delta:
            if block is None:
                block = self.blocks[index] = _Block("tool_result", {})
            results = delta["toolResult"]
            block.fragments.append(results if isinstance(results, list) else [results])
        elif "reasoningContent" in delta:
            if block is None:
                block = self.blocks[index] = _Block("reasoning")
            reasoning = delta["reasoningContent"] or {}
            if "text" in reasoning:
                block.fragments.append(str(reasoning["text"]))
            elif "redactedContent" in reasoning:
                block.redacted = True
            # a signature delta: nothing the span records
        return True

    def end_reason(self) -> str:
        """``exhausted`` only once ``messageStop`` arrived; a stream cut before it is ``truncated``."""
        return sc.STREAM_END_EXHAUSTED if self.stopped else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """Errors in a Bedrock stream are raised by botocore (``EventStreamError``), never folded in."""
        return None

    def summary(self) -> Summary:
        """Token counts only (Converse streams name no model)."""
        usage = self.usage
        return Summary() if usage is None else Summary(None, usage.input_tokens, usage.output_tokens)

    def outcome(self) -> Outcome:
        """What the events so far amount to (blocks in index order)."""
        parts: list[Part] = []
        for index in sorted(self.blocks):
            part = self.blocks[index].part()
            if part.get("type") == "text":
                if not part["content"]:
                    continue  # an empty delta (gpt-oss opens its answer with one): no content
                if parts and parts[-1].get("type") == "text":
                    # Nova streams each delta as a block of its own: one answer, as its unstreamed reply has it
                    parts[-1] = text_part(parts[-1]["content"] + part["content"])
                    continue
            parts.append(part)
        reason = self.stop_reason
        return Outcome(
            response_id=self.response_id,
            finish_reasons=[reason] if reason else [],
            output_messages=[output_message(parts, reason)],
            usage=self.usage,
        )
