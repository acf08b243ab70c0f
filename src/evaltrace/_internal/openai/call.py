"""One traced OpenAI call: start the span with every sampling-relevant attribute, end it exactly once.

``LLMCall`` is the shell around the pure request/response functions: it owns the span, the clock and the
metric attributes. The wrappers create it; the stream proxies finish it.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from evaltrace import pricing
from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.metrics import Instruments
from evaltrace._internal.openai.provider import provider_for_host
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import Outcome, outcome_attributes, usage_details

_KIND_ATTRS = {
    EndpointKind.CHAT: {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_CHAT_COMPLETIONS,
        sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.RESPONSES: {
        sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
        sc.OPENAI_API_TYPE: sc.OPENAI_API_TYPE_RESPONSES,
        sc.EVALTRACE_SPAN_KIND: sc.KIND_LLM,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_GENERATION,
    },
    EndpointKind.EMBEDDINGS: {
        sc.GEN_AI_OPERATION_NAME: sc.OP_EMBEDDINGS,
        sc.EVALTRACE_SPAN_KIND: sc.KIND_EMBEDDING,
        sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EMBEDDING,
    },
}


class LLMCall:
    """The span of one call and what is needed to finish it."""

    __slots__ = (
        "capture",
        "ended",
        "instruments",
        "kind",
        "max_len",
        "metric_attrs",
        "model",
        "provider",
        "span",
        "start",
    )

    def __init__(
        self,
        tracer: Tracer,
        kind: EndpointKind,
        params: dict[str, Any],
        server: tuple[str | None, int | None],
        instruments: Instruments | None,
    ) -> None:
        current = settings.get()
        self.capture = current.capture_content
        self.max_len = current.max_attribute_length
        self.kind = kind
        self.instruments = instruments
        self.ended = False
        model = params.get("model")
        self.model: str | None = model if isinstance(model, str) else None
        host, port = server
        attrs: dict[str, Any] = dict(_KIND_ATTRS[kind])
        self.provider = attrs[sc.GEN_AI_PROVIDER_NAME] = provider_for_host(host)
        if self.model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = self.model
        if host:
            attrs[sc.SERVER_ADDRESS] = host
        if port:
            attrs[sc.SERVER_PORT] = port
        self.metric_attrs = {k: attrs[k] for k in _METRIC_KEYS if k in attrs}
        attrs.update(req.request_attributes(kind, params))
        if self.capture and kind is not EndpointKind.EMBEDDINGS:
            self._content_attributes(params, attrs)
        op = attrs[sc.GEN_AI_OPERATION_NAME]
        name = f"{op} {self.model}" if self.model else op
        self.start = time.perf_counter()
        self.span: Span = tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)

    def _content_attributes(self, params: dict[str, Any], attrs: dict[str, Any]) -> None:
        attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(req.input_messages(self.kind, params), self.max_len)
        instructions = req.system_instructions(params)
        if instructions:
            attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = capped_json(instructions, self.max_len)
        tools = req.tool_definitions(params)
        if tools:
            attrs[sc.GEN_AI_TOOL_DEFINITIONS] = capped_json(tools, self.max_len)

    def finish(self, outcome: Outcome, extra: dict[str, Any] | None = None) -> None:
        """Write the response attributes, cost and metrics, then end the span."""
        attrs = outcome_attributes(outcome)
        if self.capture and outcome.output_messages is not None:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = capped_json(outcome.output_messages, self.max_len)
        usage = outcome.usage
        if usage is not None:
            attrs[sc.LANGFUSE_OBSERVATION_USAGE_DETAILS] = capped_json(usage_details(usage), self.max_len)
            cost = pricing.cost_of(
                outcome.response_model or self.model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                provider=self.provider,
            )
            if cost is not None:
                attrs[sc.EVALTRACE_COST_USD] = cost.total_usd
                attrs[sc.EVALTRACE_COST_THINKING_USD] = cost.reasoning_usd
                attrs[sc.LANGFUSE_OBSERVATION_COST_DETAILS] = capped_json(cost.details(), self.max_len)
        if extra:
            attrs.update(extra)
        self.span.set_attributes(attrs)
        self._end(outcome, None)

    def fail(self, error: BaseException, extra: dict[str, Any] | None = None) -> None:
        """Mark the span failed (status, error.type, exception event), then end it."""
        error_type = error_type_of(error)
        span = self.span
        attrs: dict[str, Any] = {sc.ERROR_TYPE: error_type}
        status = getattr(error, "status_code", None)
        if isinstance(status, int):
            attrs[sc.HTTP_RESPONSE_STATUS_CODE] = status
        if extra:
            attrs.update(extra)
        span.set_attributes(attrs)
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self._end(None, error_type)

    def fail_with_outcome(self, error: BaseException, outcome: Outcome, extra: dict[str, Any]) -> None:
        """A stream that broke mid-way: keep what arrived, then fail."""
        attrs = outcome_attributes(outcome)
        if self.capture and outcome.output_messages is not None:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = capped_json(outcome.output_messages, self.max_len)
        self.span.set_attributes(attrs)
        self.fail(error, extra)

    def abandon(self) -> None:
        """End the span as it is, if nothing ended it (our own code failed half-way)."""
        if not self.ended:
            self._end(None, None)

    def _end(self, outcome: Outcome | None, error_type: str | None) -> None:
        self.ended = True
        elapsed = time.perf_counter() - self.start
        self.span.end()
        if self.instruments is not None:
            self.instruments.record_call(self.metric_attrs, elapsed, outcome, error_type)


_METRIC_KEYS = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.SERVER_ADDRESS,
    sc.SERVER_PORT,
)


def error_type_of(error: BaseException) -> str:
    """``error.type``: the provider's error code when the API sent one, else the exception class qualname."""
    code = getattr(error, "code", None)
    if isinstance(code, str) and code:
        return code
    return type(error).__qualname__
