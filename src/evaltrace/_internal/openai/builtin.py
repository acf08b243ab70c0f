"""Pure: a Responses API built-in tool's output item, and an answer's annotations, as GenAI parts.

A built-in tool's item (``web_search_call``, ``file_search_call``, ``mcp_call``...) is a ``server_tool_call`` part
named by the item type (conventions.md 6.3), as every other provider's server tool call is recorded:

* a web search's ``action`` (``{"type": "search", "query", "queries"}``, ``open_page`` / ``find_in_page`` with
  their ``url`` and ``pattern``) is the call's ``arguments``; the ``sources`` the search used (asked with
  ``include=["web_search_call.action.sources"]``: URLs only, no text) are its ``server_tool_call_response``,
  ``{"type": "web_search_call", "sources": [{"type": "url", "url"}]}``;
* a file search's ``queries`` are its ``arguments``; its ``results`` (asked with
  ``include=["file_search_call.results"]``: ``file_id``, ``filename``, ``score``, ``text``, ``attributes``) are its
  ``server_tool_call_response``, ``{"type": "file_search_call", "results": [...]}``. The results' texts together
  keep at most ``1/RESULTS_SHARE`` of the attribute cap (the ranked first whole, a text cut marked as a capped
  value is): twenty chunks of a file would otherwise pass the cap, and the whole output attribute, the answer
  with it, would become a truncation marker.

Both are what the model was given, so the trace mapping pairs the response with its call (by the item's ``id``)
as a tool result, and the evaluators read a result of these exact types source by source
(:func:`evaltrace._internal.sources.server_result_chunks`). Other items keep their type and id alone.

An ``output_text``'s ``annotations`` are its text part's ``citations``, in the keys the Google and Groq
instrumentations record cited sources in: ``type``, ``source`` (a URL, else the cited file's id), ``title`` (a
page's title, else the file's name), ``start_index`` / ``end_index`` (the cited span of the answer) or ``index``
(a file citation's position in it), and a container file's ``container_id``.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import settings
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.openai.parts import Part, field

RESULTS_SHARE = 2
"""The share of ``max_attribute_length`` a file search's result texts keep together (half of it)."""

_RESULT_KEYS = ("file_id", "filename", "score", "text", "attributes")
_ACTION_KEYS = ("type", "query", "queries", "url", "pattern")
# An annotation's fields -> the citation's keys (``source`` and ``title`` from the first given).
_CITATION_KEYS = (("type", "type"), ("url", "source"), ("file_id", "source"), ("title", "title"),
                  ("filename", "title"), ("container_id", "container_id"), ("start_index", "start_index"),
                  ("end_index", "end_index"), ("index", "index"))  # fmt: skip


def builtin_tool_parts(item_type: str, item: Any) -> list[Part]:
    """A built-in tool's output item -> its ``server_tool_call`` part and, when it carries them, its results."""
    call: dict[str, Any] = {"type": item_type}
    response: dict[str, Any] | None = None
    if item_type == "web_search_call":
        action = field(item, "action")
        arguments = {key: value for key in _ACTION_KEYS if (value := field(action, key)) is not None}
        if arguments:
            call["arguments"] = arguments
        sources = field(action, "sources")
        if sources is not None:
            response = {"type": item_type, "sources": [_present(s, ("type", "url", "name")) for s in sources]}
    elif item_type == "file_search_call":
        queries = field(item, "queries")
        if queries is not None:
            call["arguments"] = {"queries": list(queries)}
        results = field(item, "results")
        if results is not None:
            response = {"type": item_type, "results": _results(results)}
    item_id = field(item, "id")
    parts: list[Part] = [{"type": "server_tool_call", "id": item_id, "name": item_type, "server_tool_call": call}]
    if response is not None:
        parts.append({"type": "server_tool_call_response", "id": item_id, "server_tool_call_response": response})
    return parts


def _results(results: Any) -> list[dict[str, Any]]:
    """A file search's results, each with the fields given, their texts within the share of the cap (in order)."""
    cap = settings.current.max_attribute_length
    left = cap // RESULTS_SHARE if cap and cap > 0 else -1  # -1: no cap
    out: list[dict[str, Any]] = []
    for result in results:
        entry = _present(result, _RESULT_KEYS)
        attributes = entry.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            entry["attributes"] = dict(attributes)
        text = entry.get("text")
        if left >= 0 and isinstance(text, str):
            if len(text) > left:
                entry["text"] = text[:left]
                entry[TRUNCATED_KEY] = True
                entry["original_lengths"] = {"text": len(text)}
            left = max(left - len(text), 0)
        out.append(entry)
    return out


def citations(annotations: Any) -> list[dict[str, Any]]:
    """An ``output_text``'s ``annotations`` -> the citations of its text part (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for annotation in annotations or ():
        cited: dict[str, Any] = {}
        for name, key in _CITATION_KEYS:
            value = field(annotation, name)
            if value is not None and key not in cited:
                cited[key] = value
        if cited:
            out.append(cited)
    return out


def add_citations(parts: list[Part], start: int, annotations: Any) -> None:
    """Put ``annotations`` on the last text part of ``parts[start:]`` (one output_text's parts), if any."""
    if not annotations:
        return
    cited = citations(annotations)
    for index in range(len(parts) - 1, start - 1, -1):
        if parts[index].get("type") == "text":
            if cited:
                parts[index]["citations"] = cited
            return


def _present(obj: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields ``keys`` of ``obj`` (a model or dict) that are given, in that order."""
    return {key: value for key in keys if (value := field(obj, key)) is not None}
