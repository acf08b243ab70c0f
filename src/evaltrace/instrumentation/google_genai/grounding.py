"""Pure: a candidate's grounding (``grounding_metadata``, ``citation_metadata``, ``url_context_metadata``) -> parts.

What the model's answer was grounded on is kept on the answer's last text part, so a groundedness evaluator finds
the sources with the text they support, and the message still reads as text (the trace mapping reads a message
holding any part besides text, reasoning and tool calls as structured content: its answer would be lost). The
text part's ``grounding`` is a list of parts:

* the search queries the API ran (``web_search_queries``, ``retrieval_queries``) as ``server_tool_call`` parts
  named ``google_search`` / ``retrieval`` with ``arguments`` ``{"queries": [...]}``: the shape the Interactions
  API's ``google_search_call`` / ``retrieval_call`` steps are recorded in;
* each grounding chunk (``web``, ``retrieved_context``, ``maps``, ``image``) as a ``search_result`` part
  (``kind``, ``source``, ``title``, ``content``), the part the Anthropic and Bedrock instrumentations record a
  search result in, with its ``citations``: the answer's segments (``text``, ``start_index``, ``end_index``,
  ``confidence``) a ``grounding_support`` attributes to that chunk. A retrieved context's ``source`` is its URI,
  else its document, media blob or File Search store (left out when it names none: its title and text are kept);
* the URLs the ``url_context`` tool fetched as one ``server_tool_call_response`` of type ``url_context`` whose
  response is ``[{"url", "status"}]``, as the Interactions API's ``url_context_result`` step holds them.

``citation_metadata`` (the sources the answer recites) is the text part's ``citations``: ``source`` (the URI),
``title``, ``license``, ``start_index``, ``end_index``. A candidate without text (a tool call only) gets its
grounding parts after its own. ``search_entry_point`` (the HTML and CSS of the search-suggestions chip an app must
render, and an opaque blob) names no source and is not recorded.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from evaltrace._internal.openai.parts import Part, field
from evaltrace.instrumentation.google_genai.parts import enum_name

# A grounding chunk's kinds, in the order read: the first present is the chunk's.
_CHUNK_KINDS = ("web", "retrieved_context", "maps", "image")
# A citation's fields ``_cited`` records (as ``source``, ``title``...), in its order: also its key for ``add_citations``.
_CITATION_FIELDS = ("uri", "title", "license", "start_index", "end_index")
_QUERIES = (("web_search_queries", "google_search"), ("retrieval_queries", "retrieval"))


def grounding_parts(parts: list[Part], grounding: Any, citations: Collection[Any], url_context: Any) -> list[Part]:
    """``parts`` (one candidate's, converted) with its grounding added; ``parts`` itself when it has none."""
    if grounding is None and not citations and url_context is None:
        return parts
    out = list(parts)
    where = next((i for i in range(len(out) - 1, -1, -1) if out[i]["type"] == "text"), None)
    extra = _grounding(grounding) if grounding is not None else []
    fetched = [
        {"url": field(m, "retrieved_url"), "status": enum_name(field(m, "url_retrieval_status"))}
        for m in field(url_context, "url_metadata") or ()
    ]
    if fetched:
        response = {"type": "url_context", "response": fetched}
        extra.append({"type": "server_tool_call_response", "server_tool_call_response": response})
    if where is None:  # no text to hang them on (nor to recite: citations go with it)
        return out + extra
    text = dict(out[where])  # a copy: the converted part may be shared
    cited = _cited(citations)
    if cited:
        text["citations"] = cited
    if extra:
        text["grounding"] = extra
    out[where] = text
    return out


def citations_of(candidate: Any) -> list[Any]:
    """The ``Citation`` entries of a candidate's ``citation_metadata`` (none when it has none)."""
    return list(field(field(candidate, "citation_metadata"), "citations") or ())


def add_citations(kept: dict[tuple[Any, ...], Any], new: list[Any]) -> None:
    """Add a stream chunk's citations to those kept, each once (a chunk may repeat what an earlier one cited).

    ``kept`` maps each citation's key to it, in the order first cited: a chunk's citations cost O(1) each, not a
    scan of all kept so far (an SDK ``Citation`` is unhashable). The key is what ``_cited`` records of a citation:
    two that record the same are one source, whatever else (a ``publication_date``) differs.
    """
    for citation in new:
        kept.setdefault(_citation_key(citation), citation)


def _citation_key(citation: Any) -> tuple[Any, ...]:
    return tuple(field(citation, name) for name in _CITATION_FIELDS)


def merged(kept: Any, new: Any) -> Any:
    """Grounding metadata ``kept`` so far updated by a later chunk's: each field ``new`` sets replaces the kept one."""
    if kept is None:
        return new
    return {**_fields(kept), **{k: v for k, v in _fields(new).items() if v is not None}}


def _fields(value: Any) -> dict[str, Any]:
    """An SDK model's fields (or a dict) as a dict of its snake_case names."""
    if isinstance(value, dict):
        return dict(value)
    names = getattr(type(value), "model_fields", None)
    if names is None:
        return dict(getattr(value, "__dict__", {}))
    return {k: getattr(value, k) for k in names}


def _cited(citations: Collection[Any]) -> list[dict[str, Any]]:
    """``Citation`` entries -> the recited sources, each with the keys it has, each once (in the order first cited).

    A whole response may list a citation twice, as a stream's chunks may repeat one: whole and streamed record
    the same. Two that record the same (``_citation_key``) are one source, whatever else differs.
    """
    cited: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for citation in citations:
        key = _citation_key(citation)
        if key in seen:
            continue
        seen.add(key)
        uri, title, license, start, end = key
        entry = _present(source=uri, title=title, license=license, start_index=start, end_index=end)
        if entry:
            cited.append(entry)
    return cited


def _grounding(grounding: Any) -> list[Part]:
    out: list[Part] = []
    for key, tool in _QUERIES:
        queries = field(grounding, key)
        if queries:
            call = {"type": tool, "arguments": {"queries": [str(q) for q in queries]}}
            out.append({"type": "server_tool_call", "name": tool, "server_tool_call": call})
    supports: dict[int, list[dict[str, Any]]] = {}
    for support in field(grounding, "grounding_supports") or ():
        segment = field(support, "segment")
        scores = list(field(support, "confidence_scores") or ())
        for n, index in enumerate(field(support, "grounding_chunk_indices") or ()):
            cited = _present(
                text=field(segment, "text"),
                start_index=field(segment, "start_index"),
                end_index=field(segment, "end_index"),
                confidence=scores[n] if n < len(scores) else None,
            )
            supports.setdefault(index, []).append(cited)
    for index, chunk in enumerate(field(grounding, "grounding_chunks") or ()):
        part = _chunk_part(chunk)
        if index in supports:
            part["citations"] = supports[index]
        out.append(part)
    return out


def _chunk_part(chunk: Any) -> Part:
    """A grounding chunk -> a ``search_result`` part: where it came from, its title and its text (if given)."""
    kind = next((k for k in _CHUNK_KINDS if field(chunk, k) is not None), None)
    source = field(chunk, kind) if kind is not None else None
    uri = field(source, "uri")
    if kind == "retrieved_context":
        # Vertex AI Search names its document, the Gemini API's File Search no URI but the media blob (multimodal
        # results) or the store it searched: the most specific given is where the chunk came from.
        uri = uri or field(source, "document_name") or field(source, "media_id") or field(source, "file_search_store")
        text = field(source, "text") or field(field(source, "rag_chunk"), "text")
    elif kind == "image":
        uri = field(source, "source_uri")
        text = None
    else:
        text = field(source, "text")
    part: Part = {"type": "search_result"}
    if kind is not None:
        part["kind"] = kind
    part.update(_present(source=uri, title=field(source, "title")))
    part["content"] = text if isinstance(text, str) else ""
    return part


def _present(**values: Any) -> dict[str, Any]:
    """The given values that are not None, in the order given."""
    return {k: v for k, v in values.items() if v is not None}
