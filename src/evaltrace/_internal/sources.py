"""Pure: the sources a provider retrieved for an answer, as the text chunks a RAG evaluator judges against.

Shared by the trace mapping (a Gemini answer's grounding ``search_result`` parts) and by the evaluators' context
(:func:`evaltrace.evaluators._base.context_chunks`, for the results of the provider's own retrieval tools: web
search, web fetch, file search). A source is one chunk: ``title - url`` on a first line when it has either, then
its text, then its other informative fields. Only results of the exact types the providers' retrieval tools are
recorded under are read so: an application's own tool result stays one chunk, whatever its type. A source without
text (Google Search grounding gives only a title and a URI; a URL-context fetch only its
URL and status) is no chunk: a faithfulness judge shown a bare URI would call every claim unsupported, so a
trace whose sources all lack text has no context, and the RAG evaluators skip it, saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

PROVIDER_SOURCES = "provider_sources"
"""The ``Trace.extra`` key of the sources the mapping found in the model calls' outputs, and of the documents their
requests sent (``mapping._request_documents``); absent when none."""

# Where a source's text is, in the order read: Gemini/Anthropic/Bedrock ``search_result`` parts hold ``content``,
# Groq compound and most search APIs ``content``, OpenAI file search ``text``, others a ``snippet`` or one of the
# last keys (a provider source whose text is under another name is still its text).
_TEXT_KEYS = ("content", "text", "snippet", "page_content", "description", "summary", "body", "excerpt")
# What it is called: a title, else (OpenAI file search) the file's name, else a name.
_TITLE_KEYS = ("title", "filename", "name")
# Where it came from: ``source`` in ``search_result`` parts, ``url`` / ``uri`` elsewhere.
_URL_KEYS = ("url", "uri", "source")
# Keys whose values are never sources: the answer's own segments a source supports (the model's words, not the
# source's), and a rendered search-suggestions chip (HTML).
_NOT_SOURCES = frozenset({"citations", "rendered_content"})
# The result types of the providers' own retrieval tools, as the instrumentations record them (lower-cased):
# Anthropic's web search and fetch, OpenAI Responses' file and web search calls, the Gemini API's tool responses
# (``GOOGLE_SEARCH_WEB``...) and Interactions steps (``google_search_result`` -> ``google_search``). Only these are
# read source by source: an application's own tool result whose type merely contains "search" (``product_search``,
# ``research``) is the application's data and stays one chunk, its JSON, as any tool result.
_RETRIEVAL_TYPES = frozenset({
    "web_search_tool_result", "web_fetch_tool_result",
    "file_search_call", "web_search_call",
    "google_search", "google_search_web", "google_search_image", "google_maps", "url_context", "file_search",
    "retrieval",
})  # fmt: skip
# Groq compound's executed search tools: read as retrieval only in the shape Groq records them (an ``output`` text
# or ``search_results``), since an application's own result may be typed ``search`` too.
_GROQ_SEARCH_TYPES = frozenset({"search", "browser_search"})
# The result types of Anthropic's server tools that name what the model got (the retrieval ones above aside).
_MCP_RESULT = "mcp_tool_result"
# A source's fields that tell a judge nothing: its kind and ids, a ranking score, an opaque blob. Any other scalar
# field a provider source carries beyond its text, title and URL (a page's age, a file's author) is kept, as a
# ``key: value`` line after its text, rather than silently dropped.
_NOISE_KEYS = frozenset({"type", "kind", "id", "file_id", "index", "score", "encrypted_content", "status"})
# Groq compound's search ``output``: its results as text, each ``Title: / URL: / Content: / Score:`` lines, a blank
# line between two. Split there, each block is one source; a block of another shape stays as it is.
_BLOCK_START = re.compile(r"\n\s*\n(?=Title: )")
_BLOCK = re.compile(
    r"Title: (?P<title>[^\n]*)\nURL: (?P<url>[^\n]*)\nContent: (?P<content>.*?)(?:\nScore: [-+.\deE]+)?\s*", re.S
)
# A file search result's metadata (OpenAI's vector store file ``attributes``: strings, numbers, flags): each value a
# ``key: value`` line of the chunk, after the text, so a judge sees a claim's date or author the file was filed with.
_ATTRIBUTES = "attributes"
_MAX_DEPTH = 8  # a result nests its sources a few levels down at most; a deeper value is not walked


def source_chunk(entry: dict[str, Any]) -> str | None:
    """One source (an object with a text and maybe a title and URL) as a chunk; None when it has no text.

    The chunk is ``title - url`` on a first line when it has either, then its text, then a ``key: value`` line for
    each other field that says something (see ``_NOISE_KEYS``) and for each of its ``attributes``.
    """
    text_key = next((k for k in _TEXT_KEYS if isinstance(v := entry.get(k), str) and v.strip()), None)
    if text_key is None:
        return None
    title_key = next((k for k in _TITLE_KEYS if isinstance(v := entry.get(k), str) and v), None)
    url_key = next((k for k in _URL_KEYS if isinstance(v := entry.get(k), str) and v), None)
    header = " - ".join(entry[k] for k in (title_key, url_key) if k is not None)
    used = {text_key, title_key, url_key}
    extras = [
        f"{key}: {value}"
        for key, value in entry.items()
        if key not in used and key not in _NOISE_KEYS and key not in _NOT_SOURCES and _informative(value)
    ]
    attributes = entry.get(_ATTRIBUTES)
    if isinstance(attributes, dict):  # a file's metadata (OpenAI file search): one line per value, as the fields
        extras.extend(f"{key}: {_scalar(value)}" for key, value in attributes.items() if _attribute(value))
    body = "\n".join([entry[text_key].strip(), *extras])
    return f"{header}\n{body}" if header else body


def _attribute(value: Any) -> bool:
    """Whether a file attribute says something: a text, a number or a flag (set by whoever filed the file)."""
    return isinstance(value, bool) or _informative(value)


def _scalar(value: Any) -> str:
    """An attribute's value as written in JSON: ``true`` / ``false`` for a flag, else its text."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _informative(value: Any) -> bool:
    """Whether a source's extra field says something: a non-empty text or a number (a flag is not)."""
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int | float) and not isinstance(value, bool)


