"""Pure: Groq's grounded answers: the request's ``documents`` as input, a message's ``annotations`` as citations.

A chat completion may be given ``documents`` (``[{"source": {"type": "text", "text": ...} | {"type": "json",
"data": {...}}, "id"?: ...}]``) beside its messages, for the model to ground its answer on, and ``citation_options``
(``enabled`` / ``disabled``) to have it cite them. The documents are the model's input like its messages: they are
recorded as one ``user`` message before the conversation, each document a text part of its contents (text as it
is, JSON data as JSON text) marked a document, the part a ``document`` content part of a message becomes (Cohere's
and groq's ``document`` parts, ``parts.document_part``): the trace mapping makes them the RAG evaluators' context. A ``user`` message, not a ``system`` one: they are data the caller
supplied, not instructions; after the system messages and before the rest, so the conversation's last user turn
is still its question.

The answer's ``annotations`` (``document_citation``: the id of a document; ``function_citation``: the id of a
tool call) become the answer's text part's ``citations``, in the keys the Google instrumentation records cited
sources in: ``type``, ``source`` (the cited document's or tool call's id), ``start_index``, ``end_index``
(character offsets into the message content).
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.openai.parts import Message, Part, data_text, document_text_part, field

_SOURCES = {"document_citation": "document_id", "function_citation": "tool_call_id"}
"""An annotation type -> the key of its object that names what it cites."""


def request_document_part(document: Any) -> Part | None:
    """A request document (``{"source": {...}, "id"?}``) -> a document text part of its contents (None: none).

    A ``text`` source whose ``text`` is no string, or another source without ``data``, gives no part (not a
    ``"null"`` text). The part is marked a document (``parts.DOCUMENT_KEY``: the RAG evaluators' context), and
    the document's ``id`` is kept as the part's ``id`` (an extra key, as ``citations`` is: the text part has no
    field for it), so that the citations naming it can be matched to the document they cite.
    """
    source = field(document, "source")
    text = field(source, "text")
    if not isinstance(text, str):
        data = field(source, "data")
        if field(source, "type") == "text" or data is None:
            return None
        text = data_text(data)
    return document_text_part(text, field(document, "id"))


def documents_message(documents: Any) -> Message | None:
    """The request's ``documents`` as one ``user`` message of text parts (None: no documents).

    Only a list or tuple is read: any other iterable (a generator...) is not recorded, as reading it would
    consume it before the SDK sends it.
    """
    if not isinstance(documents, list | tuple):
        return None
    parts = [part for part in map(request_document_part, documents) if part is not None]
    return {"role": "user", "parts": parts} if parts else None


def citations_of(annotations: Any) -> list[dict[str, Any]]:
    """A message's ``annotations`` -> ``{type, source, start_index, end_index}`` (the keys given).

    An annotation of another type keeps its type and whatever offsets its object of that name gives.
    """
    out: list[dict[str, Any]] = []
    for annotation in annotations or ():
        kind = field(annotation, "type")
        if not isinstance(kind, str):
            continue
        cited = field(annotation, kind)
        given = {
            "source": field(cited, _SOURCES.get(kind, "id")),
            "start_index": field(cited, "start_index"),
            "end_index": field(cited, "end_index"),
        }
        out.append({"type": kind, **{key: value for key, value in given.items() if value is not None}})
    return out


def add_citations(parts: list[Part], annotations: Any) -> None:
    """Put the annotations' citations on the answer's (last) text part; none without a text part to cite into."""
    cited = citations_of(annotations)
    if not cited:
        return
    for part in reversed(parts):
        if part.get("type") == "text":
            part["citations"] = cited
            return
