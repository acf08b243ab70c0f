"""Pure: an Anthropic text block's ``citations`` -> its text part's ``citations``.

A text block of an answer grounded on documents, search results or a web search lists what each of its sentences
cites: a document's characters (``char_location``), pages (``page_location``) or content blocks
(``content_block_location``), a ``search_result_location`` or a ``web_search_result_location``, each with the
``cited_text`` it quotes. They are the text part's ``citations``, as the Google, Groq and OpenAI instrumentations
record cited sources: ``type``, ``cited_text``, ``source`` (a web result's URL, a search result's source), ``title``
(the result's or the document's title), then the location given, under Anthropic's own names
(``document_index``, ``start_char_index`` / ``end_char_index``, ``start_page_number`` / ``end_page_number``,
``start_block_index`` / ``end_block_index``, ``search_result_index``) and a document's ``file_id``. These indices
point into the cited source, not into the answer, so they keep their names rather than ``start_index`` /
``end_index`` (the answer's offsets elsewhere). A web result's ``encrypted_index`` is opaque: never recorded.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.openai.parts import Part, field, text_part

# A citation's fields -> the recorded keys, in order (``source`` and ``title`` from the first given).
_KEYS = (("type", "type"), ("cited_text", "cited_text"), ("url", "source"), ("source", "source"),
         ("title", "title"), ("document_title", "title"), ("document_index", "document_index"),
         ("start_char_index", "start_char_index"), ("end_char_index", "end_char_index"),
         ("start_page_number", "start_page_number"), ("end_page_number", "end_page_number"),
         ("search_result_index", "search_result_index"), ("start_block_index", "start_block_index"),
         ("end_block_index", "end_block_index"), ("file_id", "file_id"))  # fmt: skip


def cited(citation: Any) -> dict[str, Any]:
    """One citation (an SDK model or dict) -> the keys it gives (see the module docstring)."""
    out: dict[str, Any] = {}
    for name, key in _KEYS:
        value = field(citation, name)
        if value is not None and key not in out:
            out[key] = value
    return out


def cited_text_part(text: str, citations: Any) -> Part:
    """A text part of ``text`` with the ``citations`` given (a text without any is a plain text part)."""
    part = text_part(text)
    if citations:
        kept = [entry for entry in map(cited, citations) if entry]
        if kept:
            part["citations"] = kept
    return part
