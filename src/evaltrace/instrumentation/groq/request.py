"""Pure: the keyword arguments of a Groq ``chat.completions.create`` / ``embeddings.create`` -> request attributes.

The OpenAI request readers make them; what Groq adds is read here: an assistant message's ``reasoning`` (a
previous turn's, sent back) and a ``document`` content part, the request's ``documents`` (``grounding``),
``reasoning_format`` and ``citation_options``.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.stainless import Stainless
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import build
from evaltrace._internal.openai import request as openai_request
from evaltrace._internal.openai.parts import Message, document_part, field, reasoning_part
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace.instrumentation.groq.grounding import documents_message

# The groq SDK's streams, raw responses, request sentinels and base URL, as for every Stainless SDK.
STAINLESS = Stainless("groq")
Attributes = dict[str, Any]


def request_attributes(kwargs: dict[str, Any], capture: bool, max_len: int, operation: str = sc.OP_CHAT) -> Attributes:
    """Request parameters, and the request content when ``capture`` (the OpenAI request's, plus Groq's)."""
    params = STAINLESS.given_kwargs(kwargs)
    if operation == sc.OP_EMBEDDINGS:
        return build.request_attributes(EndpointKind.EMBEDDINGS, params, capture, max_len)
    messages = params.get("messages") if capture else None
    given = documents_message(params.get("documents")) if capture else None
    if isinstance(messages, list | tuple) and (given is not None or any(_has_groq_fields(m) for m in messages)):
        # What the OpenAI chat reader does not know is in the messages (or beside them, the documents): they are
        # converted once, here, and the OpenAI build reads the rest of the request (its input attributes of no
        # messages are replaced).
        rest = {key: value for key, value in params.items() if key != "messages"}
        attrs = build.request_attributes(EndpointKind.CHAT, rest, capture, max_len)
        attrs.pop(sc.INPUT_VALUE, None)  # none of no messages; popped all the same, as the value is this one's
        attrs.pop(sc.INPUT_MIME_TYPE, None)
        attrs.update(_groq_input_attributes(messages, max_len, given))
    else:
        attrs = build.request_attributes(EndpointKind.CHAT, params, capture, max_len)
    fmt = params.get("reasoning_format")
    if isinstance(fmt, str):
        attrs[sc.GROQ_REQUEST_REASONING_FORMAT] = fmt
    citing = params.get("citation_options")
    if isinstance(citing, str):
        attrs[sc.GROQ_REQUEST_CITATION_OPTIONS] = citing
    return attrs


def _given_reasoning(message: Any) -> str | None:
    """The ``reasoning`` an assistant message of the request carries (Groq's own message field), if any."""
    if field(message, "role") != "assistant":
        return None
    reasoning = field(message, "reasoning")
    return reasoning if isinstance(reasoning, str) and reasoning else None


def _is_document(part: Any) -> bool:
    return bool(field(part, "type") == "document")


def _has_groq_fields(message: Any) -> bool:
    """Whether a request message has what the OpenAI chat reader does not know: ``reasoning``, a ``document``.

    Every message of every captured call is asked: a plain one (a dict of no ``reasoning`` whose content is text or
    none) is answered by two lookups, without ``field``'s calls (50 messages cost the build +46% before).
    """
    if type(message) is dict and "reasoning" not in message:
        content = message.get("content")
        if content is None or type(content) is str:
            return False
    if _given_reasoning(message) is not None:
        return True
    content = field(message, "content")
    return isinstance(content, list | tuple) and any(_is_document(part) for part in content)


_SYSTEM_ROLES = frozenset({"system", "developer"})


def _groq_input_attributes(messages: Any, max_len: int, documents: Message | None = None) -> Attributes:
    """The input attributes again, with what groq's message params add to OpenAI's.

    groq's ``ChatCompletionAssistantMessageParam`` declares ``reasoning`` (a previous turn's, sent back): a
    ``reasoning`` part before the answer; its user content parts include ``document``: a text part of the data.
    The OpenAI chat reader knows neither; a request that sends one has its messages converted here instead.
    ``documents``: the request's ``documents`` as a message (``grounding.documents_message``), put first.
    """
    converted = openai_request.input_messages(EndpointKind.CHAT, {"messages": messages})
    for message, source in zip(converted, messages, strict=False):
        content = field(source, "content")
        if isinstance(content, list | tuple):  # the OpenAI reader made one part per content part, in order
            parts = message["parts"]
            for index, part in enumerate(content):
                # A tool message's content is its one ``tool_call_response`` part: only a document's own
                # (``{"type": "document"}``, the reader's part of an unknown type) is replaced.
                if _is_document(part) and index < len(parts) and parts[index] == {"type": "document"}:
                    parts[index] = document_part(part)
        reasoning = _given_reasoning(source)
        if reasoning is not None:
            message["parts"].insert(0, reasoning_part(reasoning))
    if documents is not None:  # after the system messages: the caller's context, before the conversation
        first = next((n for n, m in enumerate(converted) if m.get("role") not in _SYSTEM_ROLES), len(converted))
        converted.insert(first, documents)
    text = capped_json(converted, max_len)
    attrs: Attributes = {sc.GEN_AI_INPUT_MESSAGES: text}
    attrs.update(list_values.input_attributes(converted, text, None, None, max_len))
    return attrs
