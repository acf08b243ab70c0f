"""What every convention module returns, and helpers to read flattened ``prefix.N.key`` attributes.

A convention module turns a foreign span's attributes (and events) into the GenAI message JSON that
``mapping._messages`` already reads (``{"role", "parts": [...]}``), so the conversation, tool and reasoning
rules apply to every convention alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.request import input_messages
from evaltrace.mapping.conventions._media import media_part

# A node of unflattened attributes: segment -> value or sub-node.
Tree = dict[str, Any]


@dataclass
class Messages:
    """A span's messages in GenAI JSON form (``gen_ai.system_instructions`` / input / output messages).

    Attributes:
        system: System instruction parts (usually empty: most conventions keep system messages in ``inputs``).
        inputs: Input messages, each ``{"role": ..., "parts": [...]}``.
        outputs: Output messages of the same shape.
    """

    system: list[Any] = field(default_factory=list)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.system or self.inputs or self.outputs)


@dataclass
class StreamTiming:
    """What a foreign span recorded of a streamed response. Values not recorded are None.

    Attributes:
        first_chunk_s: Seconds from the call's start to its first chunk.
        last_chunk_s: Seconds from the call's start to its last chunk (the end of the stream).
        chunks: How many chunks arrived.
        output_tokens_per_second: Output tokens per second of streaming.
    """

    first_chunk_s: float | None = None
    last_chunk_s: float | None = None
    chunks: int | None = None
    output_tokens_per_second: float | None = None


@dataclass
class StepInfo:
    """The model and finish reasons a model-call span recorded (empty when it recorded none).

    Attributes:
        model: The model that answered (the response's model), None when not recorded.
        request_model: The model asked for, None when not recorded.
        finish_reasons: The provider's finish reasons, verbatim, one per choice.
    """

    model: str | None = None
    request_model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)


@dataclass
class ToolRun:
    """What a foreign tool span recorded. Values not recorded are None (arguments/result: ``absent``).

    Attributes:
        name: Tool name, None when the span does not name it.
        call_id: The id of the model's tool call it executed.
        arguments: Arguments (object or JSON text); ``has_arguments`` tells a recorded null from nothing.
        result: Result value; ``has_result`` tells a recorded null from nothing.
    """

    name: str | None = None
    call_id: str | None = None
    arguments: Any = None
    result: Any = None
    has_arguments: bool = False
    has_result: bool = False


def unflatten(attributes: Mapping[str, Any], prefix: str) -> Tree:
    """Return the attributes under ``prefix`` as a tree: ``{prefix}.0.message.role`` -> ``{"0": {"message": ...}}``."""
    tree: Tree = {}
    start = len(prefix) + 1
    for key, value in attributes.items():
        if not key.startswith(prefix) or key[len(prefix) : start] != ".":
            continue
        node = tree
        *parents, leaf = key[start:].split(".")
        for segment in parents:
            child = node.get(segment)
            if not isinstance(child, dict):
                child = node[segment] = {}
            node = child
        if not isinstance(node.get(leaf), dict):  # a leaf never overwrites a deeper path
            node[leaf] = value
    return tree


def indexed(tree: Any) -> list[Any]:
    """Return the values of a tree node with numeric keys in index order (others are ignored)."""
    if not isinstance(tree, dict):
        return []
    return [tree[k] for k in sorted((k for k in tree if k.isdigit()), key=int)]


def path(tree: Any, dotted: str) -> Any:
    """Return ``tree[a][b]...`` for ``dotted`` ``"a.b"``, or None when a segment is missing."""
    for segment in dotted.split("."):
        if not isinstance(tree, dict):
            return None
        tree = tree.get(segment)
    return tree


def node(value: Any) -> Tree:
    """Return ``value`` when it is a tree node, else an empty one (a leaf where a node belongs is ignored)."""
    return value if isinstance(value, dict) else {}


def text_or_none(value: Any) -> str | None:
    """Return ``value`` when it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def parse_json(value: Any) -> Any:
    """Return JSON text parsed (text that is not JSON, and non-strings, unchanged)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        return value


def text_part(text: str) -> dict[str, Any]:
    """Return a GenAI text part."""
    return {"type": "text", "content": text}


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """Return a GenAI tool_call part (arguments may stay JSON text: the message reader parses them)."""
    return {"type": "tool_call", "id": text_or_none(call_id), "name": str(name or ""), "arguments": arguments}


def tool_response_part(call_id: Any, response: Any) -> dict[str, Any]:
    """Return a GenAI tool_call_response part."""
    return {"type": "tool_call_response", "id": text_or_none(call_id), "response": response}


def content_parts(content: Any) -> list[Any]:
    """Return GenAI parts for a message ``content`` that is text or a list of OpenAI/Anthropic-style blocks."""
    value = content
    if isinstance(content, str) and content.lstrip().startswith("["):
        parsed = parse_json(content)
        value = parsed if isinstance(parsed, list) else content
    if isinstance(value, str):
        return [text_part(value)] if value else []
    if not isinstance(value, list):
        return [] if value is None else [text_part(json.dumps(value, default=str))]
    parts: list[Any] = []
    for block in value:
        if isinstance(block, str):
            parts.append(text_part(block))
        elif isinstance(block, dict) and block.get("type") in ("text", "input_text", "output_text"):
            parts.append(text_part(str(block.get("text") or block.get("content") or "")))
        elif isinstance(block, dict) and block.get("type") in ("reasoning", "thinking"):
            parts.append({"type": "reasoning", "content": str(block.get("thinking") or block.get("text") or "")})
        elif isinstance(block, dict) and (media := media_part(block)) is not None:
            parts.append(media)
        elif block is not None:
            parts.append(block)
    return parts


_RESPONSES_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning"})


def responses_messages(value: Any) -> list[dict[str, Any]] | None:
    """Return the GenAI messages of an OpenAI Responses ``input`` list, or None when ``value`` is not one.

    A list is taken for Responses input when one of its items is a ``function_call``, ``function_call_output``
    or ``reasoning`` item, or a message whose content is a list of ``input_text`` / ``output_text`` parts:
    plain ``{"role", "content": str}`` lists are Chat messages, read as such. Items are read by the same code
    as evaltrace's own OpenAI instrumentation, so a conversation holds the same messages whoever recorded it.
    """
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        return None
    if not any(_responses_item(item) for item in value):
        return None
    try:
        return input_messages(EndpointKind.RESPONSES, {"input": value})
    except (TypeError, ValueError, AttributeError):  # an item of a shape the API never sends: not an input list
        return None


def _responses_item(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if isinstance(kind, str) and kind in _RESPONSES_ITEMS and kind != "message":
        return True
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and str(part.get("type", "")).startswith(("input_", "output_")) for part in content
    )
