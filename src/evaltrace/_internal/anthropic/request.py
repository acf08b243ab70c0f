"""The keyword arguments of a ``messages.create()`` call -> request span attributes and input messages.

``params`` never holds anthropic's NOT_GIVEN / omit sentinels (``registry.given_kwargs`` drops them first).
Content blocks become GenAI parts (conventions.md 1.5): ``tool_use`` a ``tool_call`` part with its parsed
input, ``tool_result`` a ``tool_call_response`` part in a ``tool`` message, ``thinking`` a ``reasoning`` part,
images and documents ``uri`` / ``file`` parts that never carry a base64 payload. Pure but for one read of the
capture settings' cap, which bounds a server tool's result text (``_bounded_text``).
"""

from __future__ import annotations

import json
from typing import Any, get_origin

from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace._internal.anthropic.citations import cited_text_part
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    document_text_part,
    field,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)

Attributes = dict[str, Any]
SERVER_TEXT_SHARE = 8
"""A server tool's result text (a fetched page, an MCP tool's text, a code run's output) is kept up to this
fraction of ``max_attribute_length``: several fit in one messages attribute beside the answer."""
Scalar = str | int | float | bool

# A redacted thinking block: encrypted, nothing readable, but it was there (and is billed as output).
REDACTED_REASONING: Part = {"type": "reasoning", "content": "", "redacted": True}


def request_attributes(params: dict[str, Any]) -> Attributes:
    """Return the request attributes (parameters) of one call; no content."""
    attrs: Attributes = {}
    for key, name in (("temperature", sc.GEN_AI_REQUEST_TEMPERATURE), ("top_p", sc.GEN_AI_REQUEST_TOP_P)):
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attrs[name] = float(value)
    top_k = params.get("top_k")
    if isinstance(top_k, int) and not isinstance(top_k, bool):
        attrs[sc.GEN_AI_REQUEST_TOP_K] = top_k  # an int, as on the conventions' main branch
    max_tokens = params.get("max_tokens")
    if isinstance(max_tokens, int):
        attrs[sc.GEN_AI_REQUEST_MAX_TOKENS] = max_tokens
    stop = params.get("stop_sequences")
    if isinstance(stop, list | tuple) and stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = [str(s) for s in stop]
    if params.get("stream") is True:
        attrs[sc.GEN_AI_REQUEST_STREAM] = True
    output_config = params.get("output_config")
    if output_config is not None:  # (a missing attribute's lookup raises inside getattr: skipped on most calls)
        effort = field(output_config, "effort")
        if isinstance(effort, str):  # Anthropic's reasoning effort ("low" ... "max"), as the provider names it
            attrs[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
    if _asks_for_json(params.get("output_format")) or (
        output_config is not None and _asks_for_json(field(output_config, "format"))
    ):
        attrs[sc.GEN_AI_OUTPUT_TYPE] = "json"
    return attrs


def _asks_for_json(output_format: Any) -> bool:
    """Structured outputs: a ``json_schema`` format, or a type ``parse()`` makes a schema of (``C``, ``list[C]``)."""
    if output_format is None:
        return False
    if isinstance(output_format, type) or get_origin(output_format) is not None:
        return True
    return bool(field(output_format, "type") == "json_schema")


_MODEL_PARAMETERS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("max_tokens", (int,)),
    ("temperature", (int, float)),
    ("top_p", (int, float)),
    ("top_k", (int,)),
    ("stop_sequences", (list, tuple)),
    ("service_tier", (str,)),
    ("effort", (str,)),
    ("stream", (bool,)),
)


def model_parameters(params: dict[str, Any]) -> dict[str, Scalar]:
    """The model parameters the call gave, for ``langfuse.observation.model.parameters``.

    ``thinking`` becomes ``thinking_budget_tokens`` (its budget, when enabled) and ``output_config.effort``
    becomes ``effort``. A list is JSON-stringified, as Langfuse does for non-scalar parameters (conventions.md 4.2).
    """
    out: dict[str, Scalar] = {}
    output_config = params.get("output_config")
    effort = field(output_config, "effort") if output_config is not None else None
    for key, types in _MODEL_PARAMETERS:
        value: Any = effort if key == "effort" else params.get(key)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            continue
        if isinstance(value, list | tuple):
            if not value:
                continue
            value = json.dumps([str(v) for v in value])
        out[key] = value
    thinking = params.get("thinking")
    if field(thinking, "type") == "enabled":
        budget = field(thinking, "budget_tokens")
        if isinstance(budget, int):
            out["thinking_budget_tokens"] = budget
    return out


