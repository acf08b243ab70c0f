"""The request half of an Anthropic span: ``messages.create`` / ``stream`` / ``parse`` keywords -> attributes.

Everything else (response attributes, usage, cost, metrics, errors, ending the span exactly once) is the
engine's; the codec (``evaltrace.instrumentation.anthropic.codec``) plugs this builder in.
"""

from __future__ import annotations

import time  # noqa: F401  # tests patch ``call.time`` here; the clock read is engine.call's
from collections.abc import Hashable
from typing import Any

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic import registry
from evaltrace._internal.anthropic import request as req
from evaltrace._internal.jsonutil import capped_json


def request_attributes(kind: Hashable, kwargs: dict[str, Any], capture: bool, max_len: int) -> dict[str, Any]:
    """Request parameters, and the request content when ``capture``, of one ``messages.create`` call."""
    params = registry.given_kwargs(kwargs)
    extra = params.get("extra_body")
    if isinstance(extra, dict):
        # Sampling parameters the newest SDKs no longer name (temperature, top_p, top_k) go in ``extra_body``;
        # they are sent in the body all the same. A named keyword wins, as in the SDK's request.
        params = {**extra, **params}
    attrs = req.request_attributes(params)
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = sc.LANGFUSE_TYPE_GENERATION
    parameters = req.model_parameters(params)
    if parameters:
        attrs[sc.LANGFUSE_OBSERVATION_MODEL_PARAMETERS] = capped_json(parameters, max_len)
    if capture:
        messages = req.input_messages(params)
        text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(messages, max_len)
        instructions = req.system_instructions(params)
        instructions_json = capped_json(instructions, max_len) if instructions else None
        if instructions_json is not None:
            attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = instructions_json
        attrs.update(list_values.input_attributes(messages, text, instructions, instructions_json, max_len))
        tools = req.tool_definitions(params)
        if tools:
            attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, max_len)
    return attrs
