"""One traced OpenAI call: start the span with the attributes required at creation, end it exactly once.

``LLMCall`` is the shell around the pure builders (``build``): it owns the span, the clock and the metric
attributes, and sets what the builders make. The wrappers create it; the stream proxies
finish it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from evaltrace._internal import deferred_attributes, settings
from evaltrace._internal import semconv as sc
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.openai import build
from evaltrace._internal.openai.metrics import Instruments, MetricAttributes
from evaltrace._internal.openai.provider import provider_for_host
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import Outcome, Summary

SummaryFn = Callable[[], Summary]

# Set at span creation with the provider, request model and server (what the GenAI spec lists as relevant to
# sampling): the operation and our span kind, which on_start processors route on, and the attributes fixed per
# endpoint kind (``build.KIND_ATTRS``), so no call builds them. The rest is built once the call returns.
_CHAT = (sc.OP_CHAT, sc.KIND_LLM)
_EMBEDDINGS = (sc.OP_EMBEDDINGS, sc.KIND_EMBEDDING)


class LLMCall:
    """The span of one call and what is needed to finish it.

    At span creation it sets what the GenAI spec requires then (operation, provider, request model, server
    address/port, plus our kind). The request's attributes are built by ``build`` once the wrapped call has
    returned or raised (together with the response's, in one write, for a plain response), a stream's response
    attributes when it ends. A span that is not recording (sampled out) gets no attribute work at all; metrics
    are still recorded.
    """

    __slots__ = (
        "capture",
        "ended",
        "held",
        "instruments",
        "kind",
        "max_len",
        "metric_attrs",
        "model",
        "params",
        "provider",
        "recording",
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
        context: Context | None = None,
    ) -> None:
        """Start the span of one call of ``kind`` with ``params`` under ``context`` (None: the current one).

        ``params`` is the wrapper's kwargs: read (never written) once the call has returned.
        """
        current = settings.current  # read directly: this runs on every call
        self.capture = current.capture_content
        self.max_len = current.max_attribute_length
        self.instruments = instruments
        self.ended = False
        self.held: dict[str, Any] | None = None
        self.kind = kind
        model = params.get("model")
        self.model = model = model if isinstance(model, str) else None
        host, port = server
        shape = _SHAPES.get((kind, model, host, port)) or _shape_of(kind, model, server)  # the lookup inlined: hot
        self.provider = shape.provider
        self.metric_attrs = shape.metric_attrs
        self.start = time.perf_counter()
        span = deferred_attributes.start_span(tracer, shape.span_name, SpanKind.CLIENT, shape.start_attrs, context)
        self.span = span
        self.recording = recording = span.is_recording()
        self.params: dict[str, Any] | None = params if recording else None  # a sampled-out span: no attribute work

    def hold_request(self) -> None:
        """Build the request's attributes now and keep them for the span's one write, when the call ends.

        For a stream: its kwargs are read before the user can change them (a chat history is often appended to
        mid-stream), and the span gets one write at the end, with the response's, instead of one now and one
        then. What the span records when it ends is the same.
        """
        if not self.recording:
            return
        try:
            params = self.params
            if params is not None:
                self.params = None
                self.held = self._request_builder(params)()
        except Exception:
            _internal_error("recording OpenAI span attributes")

    def record_request(self, response: deferred_attributes.Builder | None = None) -> None:
        """Set the request's attributes (the first time only) and ``response``'s, in one write.

        Call once the wrapped call has returned or raised. Our errors are logged, never raised to the caller.
        """
        if not self.recording:
            return
        # try/except, not ``handle_internal_errors``: a context manager's generator costs ~10k instructions per call.
        try:
            params = self.params
            # Built by hold_request, not written yet (a getattr: a subclass's own __init__ may not set the slot).
            built: dict[str, Any] | None = getattr(self, "held", None)
            self.held = None
            if params is not None:
                self.params = None
                built = self._request_builder(params)()  # a fresh dict: ours to extend
            if response is not None:
                # The response's values win over the request's, as when set after them.
                if built is None:
                    built = response()
                else:
                    try:
                        built.update(response())
                    except Exception:
                        deferred_attributes.set_built(self.span, built)  # the request's, kept as if written first
                        raise
            if built:
                deferred_attributes.set_built(self.span, built)
        except Exception:
            _internal_error("recording OpenAI span attributes")

    def _request_builder(self, params: dict[str, Any]) -> deferred_attributes.Builder:
        """The builder of the request attributes, run at once (a provider's subclass overrides)."""
        return partial(build.request_attributes, self.kind, params, self.capture, self.max_len)

    def _add_response(self, make_outcome: build.OutcomeFn, extra: build.ExtraFn | None) -> None:
        if not self.recording:
            return
        self.record_request(
            partial(
                build.response_attributes, make_outcome, extra, self.capture, self.max_len, self.model, self.provider
            )
        )

    def finish(self, make_outcome: build.OutcomeFn, summarize: SummaryFn, extra: build.ExtraFn | None = None) -> None:
        """Defer the response attributes (``make_outcome`` runs later), record metrics, end the span.

        ``summarize`` gives the response model and token counts; it is called now, and only when metrics are
        recorded (everything else about the response, cost included, is built when the span is read).
        """
        self._add_response(make_outcome, extra)
        self._end(summarize, None)

    def finish_result(
        self, result: Any, outcome_of: Callable[[Any, bool], Outcome], summary_of: Callable[[Any], Summary]
    ) -> None:
        """``finish`` for a parsed response body: built at once, and the summary only when metrics record.

        The plain call's path, so it creates one ``partial`` (the request builder's) where ``finish`` needs three.
        """
        if self.recording:
            # record_request's body, the response's attributes built in place (no partial for them).
            try:
                params = self.params
                built: dict[str, Any] = {}
                if params is not None:
                    self.params = None
                    built = self._request_builder(params)()
                built.update(
                    build.result_attributes(outcome_of, result, self.capture, self.max_len, self.model, self.provider)
                )
                deferred_attributes.set_built(self.span, built)
            except Exception:
                _internal_error("recording OpenAI span attributes")
        # _end's body, written out: going through _end would need a partial for the summary on every call.
        self.ended = True
        elapsed = time.perf_counter() - self.start
        self.span.end()
        instruments = self.instruments
        if instruments is not None and instruments.enabled():
            instruments.record_call(self.metric_attrs, elapsed, summary_of(result), None)

    def finish_failed(
        self,
        make_outcome: build.OutcomeFn,
        summarize: SummaryFn,
        extra: build.ExtraFn | None,
        failure: tuple[str, str],
    ) -> None:
        """A call the API answered with a failure but no exception (a ``response.failed`` stream event).

        The response is kept (its usage is billed); the span gets ERROR status and ``error.type`` as the GenAI
        spec's "Recording Errors" asks, without an exception event, as nothing was raised.
        """
        error_type, message = failure
        self._add_response(make_outcome, extra)
        self.span.set_attribute(sc.ERROR_TYPE, error_type)
        self.span.set_status(Status(StatusCode.ERROR, message))
        self._end(summarize, error_type)

    def fail(self, error: BaseException) -> None:
        """Mark the span failed (status, error.type, exception event), then end it."""
        self.record_request()
        error_type = error_type_of(error)
        span = self.span
        attrs: dict[str, Any] = {sc.ERROR_TYPE: error_type}
        status = getattr(error, "status_code", None)
        if isinstance(status, int):
            attrs[sc.HTTP_RESPONSE_STATUS_CODE] = status
        span.set_attributes(attrs)
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self._end(None, error_type)

    def fail_with_outcome(self, error: BaseException, make_outcome: build.OutcomeFn, extra: build.ExtraFn) -> None:
        """A stream that broke mid-way: keep what arrived, then fail."""
        self._add_response(make_outcome, extra)
        self.fail(error)

    def abandon(self) -> None:
        """End the span as it is, if nothing ended it (our own code failed half-way)."""
        if not self.ended:
            with handle_internal_errors("recording an OpenAI request"):
                self.record_request()  # registered when the call returned: our error may have come first
            self._end(None, None)

    def _end(self, summarize: SummaryFn | None, error_type: str | None) -> None:
        self.ended = True
        elapsed = time.perf_counter() - self.start
        self.span.end()
        instruments = self.instruments
        if instruments is not None and instruments.enabled():
            summary = summarize() if summarize is not None else None
            instruments.record_call(self.metric_attrs, elapsed, summary, error_type)


class _Shape(NamedTuple):
    """What a call's (endpoint kind, request model, server) determine: computed once per distinct triple."""

    span_name: str
    provider: str
    metric_attrs: MetricAttributes  # shared between calls
    start_attrs: deferred_attributes.Preset  # shared between calls, validated once


_SHAPES: dict[tuple[EndpointKind, str | None, str | None, int | None], _Shape] = {}


def _shape_of(kind: EndpointKind, model: str | None, server: tuple[str | None, int | None]) -> _Shape:
    host, port = server
    key = (kind, model, host, port)
    try:
        return _SHAPES[key]
    except KeyError:
        pass
    provider = provider_for_host(host)
    op, span_kind = _EMBEDDINGS if kind is EndpointKind.EMBEDDINGS else _CHAT
    metric: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: op, sc.GEN_AI_PROVIDER_NAME: provider}
    if model:
        metric[sc.GEN_AI_REQUEST_MODEL] = model
    if host:
        metric[sc.SERVER_ADDRESS] = host
    if port:
        metric[sc.SERVER_PORT] = port
    # Read-only: shared by every span of this shape, and samplers are handed it as is.
    start = deferred_attributes.Preset({**metric, sc.EVALTRACE_SPAN_KIND: span_kind, **build.KIND_ATTRS[kind]})
    shape = _Shape(f"{op} {model}" if model else op, provider, MetricAttributes(metric), start)
    if len(_SHAPES) >= 1024:  # bounded: model names and hosts come from user code, usually a handful
        _SHAPES.clear()
    _SHAPES[key] = shape
    return shape


def _internal_error(what: str) -> None:
    """Route the exception being handled through the one error boundary; call from an ``except`` block."""
    with handle_internal_errors(what):
        raise


def error_type_of(error: BaseException) -> str:
    """``error.type``: the provider's error code when the API sent one, else the exception class qualname.

    OpenAI's errors carry it as ``code``; Anthropic's only in the body, as ``{"error": {"type": ...}}``.
    """
    code = getattr(error, "code", None)
    if isinstance(code, str) and code:
        return code
    body = getattr(error, "body", None)
    nested = body.get("error") if isinstance(body, dict) else None
    code = nested.get("type") if isinstance(nested, dict) else None
    if isinstance(code, str) and code:
        return code
    return type(error).__qualname__
