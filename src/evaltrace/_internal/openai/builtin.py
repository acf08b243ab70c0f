"""Pure: a Responses API built-in tool's output item, and an answer's annotations, as GenAI parts.

A built-in tool's item (``web_search_call``, ``file_search_call``, ``mcp_call``...) is a ``server_tool_call`` part
named by the item type (conventions.md 6.3), as every other provider's server tool call is recorded:

* a web search's ``action`` (``{"type": "search", "query", "queries"}``, ``open_page`` / ``find_in_page`` with
  their ``url`` and ``pattern``) is the call's ``arguments``; the ``sources`` the search used (asked with
  ``include=["web_search_call.action.sources"]``: URLs only, no text) are its ``server_tool_call_response``,
  ``{"type": "web_search_call", "sources": [{"type": "url", "url"}]}``. Its ``query`` / ``queries`` and its
  ``sources`` share the results' budget below: a long query is cut to what is left, queries and sources are kept
  whole in order while they fit, the rest left out, the call (for its arguments) or the response marked with what
  was given (``original_lengths: {"query": 5000}`` / ``{"queries": 40}`` / ``{"sources": 200}``);
* a file search's ``queries`` are its ``arguments`` (counted against the budget first, as a web search's); its
  ``results`` (asked with
  ``include=["file_search_call.results"]``: ``file_id``, ``filename``, ``score``, ``text``, ``attributes``) are its
  ``server_tool_call_response``, ``{"type": "file_search_call", "results": [...]}``. All the results of one
  messages list (every search of a response, or every earlier search a request sends back) keep at most
  ``1/RESULTS_SHARE`` of the attribute cap together, counted by a :class:`ResultsBudget`: each result's fields
  and ``attributes`` as their JSON, its text by length. The ranked first are kept whole; a text cut, or
  ``attributes`` dropped, is marked as a capped value is, and once the share is spent the remaining results are
  left out, the response marked with their number (``original_lengths: {"results": n}``). Twenty chunks of a file, or two such searches, would
  otherwise pass the cap, and the whole attribute, the answer or the question with it, would become a
  truncation marker.

Both are what the model was given, so the trace mapping pairs the response with its call (by the item's ``id``)
as a tool result, and the evaluators read a result of these exact types source by source
(:func:`evaltrace._internal.sources.server_result_chunks`). Other items keep their type and id alone.

An ``output_text``'s ``annotations`` are its text part's ``citations``, in the keys the Google and Groq
instrumentations record cited sources in: ``type``, ``source`` (a URL, else the cited file's id), ``title`` (a
page's title, else the file's name), ``start_index`` / ``end_index`` (the cited span of the answer) or ``index``
(a file citation's position in it), and a container file's ``container_id``.
"""

from __future__ import annotations

import json
from typing import Any

from evaltrace._internal import settings
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace._internal.openai.parts import Part, field

RESULTS_SHARE = 2
"""The share of ``max_attribute_length`` the built-in searches of one messages list keep together (half): file
search results, web search sources, and both searches' queries."""

_RESULT_KEYS = ("file_id", "filename", "score", "text", "attributes")
_ACTION_KEYS = ("type", "query", "queries", "url", "pattern")
# An annotation's fields -> the citation's keys (``source`` and ``title`` from the first given).
_CITATION_KEYS = (("type", "type"), ("url", "source"), ("file_id", "source"), ("title", "title"),
                  ("filename", "title"), ("container_id", "container_id"), ("start_index", "start_index"),
                  ("end_index", "end_index"), ("index", "index"))  # fmt: skip


class ResultsBudget:
    """What is left of the share of the cap the file search results of one messages list keep together.

    One is made per messages list (a response's output, a request's input) and passed to every
    :func:`builtin_tool_parts` of it, so that many searches share one budget rather than each taking a share.
    """

    __slots__ = ("left",)

    def __init__(self) -> None:
        cap = settings.current.max_attribute_length
        self.left = cap // RESULTS_SHARE if cap and cap > 0 else -1  # -1: no cap (0 or less keeps all, as the cap)