def system_instructions(params: dict[str, Any]) -> list[Part] | None:
    """``system`` (a string or text blocks) -> ``gen_ai.system_instructions``."""
    system = params.get("system")
    if isinstance(system, str):
        return [text_part(system)] if system else None
    if not system:
        return None
    return [content_part(block) for block in system]


def input_messages(params: dict[str, Any]) -> list[Message]:
    """``messages`` -> ``gen_ai.input.messages``; tool results go into a ``tool`` message of their own."""
    out: list[Message] = []
    for message in params.get("messages") or ():
        role = field(message, "role") or "user"
        content = field(message, "content")
        if isinstance(content, str):
            out.append({"role": role, "parts": [text_part(content)]})
            continue
        results: list[Part] = []
        parts: list[Part] = []
        for block in content or ():
            if field(block, "type") == "tool_result":
                results.append(_tool_result_part(block))
            else:
                parts.append(content_part(block))
        # The API wants tool results first in their user message: a tool message, then what the user added.
        if results:
            out.append({"role": "tool", "parts": results})
        if parts or not results:
            out.append({"role": role, "parts": parts})
    return out


def tool_definitions(params: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Tools flattened as semconv shows: custom tools as ``function``, server tools by their versioned type."""
    tools = params.get("tools")
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        tool_type = field(tool, "type")
        entry: dict[str, Any] = {"type": "function" if tool_type in (None, "custom") else str(tool_type)}
        for key, name in (("name", "name"), ("description", "description"), ("input_schema", "parameters")):
            value = field(tool, key)
            if value is not None:
                entry[name] = value
        out.append(entry)
    return out


def content_part(block: Any) -> Part:
    """One content block (request or response) -> one GenAI part."""
    btype = field(block, "type")
    if btype == "text":
        return cited_text_part(field(block, "text") or "", field(block, "citations"))
    if btype == "thinking":
        return reasoning_part(field(block, "thinking") or "")
    if btype == "redacted_thinking":
        return dict(REDACTED_REASONING)
    if btype == "tool_use":
        return tool_call_part(field(block, "id"), field(block, "name"), field(block, "input"))
    if btype == "search_result":
        return _search_result_part(block)
    if btype in ("image", "document"):
        return _media_part(field(block, "source"), "image") if btype == "image" else _document_part(block)
    if btype == "compaction":  # the summary a compacted conversation goes on from (beta context management)
        content = field(block, "content")
        return {"type": "compaction", "content": content} if isinstance(content, str) else {"type": "compaction"}
    if btype == "server_tool_use" or btype == "mcp_tool_use":
        call: dict[str, Any] = {"type": btype}
        server = field(block, "server_name")
        if server is not None:  # an MCP tool: which server ran it
            call["server_name"] = server
        tool_input = field(block, "input")
        if tool_input is not None:  # inside server_tool_call, as every other provider's server tool call holds it
            call["arguments"] = tool_input
        return {
            "type": "server_tool_call",
            "id": field(block, "id"),
            "name": field(block, "name"),
            "server_tool_call": call,
        }
    if isinstance(btype, str) and btype.endswith("_tool_result"):
        response = _server_result(block, btype)
        return {
            "type": "server_tool_call_response",
            "id": field(block, "tool_use_id"),
            "server_tool_call_response": response,
        }
    return {"type": str(btype)}


def _blocks_content(content: Any) -> Any:
    """A list of content blocks: their text joined when all are text (as OpenAI's tool output), else the parts."""
    if isinstance(content, list | tuple):
        return joined_content([content_part(b) for b in content])
    return content


def joined_content(parts: list[Part]) -> str | list[Part]:
    """Converted content blocks as one string when every one is text, else the parts themselves."""
    texts = [p.get("content") for p in parts if p.get("type") == "text"]
    return "".join(str(t) for t in texts) if len(texts) == len(parts) else parts


def _server_result(block: Any, btype: str) -> dict[str, Any]:
    """A server tool's result block -> its ``server_tool_call_response`` object: its type and what the model got.

    A web search's results by ``url``, ``title`` and ``page_age`` (their ``encrypted_content`` is opaque, for the
    API only: it is never recorded); a web fetch's ``url``, ``title`` and, for a text document, its text as
    ``content`` (a PDF's bytes never); an MCP tool's text ``content`` (and ``is_error``); a code run's ``stdout``,
    ``stderr`` and ``return_code``; an error's ``error_code``. Other blocks (newer tools) keep their type alone.
    Each text is bounded (:func:`_bounded_text`): a fetched page may be far longer than the whole attribute's cap.
    """
    response: dict[str, Any] = {"type": btype}
    content = field(block, "content")
    error = field(content, "error_code") if not isinstance(content, list | tuple | str) else None
    if error is not None:
        response["error_code"] = error
    elif btype == "web_search_tool_result" and isinstance(content, list | tuple):
        keys = ("url", "title", "page_age")
        response["results"] = [{k: v for k in keys if (v := field(item, k)) is not None} for item in content]
    elif btype == "web_fetch_tool_result" and content is not None:
        document = field(content, "content")
        for key, value in (("url", field(content, "url")), ("title", field(document, "title"))):
            if value is not None:
                response[key] = value
        source = field(document, "source") if document is not None else None
        # Only a text source can be text: a PDF's base64 source is never turned into a data: string just to see.
        text = _media_part(source, "document") if field(source, "type") in ("text", "content") else None
        if text is not None and text["type"] == "text":
            _bounded_text(response, "content", text["content"])
    elif btype == "mcp_tool_result":
        _bounded_text(response, "content", _blocks_content(content) or "")
        if field(block, "is_error") is True:
            response["is_error"] = True
    elif content is not None and field(content, "stdout") is not None:  # code_execution / bash_code_execution
        for key in ("stdout", "stderr", "return_code"):
            _bounded_text(response, key, field(content, key))
    return response


def _bounded_text(response: dict[str, Any], key: str, text: Any) -> None:
    """Set ``response[key]`` to ``text``, or to its first ``SERVER_TEXT_SHARE`` of the cap and the cut recorded.

    The cap (``max_attribute_length``) bounds a whole messages attribute: one fetched page over it would replace
    the attribute, the answer and the user's question with it, by a truncation marker. A text over its share keeps
    its beginning, and the response says so as a capped value does: ``evaltrace.truncated`` and, per field cut,
    its ``original_lengths``. A cap of 0 (none) keeps every text whole; a value that is no text is kept as it is.
    """
    cap = settings.current.max_attribute_length
    share = cap // SERVER_TEXT_SHARE if cap and cap > 0 else 0
    if not share or not isinstance(text, str) or len(text) <= share:
        response[key] = text
        return
    response[key] = text[:share]
    response[TRUNCATED_KEY] = True
    response.setdefault("original_lengths", {})[key] = len(text)


def _search_result_part(block: Any) -> Part:
    """A search result given to the model (RAG with citations): where it came from and its text."""
    part: Part = {"type": "search_result"}
    for key in ("source", "title"):
        value = field(block, key)
        if value is not None:
            part[key] = value
    part["content"] = _blocks_content(field(block, "content")) or ""
    return part


def _tool_result_part(block: Any) -> Part:
    return tool_result_part(block, _blocks_content(field(block, "content")))


def tool_result_part(block: Any, content: Any) -> Part:
    """A ``tool_result`` block as a ``tool_call_response`` part, given its already converted ``content``."""
    part = tool_response_part(field(block, "tool_use_id"), content if content is not None else "")
    if field(block, "is_error") is True:
        part["is_error"] = True
    return part


def _document_part(block: Any) -> Part:
    """A ``document`` block: a document text part when its source is text (plain text, text content blocks).

    Marked a document (``parts.DOCUMENT_KEY``), with its ``title`` and ``context`` (what the caller says about
    it, which the model reads but does not cite): the RAG evaluators' context. A PDF, a URL or a file is a
    payload-free ``uri`` / ``file`` part, as an image is: no text to judge against.
    """
    part = _media_part(field(block, "source"), "document")
    if part["type"] != "text":
        return part
    marked = document_text_part(part["content"], title=field(block, "title"))
    context = field(block, "context")
    if isinstance(context, str) and context:
        marked["context"] = context
    return marked


def _media_part(source: Any, modality: str) -> Part:
    """An image or document source: base64 data as a payload-free ``data:`` URI, a URL as is, a file by id."""
    stype = field(source, "type")
    if stype == "base64":
        data = field(source, "data") or ""
        return uri_part(f"data:{field(source, 'media_type') or ''};base64,{data}", modality)
    if stype == "url":
        return uri_part(str(field(source, "url") or ""), modality)
    if stype == "file":
        return {"type": "file", "modality": modality, "file_id": field(source, "file_id")}
    if stype == "text":  # a plain-text document: its text is content, not media
        return text_part(field(source, "data") or "")
    if stype == "content":  # a document of content blocks (custom chunks for citations): text when it is all text
        content = _blocks_content(field(source, "content"))
        if isinstance(content, str):
            return text_part(content)
    return {"type": "uri", "modality": modality, "uri": f"<{stype} source>"}
