"""Pure: Cohere v2 ``embed`` and ``rerank`` calls -> request attributes, and their responses -> ``Outcome``.

``embed`` is the GenAI ``embeddings`` operation. ``rerank`` has no GenAI operation: it is ``rerank`` (Cohere's own
name, kept as ``gen_ai.operation.name``) on a ``task`` span. It is not an LLM step (it answers nothing), and its
documents are not written as ``gen_ai.retrieval.documents``: they are the documents a retriever found already, and
the RAG evaluators would read them twice. Its ranking (``index`` and ``relevance_score`` of each result, best
first) is the span's ``output.value``; the query and the documents are its ``input.value``, with content capture.

Usage is ``meta``, an ``ApiMeta``: the billed units when they count tokens, else the model's ``tokens``
(``usage_of``), the rest as ``cohere.usage.*`` (``usage_attributes``). A rerank is billed in ``search_units``.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.parts import field, uri_part

Attributes = dict[str, Any]

# Langfuse's model parameters of each call: what the caller set, under Cohere's names.
_EMBED_PARAMETERS = ("input_type", "truncate", "max_tokens", "output_dimension", "priority")
_RERANK_PARAMETERS = ("top_n", "max_tokens_per_doc", "priority")
# The embedding types whose vectors hold one number per dimension (binary ones pack 8 dimensions in a byte).
_UNPACKED = ("float_", "int8", "uint8")


def _parameters(params: dict[str, Any], keys: tuple[str, ...], max_len: int) -> Attributes:
    given = {key: value for key in keys if isinstance(value := params.get(key), str | int | float)}
    return {sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS: capped_json(given, max_len)} if given else {}


def embed_request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``embed(model, input_type, texts | images | inputs, ...)``: parameters, and the inputs with ``capture``."""
    attrs: Attributes = {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING}
    dimension = params.get("output_dimension")
    if isinstance(dimension, int) and not isinstance(dimension, bool):
        attrs[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimension
    types = params.get("embedding_types")
    if isinstance(types, list | tuple) and types:
        attrs[sc.GEN_AI_REQUEST_ENCODING_FORMATS] = [str(t) for t in types]
    attrs.update(_parameters(params, _EMBED_PARAMETERS, max_len))
    if capture:
        inputs = embed_inputs(params)
        if inputs:
            attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
    return attrs


def embed_inputs(params: dict[str, Any]) -> list[Any]:
    """What was embedded, one entry per input: a text as is, an image as its URI without the payload.

    An ``inputs`` entry (text and images mixed) is the list of its content items, each a text or an image URI.
    """
    out: list[Any] = [text for text in params.get("texts") or () if isinstance(text, str)]
    out.extend(_image(image) for image in params.get("images") or ())
    for item in params.get("inputs") or ():
        out.append([_content(c) for c in field(item, "content") or ()])
    return out


def _image(url: Any) -> str:
    return str(uri_part(str(url), "image")["uri"])


def _content(item: Any) -> Any:
    if field(item, "type") == "image_url":
        return _image(field(field(item, "image_url"), "url") or "")
    return field(item, "text")


def embed_outcome(response: Any, usage: Any) -> Outcome:
    """``EmbedByTypeResponse`` -> Outcome: id, usage (``usage``: ``usage_of(meta)``), the dimensions returned."""
    attributes: Attributes = {}
    embeddings = field(response, "embeddings")
    for name in _UNPACKED:
        vectors = field(embeddings, name)
        if vectors and isinstance(vectors[0], list | tuple):
            attributes[sc.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = len(vectors[0])
            break
    return Outcome(response_id=field(response, "id"), usage=usage, attributes=attributes or None)


def rerank_request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """``rerank(model, query, documents, top_n, ...)``: parameters, and the query and documents with ``capture``."""
    attrs = _parameters(params, _RERANK_PARAMETERS, max_len)
    if capture:
        documents = [d if isinstance(d, str) else field(d, "text") for d in params.get("documents") or ()]
        attrs[sc.INPUT_VALUE] = capped_json({"query": params.get("query"), "documents": documents}, max_len)
        attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
    return attrs


def rerank_outcome(response: Any, usage: Any, capture: bool, max_len: int) -> Outcome:
    """``V2RerankResponse`` -> Outcome: id, usage, and with ``capture`` the ranking as ``output.value``."""
    attributes: Attributes | None = None
    if capture:
        ranking = [
            {"index": field(r, "index"), "relevance_score": field(r, "relevance_score")}
            for r in field(response, "results") or ()
        ]
        attributes = {sc.OUTPUT_VALUE: capped_json(ranking, max_len), sc.OUTPUT_MIME_TYPE: sc.MIME_JSON}
    return Outcome(response_id=field(response, "id"), usage=usage, attributes=attributes)
