"""Pure: a ``litellm.responses`` / ``aresponses`` call (LiteLLM's Responses API) -> attributes and ``Outcome``.

LiteLLM's ``ResponsesAPIResponse`` and its stream events (``ResponsesAPIStreamingResponse`` subclasses) are its own
pydantic models of OpenAI's Responses shape, field for field (``output`` items, ``usage.input_tokens``, ``status``,
``response.output_text.delta`` events...), whatever the provider behind the model (LiteLLM bridges a chat-only
provider's answer into that shape). So the OpenAI instrumentation's Responses readers read them: the request
(``input``, ``instructions``, ``tools``, ``reasoning``, ``max_output_tokens``...), the response, a body whose
``status`` is ``failed``, and the stream (``ResponsesAccumulator``).
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.openai import build
from evaltrace._internal.openai.accumulate import ResponsesAccumulator
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import responses_failure as failure
from evaltrace._internal.openai.response import responses_outcome as outcome
from evaltrace._internal.openai.response import responses_summary as summary

__all__ = ["ResponsesAccumulator", "failure", "is_stream", "outcome", "request_attributes", "summary"]

Attributes = dict[str, Any]

_STREAM_BASE = "BaseResponsesAPIStreamingIterator"  # every one of LiteLLM's Responses stream classes derives from it


def request_attributes(params: dict[str, Any], capture: bool, max_len: int) -> Attributes:
    """The Responses request read as the OpenAI Responses span reads it."""
    attrs = build.request_attributes(EndpointKind.RESPONSES, params, capture, max_len)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_GENERATION
    return attrs


def is_stream(result: Any) -> bool:
    """Whether ``result`` is one of LiteLLM's Responses streams (sync, async, cached, mocked)."""
    return any(cls.__name__ == _STREAM_BASE for cls in type(result).__mro__)