def sources_in(value: Any, out: list[str], depth: int = 0) -> None:
    """Append to ``out`` the chunk of every source found in ``value`` (a result object or list), in order."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        chunk = source_chunk(value)
        if chunk is not None:
            out.append(chunk)
            return
        for key, item in value.items():
            if key not in _NOT_SOURCES and isinstance(item, dict | list):
                sources_in(item, out, depth + 1)
    elif isinstance(value, list):
        for item in value:
            sources_in(item, out, depth + 1)


def is_retrieval(result: dict[str, Any]) -> bool:
    """Whether a tool result is one a provider's own retrieval tool recorded (see ``_RETRIEVAL_TYPES``)."""
    kind = result.get("type")
    if not isinstance(kind, str):
        return False
    kind = kind.lower()
    if kind in _RETRIEVAL_TYPES:
        return True
    output = result.get("output")
    found = isinstance(output, str) or isinstance(result.get("search_results"), dict | list)
    return kind in _GROQ_SEARCH_TYPES and found


def retrieval_result_chunks(result: dict[str, Any]) -> list[str]:
    """The chunks of a retrieval server tool's result: each source with text, or the ``output`` text it was given.

    Groq compound records a search's ``output`` (the results as the model read them) when it has one, else its
    ``search_results``; the others hold their results as a list of sources under ``response`` or a key of their own.
    """
    output = result.get("output")
    if isinstance(output, str) and output.strip():
        return output_chunks(output)
    out: list[str] = []
    sources_in(result, out)  # the result itself when it is one source (a web fetch's page), else what it holds
    return out


