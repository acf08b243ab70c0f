"""What a LangChain model run's start records: the request, the server, the conversation, the input messages.

Split from :mod:`evaltrace.instrumentation.langchain._handler` (the model run's start; its chunks and end are
:mod:`~evaltrace.instrumentation.langchain._streams` and :mod:`~evaltrace.instrumentation.langchain._results`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace.instrumentation.langchain import _codec
from evaltrace.instrumentation.langchain._results import json_value as _json
from evaltrace.instrumentation.langchain._runs import _name
from evaltrace.instrumentation.langchain._runs import conversation_attributes as _conversation
from evaltrace.instrumentation.langchain._serialized import constructor_stop, server_attributes


def model_request(
    metadata: Mapping[str, Any], kwargs: Mapping[str, Any], operation: str, batch: Sequence[Any], serialized: Any
) -> tuple[dict[str, AttributeValue], str]:
    """The attributes a model call's span starts with, and the model its name says.

    Args:
        metadata: The run's metadata (``ls_provider``, ``ls_model_name``..., a LangGraph thread).
        kwargs: The start callback's other arguments (``invocation_params``, ``name``).
        operation: ``chat`` or ``text_completion``.
        batch: The messages (or the prompt as one user message) of the call's first input.
        serialized: The model as LangChain serialized it (its constructor arguments).
    """
    params = kwargs.get("invocation_params")
    params = params if isinstance(params, Mapping) else {}
    attributes: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: operation}
    attributes.update(_codec.request_attributes(metadata, params))
    if sc.GEN_AI_REQUEST_STOP_SEQUENCES not in attributes:  # a call's own stop wins, as the integrations send
        stop = constructor_stop(serialized)
        if stop:
            attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = stop
    attributes.update(server_attributes(serialized, metadata.get("ls_provider")))
    attributes.update(_conversation(metadata))
    requested = attributes.get(sc.GEN_AI_REQUEST_MODEL)
    model = requested if isinstance(requested, str) and requested else _name(kwargs, None, "model")
    if settings.current.capture_content:
        system, batch = _codec.split_system(batch, metadata.get("ls_provider"), metadata.get("ls_model_name"))
        if system:
            attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = _json(system)
        attributes[sc.GEN_AI_INPUT_MESSAGES] = _json(_codec.messages(batch))
        tools = _codec.tools_of(params)
        if tools:
            attributes[sc.GEN_AI_TOOL_DEFINITIONS] = _json(tools)
    return attributes, model
