"""One sync and one async wrapper for ``messages.create``, and the wrapper of the ``messages.stream()`` helper.

The structure is OpenAI's (``_internal.openai.wrappers``): only our own work runs inside the error boundary,
the user's call runs outside it and its exceptions propagate unchanged after being recorded. The stream proxies
and their state are OpenAI's too (provider-independent); only the accumulator is Anthropic's.

The ``stream()`` helper sends nothing when called: it returns a manager whose ``__enter__`` sends the request.
So the helper's wrapper replaces the manager's request with a traced one, and the span covers the request and
the stream, starting on enter in the context current there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.context import Context

from evaltrace._internal import tracing
from evaltrace._internal.anthropic import registry
from evaltrace._internal.anthropic.accumulate import MessagesAccumulator
from evaltrace._internal.anthropic.call import AnthropicCall
from evaltrace._internal.anthropic.registry import Endpoint
from evaltrace._internal.anthropic.response import message_outcome, message_summary
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.fast_context import SPAN_KEY, attach, detach, get_current
from evaltrace._internal.openai import registry as openai_registry
from evaltrace._internal.openai.response import Outcome
from evaltrace._internal.openai.stream import AsyncStreamProxy, StreamState, SyncStreamProxy
from evaltrace._internal.openai.wrappers import Telemetry

_IN_CALL = registry.IN_CALL  # also read by the SDK's gated tracer (registry.suppress_sdk_span)
_SUPPRESS_OTEL, _SUPPRESS_OURS, _SUPPRESS_LLM = tracing.LLM_SUPPRESSION_KEYS

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

__all__ = ["Telemetry", "make_wrapper"]


def make_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    """Return the wrapt wrapper for ``endpoint``."""
    if endpoint.helper:
        return _helper_wrapper(endpoint, telemetry)
    return _async_wrapper(telemetry) if endpoint.is_async else _sync_wrapper(telemetry)


def _internal_error(what: str) -> None:
    """Route the exception being handled through the one error boundary; call from an ``except`` block."""
    with handle_internal_errors(what):
        raise


def _skipped(current: Context) -> bool:
    return bool(
        current.get(_IN_CALL)
        or current.get(_SUPPRESS_OTEL)
        or current.get(_SUPPRESS_OURS)
        or current.get(_SUPPRESS_LLM)
    )


def _start(telemetry: Telemetry, instance: Any, kwargs: dict[str, Any], current: Context) -> AnthropicCall:
    registry.suppress_sdk_span(instance)
    tracer = telemetry.own_tracer if telemetry.own_tracer is not None else tracing.get_tracer()
    server = openai_registry.server_of(instance)  # the same client layout: ``_client._base_url``
    return AnthropicCall(tracer, kwargs, server, telemetry.instruments, current)


def _sync_wrapper(telemetry: Telemetry) -> Wrapper:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        current = get_current()
        if _skipped(current):
            return wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        try:
            call = _start(telemetry, instance, kwargs, current)
        except Exception:
            _internal_error("starting an Anthropic span")
            return wrapped(*args, **kwargs)
        scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:
                _internal_error("leaving an Anthropic span's context")
        try:
            return _finish(call, result)
        except Exception:
            return _recover(call, result)

    return wrapper


# The async twin of _sync_wrapper, line for line (keep them so).
def _async_wrapper(telemetry: Telemetry) -> Wrapper:
    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        current = get_current()
        if _skipped(current):
            return await wrapped(*args, **kwargs)
        try:
            call = _start(telemetry, instance, kwargs, current)
        except Exception:
            _internal_error("starting an Anthropic span")
            return await wrapped(*args, **kwargs)
        scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:
                _internal_error("leaving an Anthropic span's context")
        try:
            return _finish(call, result)
        except Exception:
            return _recover(call, result)

    return wrapper


def _helper_wrapper(endpoint: Endpoint, telemetry: Telemetry) -> Wrapper:
    """``messages.stream(...)``: trace the request its manager sends on enter (sync or async)."""

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        manager = wrapped(*args, **kwargs)  # sends nothing yet
        if _skipped(get_current()):
            return manager
        try:
            found = registry.helper_request(manager)
            if found is None:
                return manager  # an anthropic whose manager we do not know: untraced, never broken
            name, request = found
            params = {**kwargs, "stream": True}
            if endpoint.is_async:
                setattr(manager, name, _traced_awaitable(telemetry, instance, params, request))
            else:
                setattr(manager, name, _traced_request(telemetry, instance, params, request))
        except Exception:
            _internal_error("tracing an Anthropic stream helper")
        return manager

    return wrapper


def _traced_request(
    telemetry: Telemetry, instance: Any, params: dict[str, Any], request: Callable[[], Any]
) -> Callable[[], Any]:
    def traced() -> Any:
        current = get_current()
        if _skipped(current):
            return request()
        try:
            call = _start(telemetry, instance, params, current)
        except Exception:
            _internal_error("starting an Anthropic span")
            return request()
        scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
        try:
            result = request()
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            detach(scope)
        try:
            return _finish(call, result)
        except Exception:
            return _recover(call, result)

    return traced


async def _traced_awaitable(
    telemetry: Telemetry, instance: Any, params: dict[str, Any], request: Awaitable[Any]
) -> Any:
    current = get_current()
    if _skipped(current):
        return await request
    try:
        call = _start(telemetry, instance, params, current)
    except Exception:
        _internal_error("starting an Anthropic span")
        return await request
    scope = attach(Context({**current, SPAN_KEY: call.span, _IN_CALL: True}))
    try:
        result = await request
    except BaseException as error:
        _record_error(call, error)
        raise
    finally:
        detach(scope)
    try:
        return _finish(call, result)
    except Exception:
        return _recover(call, result)


def _record_error(call: AnthropicCall, error: BaseException) -> None:
    with handle_internal_errors("recording an Anthropic error"):
        call.fail(error)


def _recover(call: AnthropicCall, result: Any) -> Any:
    """After our own error recording ``result`` (call from ``except``): logged, span closed, result returned."""
    _internal_error("recording an Anthropic response")
    with handle_internal_errors("closing an Anthropic span"):
        call.abandon()
    return result


def _finish(call: AnthropicCall, result: Any) -> Any:
    """End the span for a Message, or hand it to a stream proxy; return what the user gets."""
    sync_stream, async_stream = registry.stream_types()
    if isinstance(result, sync_stream):
        call.record_request()  # the response follows when the stream ends
        return SyncStreamProxy(result, StreamState(call, MessagesAccumulator()))
    if isinstance(result, async_stream):
        call.record_request()
        return AsyncStreamProxy(result, StreamState(call, MessagesAccumulator()))
    if registry.is_raw_response(result):
        # with_raw_response: anthropic caches parse(), so reading it here gives the user the same object.
        parsed = result.parse()
        traced = _finish(call, parsed)
        if traced is not parsed:
            openai_registry.replace_parsed(result, parsed, traced)
        return result
    if registry.is_api_response(result):
        call.finish(Outcome, _no_summary)  # the body is the user's to read: the span has the request only
        return result
    call.finish_result(result, message_outcome, message_summary)
    return result


def _no_summary() -> Any:
    from evaltrace._internal.openai.response import EMPTY_SUMMARY

    return EMPTY_SUMMARY
