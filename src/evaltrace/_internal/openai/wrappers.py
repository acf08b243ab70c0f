"""One generic sync and one generic async wrapper for every endpoint in the registry.

Only our own work runs inside ``handle_internal_errors``; the user's call runs outside it, so its exceptions
propagate unchanged (the same object) after being recorded on the span. A key in the OTel context marks "inside a
traced call", so an SDK method that delegates to another wrapped method (``parse`` -> ``create`` in some
versions, ``with_raw_response``) produces one span, not two.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from evaltrace._internal import tracing
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.fast_context import SPAN_KEY, attach, detach, get_current
from evaltrace._internal.openai import registry
from evaltrace._internal.openai.accumulate import Accumulator, ChatAccumulator, ResponsesAccumulator
from evaltrace._internal.openai.call import LLMCall
from evaltrace._internal.openai.metrics import Instruments
from evaltrace._internal.openai.registry import Endpoint, EndpointKind
from evaltrace._internal.openai.response import (
    EMPTY_SUMMARY,
    Outcome,
    Summary,
    chat_outcome,
    chat_summary,
    embeddings_outcome,
    responses_failure,
    responses_outcome,
    responses_summary,
)
from evaltrace._internal.openai.stream import AsyncStreamProxy, StreamState, SyncStreamProxy

# Set in the context our span is current in: a wrapped method called by another one (``parse`` -> ``create``)
# makes no second span.
_IN_CALL = otel_context.create_key("evaltrace-openai-call")
_SUPPRESS_OTEL, _SUPPRESS_OURS, _SUPPRESS_LLM = tracing.LLM_SUPPRESSION_KEYS


Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class Telemetry:
    """Where spans and metrics go: an explicit provider, or evaltrace's current one (looked up per call)."""

    def __init__(self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None) -> None:
        # The explicit provider's tracer; None: evaltrace's current tracer, looked up per call.
        self.own_tracer = (
            tracer_provider.get_tracer(tracing.INSTRUMENTATION_NAME) if tracer_provider is not None else None
        )
        self.instruments = Instruments(meter_provider)


def make_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    """Return the wrapt wrapper for ``endpoint``."""
    return _async_wrapper(endpoint, telemetry) if endpoint.is_async else _sync_wrapper(endpoint, telemetry)


def _internal_error(what: str) -> None:
    """Route the exception being handled through the one error boundary; call from an ``except`` block.

    The hot paths use plain ``try``/``except`` (no context-manager frame on every call) and come here only on
    an error, so the boundary's policy (log; re-raise under tests) stays in one place.
    """
    with handle_internal_errors(what):
        raise


def _sync_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(_IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            call = LLMCall(tracer, kind, kwargs, registry.server_of(instance), instruments, current)
        except Exception:
            _internal_error("starting an OpenAI span")
            return wrapped(*args, **kwargs)
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error("leaving an OpenAI span's context")
        try:
            return _finish(call, kind, result)  # end the span (or hand it to a stream proxy); what the user gets
        except Exception:
            return _recover(call, result)

    return wrapper


# The async twin of _sync_wrapper, line for line (keep them so): sharing the body would put a helper call on every
# call's path, and an await cannot go inside a shared sync helper.
def _async_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(_IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return await wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            call = LLMCall(tracer, kind, kwargs, registry.server_of(instance), instruments, current)
        except Exception:
            _internal_error("starting an OpenAI span")
            return await wrapped(*args, **kwargs)
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error("leaving an OpenAI span's context")
        try:
            return _finish(call, kind, result)  # end the span (or hand it to a stream proxy); what the user gets
        except Exception:
            return _recover(call, result)

    return wrapper


def _record_error(call: LLMCall, error: BaseException) -> None:
    with handle_internal_errors("recording an OpenAI error"):
        call.fail(error)


def _recover(call: LLMCall, result: Any) -> Any:
    """After our own error recording ``result`` (call from ``except``): logged, span closed, result returned."""
    _internal_error("recording an OpenAI response")
    # The user still gets the untouched result, and the span is not left open.
    with handle_internal_errors("closing an OpenAI span"):
        call.abandon()
    return result


def _finish(call: LLMCall, kind: EndpointKind, result: Any) -> Any:
    if type(result) not in _PLAIN_TYPES:
        special = _finish_special(call, kind, result)
        if special is not _PLAIN:
            return special
        if len(_PLAIN_TYPES) < 64:  # bounded: a handful of response model classes in practice
            _PLAIN_TYPES.add(type(result))
    if kind is EndpointKind.EMBEDDINGS:
        outcome = embeddings_outcome(result)  # cheap, and the vectors are not kept alive until export
        call.finish(lambda: outcome, partial(Summary.of, outcome))
    elif kind is EndpointKind.CHAT:
        # Converted into the span attributes now, in the same write as the request's.
        call.finish_result(result, chat_outcome, chat_summary)
    else:
        failure = responses_failure(result)  # a body with status "failed": the SDK raised nothing
        if failure is None:
            call.finish_result(result, responses_outcome, responses_summary)
        else:
            make_outcome = partial(responses_outcome, result, call.capture)
            call.finish_failed(make_outcome, partial(responses_summary, result), None, failure)
    return result


# Result classes known to be a parsed response body (not a raw/streaming wrapper, not a stream): the common
# case skips the isinstance checks below.
_PLAIN_TYPES: set[type[Any]] = set()
_PLAIN = object()


def _finish_special(call: LLMCall, kind: EndpointKind, result: Any) -> Any:
    """Raw responses, streaming responses and streams; ``_PLAIN`` for a parsed response body."""
    if registry.is_raw_response(result):
        # with_raw_response: openai caches parse(), so reading it here gives the user the same object.
        parsed = registry.parse_raw_response(result)
        traced = _finish(call, kind, parsed)
        if traced is not parsed:
            registry.replace_parsed(result, parsed, traced)
        return result
    if registry.is_streaming_response(result):
        # with_streaming_response: the body is the user's to read; we do not consume it.
        call.finish(Outcome, _empty_summary)
        return result
    sync_stream, async_stream = registry.stream_types()
    if isinstance(result, sync_stream):
        call.hold_request()  # written with the response, when the stream ends
        return SyncStreamProxy(result, StreamState(call, _accumulator(kind)))
    if isinstance(result, async_stream):
        call.hold_request()
        return AsyncStreamProxy(result, StreamState(call, _accumulator(kind)))
    return _PLAIN


def _empty_summary() -> Summary:
    return EMPTY_SUMMARY


def _accumulator(kind: EndpointKind) -> Accumulator:
    return ResponsesAccumulator() if kind is EndpointKind.RESPONSES else ChatAccumulator()