def builtin_tool_parts(item_type: str, item: Any, budget: ResultsBudget | None = None) -> list[Part]:
    """A built-in tool's output item -> its ``server_tool_call`` part and, when it carries them, its results.

    Args:
        item_type: The item's ``type``.
        item: The output item (an SDK model or a dict).
        budget: The messages list's :class:`ResultsBudget` (a fresh one when not given: one item alone).
    """
    budget = budget or ResultsBudget()
    call: dict[str, Any] = {"type": item_type}
    response: dict[str, Any] | None = None
    cut: dict[str, int] = {}  # the call's arguments cut or left out: ``original_lengths`` on the call
    if item_type == "web_search_call":
        action = field(item, "action")
        arguments = {key: value for key in _ACTION_KEYS if (value := field(action, key)) is not None}
        _queries_within(arguments, budget, cut)
        if arguments:
            call["arguments"] = arguments
        sources = field(action, "sources")
        if sources is not None:
            given = [_present(s, ("type", "url", "name")) for s in sources]
            kept = _sources_within(given, budget)
            response = {"type": item_type, "sources": kept}
            if len(kept) < len(given):
                response[TRUNCATED_KEY] = True
                response["original_lengths"] = {"sources": len(given)}
    elif item_type == "file_search_call":
        queries = field(item, "queries")
        if queries is not None:
            call["arguments"] = arguments = {"queries": list(queries)}
            _queries_within(arguments, budget, cut)
        results = field(item, "results")
        if results is not None:
            given = list(results)
            kept = _results(given, budget)
            response = {"type": item_type, "results": kept}
            if len(kept) < len(given):  # the share spent: the rest are left out, their number said
                response[TRUNCATED_KEY] = True
                response["original_lengths"] = {"results": len(given)}
    if cut:
        call[TRUNCATED_KEY] = True
        call["original_lengths"] = cut
    item_id = field(item, "id")
    parts: list[Part] = [{"type": "server_tool_call", "id": item_id, "name": item_type, "server_tool_call": call}]
    if response is not None:
        parts.append({"type": "server_tool_call_response", "id": item_id, "server_tool_call_response": response})
    return parts


def _queries_within(arguments: dict[str, Any], budget: ResultsBudget, cut: dict[str, int]) -> None:
    """Count a search's ``query`` / ``queries`` against ``budget``, cutting them to what it has left.

    A ``query`` longer than what is left is cut to it (``cut["query"]``: its length); ``queries`` are kept whole
    in order while they fit, the rest left out (``cut["queries"]``: how many were given).
    """
    if budget.left < 0:  # no cap
        return
    query = arguments.get("query")
    if isinstance(query, str):
        if len(query) > budget.left:
            arguments["query"] = query[: budget.left]
            cut["query"] = len(query)
        budget.left = max(budget.left - len(query), 0)
    queries = arguments.get("queries")
    if isinstance(queries, list):
        kept = _within_share(queries, budget)
        if len(kept) < len(queries):
            arguments["queries"] = kept
            cut["queries"] = len(queries)


def _sources_within(sources: list[dict[str, Any]], budget: ResultsBudget) -> list[dict[str, Any]]:
    """A web search's sources, in order, while their JSON fits what ``budget`` has left (all of them: no cap)."""
    return sources if budget.left < 0 else _within_share(sources, budget)


def _within_share(values: list[Any], budget: ResultsBudget) -> list[Any]:
    """The first of ``values`` whose JSON fits what ``budget`` has left, whole; the rest left out (budget spent)."""
    kept: list[Any] = []
    for value in values:
        size = len(json.dumps(value, default=str))
        if size > budget.left:
            budget.left = 0  # the share is spent: a later, shorter value is not kept after a left-out one
            break
        budget.left -= size
        kept.append(value)
    return kept


def _results(results: Any, budget: ResultsBudget) -> list[dict[str, Any]]:
    """A file search's results, each with the fields given, within what ``budget`` has left (in rank order)."""
    out: list[dict[str, Any]] = []
    for result in results:
        if budget.left == 0:  # spent (the cap is on): a result cut to nothing would still cost its fields
            break
        entry = _present(result, _RESULT_KEYS)
        attributes = entry.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            entry["attributes"] = attributes = dict(attributes)
        if budget.left >= 0:
            _within(entry, budget)
        out.append(entry)
    return out


def _within(entry: dict[str, Any], budget: ResultsBudget) -> None:
    """Cut ``entry`` to what ``budget`` has left: its fields and text first, then its ``attributes`` if they fit."""
    text = entry.get("text")
    attributes = entry.pop("attributes", None)
    given = {key: value for key, value in entry.items() if key != "text"}
    budget.left = max(budget.left - len(json.dumps(given, default=str)), 0)  # the id, name, score and keys
    cut: dict[str, int] = {}
    if isinstance(text, str):
        if len(text) > budget.left:
            entry["text"] = text[: budget.left]
            cut["text"] = len(text)
        budget.left = max(budget.left - len(text), 0)
    if attributes is not None:
        size = len(json.dumps(attributes, default=str))
        if size <= budget.left:
            entry["attributes"] = attributes
            budget.left -= size
        else:  # metadata, of no use cut: dropped whole, its size said
            cut["attributes"] = size
    if cut:
        entry[TRUNCATED_KEY] = True
        entry["original_lengths"] = cut


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
