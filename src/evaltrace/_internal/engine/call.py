"""One traced call, any provider: start the span with the attributes required at creation, end it exactly once.

``Call`` is the shell around the codec's builders and the pure ``build``: it owns the span, the clock and the
metric attributes, and sets what the builders make. Each provider has a subclass naming its codec
(``Call.for_codec``); the wrappers create it, the stream proxies finish it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from evaltrace._internal import deferred_attributes, settings
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine import build
from evaltrace._internal.engine.errortype import error_type_of as error_type_of
from evaltrace._internal.engine.metrics import Instruments, MetricAttributes
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.errors import handle_internal_errors

if TYPE_CHECKING:
    from evaltrace._internal.engine.codec import Accumulator, Codec

SummaryFn = Callable[[], Summary]


class Call:
    """The span of one call and what is needed to finish it.

    At span creation it sets what the GenAI spec requires then (operation, provider, request model, server
    address/port, plus our kind). The request's attributes are built by ``build`` once the wrapped call has
    returned or raised (together with the response's, in one write, for a plain response), a stream's response
    attributes when it ends. A span that is not recording (sampled out) gets no attribute work at all; metrics
    are still recorded.
    """

    codec: ClassVar[Codec]
    _shapes: ClassVar[dict[tuple[Hashable, str | None, str | None, int | None], _Shape]] = {}

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
        kind: Hashable,
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
        shape = self._shapes.get((kind, model, host, port)) or self._shape_of(kind, model, server)  # inlined: hot
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
            _internal_error(f"recording {self.codec.label} span attributes")

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
            _internal_error(f"recording {self.codec.label} span attributes")

    def _request_builder(self, params: dict[str, Any]) -> deferred_attributes.Builder:
        """The builder of the request attributes (the codec's), run at once."""
        return partial(self.codec.request_attributes, self.kind, params, self.capture, self.max_len)

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
                _internal_error(f"recording {self.codec.label} span attributes")
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
        error_type = self.codec.error_type(error)
        span = self.span
        attrs: dict[str, Any] = {sc.ERROR_TYPE: error_type}
        status = self.codec.status_code(error)
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
            with handle_internal_errors(f"recording a {self.codec.label} request"):
                self.record_request()  # registered when the call returned: our error may have come first
            self._end(None, None)

    def finish_response(self, result: Any) -> None:
        """``finish_result`` with the codec's readers: a plain response body of this call's kind."""
        codec, kind = self.codec, self.kind
        self.finish_result(result, partial(codec.outcome, kind), partial(codec.summary, kind))

    def outcome_of(self, result: Any) -> build.OutcomeFn:
        """The codec's ``Outcome`` of ``result``, made when called (for ``finish`` / ``finish_failed``)."""
        return partial(self.codec.outcome, self.kind, result, self.capture)

    def summary_of(self, result: Any) -> SummaryFn:
        """The codec's ``Summary`` of ``result``, made when called."""
        return partial(self.codec.summary, self.kind, result)

    def stream(self, stream: Any, acc: Accumulator, is_async: bool | None = None) -> Any:
        """Hand the span to a proxy of ``stream`` (iterator, iterable, generator, stream object); return the proxy.

        ``is_async`` picks the async proxy (True) or the sync one (False) for an object that is both (LiteLLM's
        ``CustomStreamWrapper``); None: async when it has ``__anext__`` (or ``__aiter__`` and no ``__next__``). An
        iterable that is not its own iterator (botocore's ``EventStream``) is read through ``iter()``. The
        request's attributes are built now (before the user can change its messages mid-stream) and written with
        the response's when the stream ends, exactly once, whichever way it ends.
        """
        from evaltrace._internal.engine import stream as proxies

        self.hold_request()
        state = proxies.StreamState(self, acc)
        if is_async is None:
            is_async = hasattr(stream, "__anext__") or (
                hasattr(stream, "__aiter__") and not hasattr(stream, "__next__")
            )
        if is_async:
            return proxies.AsyncStreamProxy(stream, state)
        if not hasattr(stream, "__next__"):
            return proxies.IterableStreamProxy(stream, state)
        return proxies.SyncStreamProxy(stream, state)

    @classmethod
    def for_codec(cls, codec: Codec) -> type[Call]:
        """A ``Call`` subclass for ``codec`` (its own shape cache)."""
        return type(f"{type(codec).__name__}Call", (cls,), {"__slots__": (), "codec": codec})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._shapes = {}  # per provider: kinds of two codecs may compare equal

    @classmethod
    def _shape_of(cls, kind: Hashable, model: str | None, server: tuple[str | None, int | None]) -> _Shape:
        host, port = server
        key = (kind, model, host, port)
        shapes = cls._shapes
        try:
            return shapes[key]
        except KeyError:
            pass
        codec = cls.codec
        provider = codec.provider_of(kind, model, host)
        op = codec.operation(kind)
        metric: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: op, sc.GEN_AI_PROVIDER_NAME: provider}
        if model:
            metric[sc.GEN_AI_REQUEST_MODEL] = model
        if host:
            metric[sc.SERVER_ADDRESS] = host
        if port:
            metric[sc.SERVER_PORT] = port
        # Set at span creation: what the GenAI spec lists as relevant to sampling, our span kind (on_start
        # processors route on it) and the codec's attributes fixed per kind. Read-only: shared by every span of
        # this shape, and samplers are handed it as is.
        start = {**metric, sc.EVALTRACE_SPAN_KIND: codec.span_kind(kind), **codec.start_attributes(kind)}
        shape = _Shape(
            f"{op} {model}" if model else op, provider, MetricAttributes(metric), deferred_attributes.Preset(start)
        )
        if len(shapes) >= 1024:  # bounded: model names and hosts come from user code, usually a handful
            shapes.clear()
        shapes[key] = shape
        return shape

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


def _internal_error(what: str) -> None:
    """Route the exception being handled through the one error boundary; call from an ``except`` block."""
    with handle_internal_errors(what):
        raise
