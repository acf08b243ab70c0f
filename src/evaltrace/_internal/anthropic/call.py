"""One traced Anthropic call: OpenAI's ``LLMCall`` with Anthropic's span shape and request builder.

Everything after the request (response attributes, usage, cost, metrics, errors, ending the span exactly once)
is provider-independent and inherited. The request attributes are built, as for OpenAI, once the call returned.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, NamedTuple

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Tracer

from evaltrace._internal import deferred_attributes, list_values, settings
from evaltrace._internal import semconv as sc
from evaltrace._internal.anthropic import registry
from evaltrace._internal.anthropic import request as req
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.call import LLMCall
from evaltrace._internal.openai.metrics import Instruments, MetricAttributes
from evaltrace._internal.openai.registry import EndpointKind

PROVIDER = "anthropic"


def request_attributes(kwargs: dict[str, Any], capture: bool, max_len: int) -> dict[str, Any]:
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


class _Shape(NamedTuple):
    span_name: str
    metric_attrs: MetricAttributes
    start_attrs: deferred_attributes.Preset


_SHAPES: dict[tuple[str | None, str | None, int | None], _Shape] = {}


def _shape_of(model: str | None, host: str | None, port: int | None) -> _Shape:
    key = (model, host, port)
    shape = _SHAPES.get(key)
    if shape is not None:
        return shape
    metric: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT, sc.GEN_AI_PROVIDER_NAME: PROVIDER}
    if model:
        metric[sc.GEN_AI_REQUEST_MODEL] = model
    if host:
        metric[sc.SERVER_ADDRESS] = host
    if port:
        metric[sc.SERVER_PORT] = port
    start = deferred_attributes.Preset({**metric, sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM})
    shape = _Shape(f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT, MetricAttributes(metric), start)
    if len(_SHAPES) >= 1024:  # bounded: model names and hosts come from user code, usually a handful
        _SHAPES.clear()
    _SHAPES[key] = shape
    return shape


class AnthropicCall(LLMCall):
    """The span of one ``messages.create`` / ``messages.stream`` call (``chat {model}``, provider ``anthropic``)."""

    __slots__ = ()

    def __init__(
        self,
        tracer: Tracer,
        params: dict[str, Any],
        server: tuple[str | None, int | None],
        instruments: Instruments | None,
        context: Context | None = None,
    ) -> None:
        """Start the span with the attributes the GenAI spec requires at creation (``LLMCall.__init__``'s twin)."""
        current = settings.current
        self.capture = current.capture_content
        self.max_len = current.max_attribute_length
        self.instruments = instruments
        self.ended = False
        self.kind = EndpointKind.CHAT
        model = params.get("model")
        self.model = model = model if isinstance(model, str) else None
        shape = _shape_of(model, *server)
        self.provider = PROVIDER
        self.metric_attrs = shape.metric_attrs
        self.start = time.perf_counter()
        span = deferred_attributes.start_span(tracer, shape.span_name, SpanKind.CLIENT, shape.start_attrs, context)
        self.span = span
        self.recording = recording = span.is_recording()
        self.params: dict[str, Any] | None = params if recording else None

    def _request_builder(self, params: dict[str, Any]) -> deferred_attributes.Builder:
        capture = self.capture
        return partial(request_attributes, params, capture, self.max_len)