def server_result_chunks(content: Any) -> list[str] | None:
    """The chunks of a provider tool's result that needs reading; None for any other, which is one chunk, its text.

    A provider's retrieval tool result (``is_retrieval``) gives each source with text as a chunk, and nothing when
    none has text (a search's encrypted results, a URL fetch's statuses: no text to judge against, where its JSON
    would have been one). An Anthropic MCP tool's result is its text alone, as the model read it; an MCP result
    that is an error (``is_error``) is no chunk: it is the tool's failure, not a source. A server tool result
    recorded as its type alone (``{"type": "mcp_tool_result"}``, what evaltrace kept of Anthropic's result blocks
    before) shows the judge nothing: no chunk. Any other result, code execution's output and every application
    tool's result included, is what the model was shown: None, one chunk.
    """
    if not isinstance(content, dict):
        return None
    if is_retrieval(content):
        return retrieval_result_chunks(content)
    kind = content.get("type")
    if not isinstance(kind, str) or not kind.endswith("_tool_result"):
        return None
    if kind == _MCP_RESULT and "content" in content:
        text = content["content"]
        if content.get("is_error") is True:
            return []
        return [text.strip()] if isinstance(text, str) and text.strip() else None
    if len(content) == 1:
        return []
    return None


def output_chunks(output: str) -> list[str]:
    """A search tool's text output as chunks: one per ``Title: / URL: / Content:`` block, else the whole text."""
    chunks: list[str] = []
    for block in _BLOCK_START.split(output.strip()):
        match = _BLOCK.fullmatch(block.strip())
        chunk = source_chunk(match.groupdict()) if match is not None else (block.strip() or None)
        if chunk is not None:
            chunks.append(chunk)
    return chunks


# A search result given to a model as an application tool's result (Anthropic's ``search_result`` content block, the
# part the instrumentations record one as): the keys it may hold. Any other key makes it the application's own data,
# one chunk as any tool result, so a result that merely has a ``type`` of that name is not read source by source.
_SEARCH_RESULT_KEYS = frozenset({"type", "source", "title", "content", "citations", "cache_control"})
_TEXT_BLOCK_KEYS = frozenset({"type", "text", "citations", "cache_control"})


def search_result_chunks(content: Any) -> list[str] | None:
    """A tool result of search results as chunks, one per source with text; None for a result of any other shape.

    The result is one ``search_result`` block, or a list of them only (as given, or as the JSON text the trace
    mapping keeps a list result as): each with a ``source`` and a ``title`` (strings) and its text as ``content``, a
    string (the instrumentations' part) or a list of ``text`` blocks (Anthropic's block, joined as the
    instrumentation joins them, so that one source read both ways is one chunk). Extra keys: only ``citations``
    and ``cache_control``. A chunk is ``title - source``, then the text (:func:`source_chunk`); a search result
    without text is no chunk (nothing to judge against).
    """
    if isinstance(content, str):
        if '"search_result"' not in content or not content.lstrip().startswith(("[", "{")):
            return None  # an application's text: no parse
        try:
            content = json.loads(content)
        except ValueError:
            return None
    blocks = [content] if isinstance(content, dict) else content
    if not isinstance(blocks, list) or not blocks:
        return None
    texts: list[tuple[dict[str, Any], str]] = []
    for block in blocks:
        text = _search_result_text(block)
        if text is None:
            return None
        texts.append((block, text))
    chunks = [source_chunk({"title": b["title"], "source": b["source"], "content": t}) for b, t in texts]
    return [chunk for chunk in chunks if chunk is not None]


def _search_result_text(block: Any) -> str | None:
    """The text of a ``search_result`` block of the allowed shape (maybe empty); None when it is not one."""
    if not isinstance(block, dict) or block.get("type") != "search_result" or not block.keys() <= _SEARCH_RESULT_KEYS:
        return None
    if not isinstance(block.get("source"), str) or not isinstance(block.get("title"), str):
        return None
    content = block.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for item in content:
        if not (isinstance(item, dict) and item.get("type") == "text" and item.keys() <= _TEXT_BLOCK_KEYS):
            return None
        if not isinstance(text := item.get("text"), str):
            return None
        texts.append(text)
    return "".join(texts)


def unique(chunks: Iterable[str]) -> list[str]:
    """``chunks`` without repeats, first occurrence kept (two steps grounded on one source give it once)."""
    return list(dict.fromkeys(chunks))
