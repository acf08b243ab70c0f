"""Pure: the span attributes of one call, built from its request kwargs and its response.

``LLMCall`` runs them once the call has returned (a stream's response part when it ends) and sets their output
in one write (``deferred_attributes.set_built``). They read only their arguments and never write them.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.build import Attributes
from evaltrace._internal.engine.build import chunk_times as chunk_times
from evaltrace._internal.engine.build import outcome_attributes_of as outcome_attributes_of
from evaltrace._internal.engine.build import response_attributes as response_attributes
from evaltrace._internal.engine.build import result_attributes as result_attributes
from evaltrace._internal.engine.build import stream_attributes as stream_attributes
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import registry
from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.encode import joined_messages, scalars_json
from evaltrace._internal.openai.registry import EndpointKind

# Fixed per endpoint kind: ``LLMCall`` sets them at span start with the shape's preset (built once per shape).
KIND_ATTRS: dict[EndpointKind, Attributes] = {
    EndpointKind.CHAT: {
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_CHAT_COMPLETIONS,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.RESPONSES: {
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_RESPONSES,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.EMBEDDINGS: {sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING},
}


_MODEL_AND_MESSAGES = frozenset(("model", "messages"))


def request_attributes(kind: EndpointKind, kwargs: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """Request parameters, and the request content when ``capture``, of one call (``KIND_ATTRS`` excepted)."""
    params = registry.given_kwargs(kwargs)
    # A chat call of a model and messages only (the commonest call) has no parameter, instruction or tool to read.
    bare = kind is EndpointKind.CHAT and _MODEL_AND_MESSAGES.issuperset(params)
    attrs: Attributes = {}
    if not bare:
        attrs = req.request_attributes(kind, params)
        parameters = req.model_parameters(kind, params)
        if parameters:
            attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = scalars_json(parameters, max_len)
    if capture and kind is EndpointKind.EMBEDDINGS:
        _add_embedding_inputs(attrs, params, max_len)
    elif capture:
        given = params.get("messages")
        plain = req.plain_chat_history(given) if kind is EndpointKind.CHAT and type(given) is list else None
        if plain is not None:  # the common request: converted, measured and written out in one loop
            messages, size, pieces = plain
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = joined_messages(pieces, messages, size, max_len)
        else:
            messages = req.input_messages(kind, params)
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
        # A chat request keeps its system messages among the messages; Responses ``instructions`` come apart.
        instructions = None if bare else req.system_instructions(params)
        instructions_json = capped_json(instructions, max_len) if instructions else None
        if instructions_json is not None:
            attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions_json
        if plain is not None and not instructions and len(messages) == 1 and messages[0]["role"] == "user":
            # One plain user turn (the commonest request): its text is the input value, as ``input_attributes``
            # decides for it, without reading the converted message back.
            content = messages[0]["parts"][0]["content"]
            if list_values.is_bare_text(content, max_len):
                attrs[sc.INPUT_VALUE] = content  # text_attributes' answer for it, without its calls and dict
            elif list_values.is_plain(content):
                attrs.update(list_values.text_attributes(sc.INPUT_VALUE, sc.INPUT_MIME_TYPE, content or None, max_len))
            else:
                attrs.update(list_values.input_attributes(messages, text, None, None, max_len))
        else:
            attrs.update(list_values.input_attributes(messages, text, instructions, instructions_json, max_len))
        if bare:
            return attrs
        tools = req.tool_definitions(params)
        if tools:
            attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs


def _add_embedding_inputs(attrs: Attributes, params: dict[str, Any], max_len: int) -> None:
    """The embedded texts as ``input.value`` (JSON), which Langfuse and Phoenix show as the span's input.

    GenAI semconv has no embeddings input attribute; OpenInference's embedding spans put the raw input in
    ``input.value``. Its per-text ``embedding.embeddings.N.embedding.text`` is not written: one attribute per
    input would be uncapped in number and could push other attributes out of the SDK's attribute limit.
    """
    inputs = req.embedding_inputs(params)
    if inputs is not None:
        attrs[sc.INPUT_VALUE] = capped_json(inputs, max_len)
        attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
