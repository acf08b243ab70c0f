"""One generic sync and one generic async wrapper for every endpoint of every provider.

Only our own work runs inside the error boundary; the user's call runs outside it, so its exceptions propagate
unchanged (the same object) after being recorded on the span. A key in the OTel context marks "inside a traced
call", so an SDK method that delegates to another wrapped method (``parse`` -> ``create`` in some versions,
``with_raw_response``, LiteLLM calling the openai SDK) produces one span, not two: the key is shared by every
provider.

The wrappers are the hot path the benchmarks measure: no context manager and no extra Python frame per call
beyond the codec's own hooks (optional hooks a codec does not override are not called at all). A codec with
neither ``route`` nor ``prepare`` (OpenAI, Groq, Mistral...) gets the direct wrappers, which do not even test for
them: the route/prepare checks were 19 bytecodes per call over the wrapper before the engine (issue 26).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from evaltrace._internal import tracing
from evaltrace._internal.engine.call import Call
from evaltrace._internal.engine.codec import IN_CALL, Codec, Endpoint
from evaltrace._internal.engine.metrics import Instruments
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.fast_context import SPAN_KEY, attach, detach, get_current

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


def make_wrapper(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    """Return the wrapt wrapper for ``endpoint``, making spans with ``call_class`` (``Call.for_codec(codec)``)."""
    if endpoint.deferred:
        return _deferred_wrapper(endpoint, telemetry, call_class)
    return _wrapper_of(endpoint, telemetry, call_class)


def _wrapper_of(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    """The sync or async wrapper: direct when the codec overrides neither ``route`` nor ``prepare``."""
    codec = call_class.codec
    direct = _overridden(codec, "route") is None and _overridden(codec, "prepare") is None
    if endpoint.is_async:
        return (_async_direct if direct else _async_wrapper)(endpoint, telemetry, call_class)
    return (_sync_direct if direct else _sync_wrapper)(endpoint, telemetry, call_class)


def suppressed(current: Context) -> bool:
    """True inside a call we trace, or where an instrumentation suppression key is set."""
    return bool(
        current.get(IN_CALL) or current.get(_SUPPRESS_OTEL) or current.get(_SUPPRESS_OURS) or current.get(_SUPPRESS_LLM)
    )


def _overridden(codec: Codec, hook: str) -> Any:
    """The codec's bound ``hook`` when its class overrides the base's, else None (not called at all)."""
    if getattr(type(codec), hook) is getattr(Codec, hook):
        return None
    return getattr(codec, hook)


def _internal_error(what: str) -> None:
    """Route the exception being handled through the one error boundary; call from an ``except`` block.

    The hot paths use plain ``try``/``except`` (no context-manager frame on every call) and come here only on
    an error, so the boundary's policy (log; re-raise under tests) stays in one place.
    """
    with handle_internal_errors(what):
        raise


def _sync_wrapper(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    codec = call_class.codec
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer
    server_of, finish = codec.server_of, codec.finish
    route, prepare = _overridden(codec, "route"), _overridden(codec, "prepare")

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        call: Call | None
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            if route is None:
                if prepare is not None:
                    prepare(instance)
                call_kind = kind
                call = call_class(tracer, kind, kwargs, server_of(instance), instruments, current)
            else:
                call = _routed(
                    route, prepare, call_class, endpoint, tracer, instruments, instance, args, kwargs, current
                )
                call_kind = call.kind if call is not None else kind
        except Exception:
            _internal_error(f"starting a {codec.label} span")
            return wrapped(*args, **kwargs)
        if call is None:
            return wrapped(*args, **kwargs)  # the codec's route: not an LLM call
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, IN_CALL: True}))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error(f"leaving a {codec.label} span's context")
        try:
            return finish(call, call_kind, result)  # end the span (or hand it to a stream proxy)
        except Exception:
            return _recover(call, result)

    return wrapper


# The async twin of _sync_wrapper, line for line (keep them so): sharing the body would put a helper call on every
# call's path, and an await cannot go inside a shared sync helper.
def _async_wrapper(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    codec = call_class.codec
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer
    server_of, finish = codec.server_of, codec.finish
    route, prepare = _overridden(codec, "route"), _overridden(codec, "prepare")

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return await wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        call: Call | None
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            if route is None:
                if prepare is not None:
                    prepare(instance)
                call_kind = kind
                call = call_class(tracer, kind, kwargs, server_of(instance), instruments, current)
            else:
                call = _routed(
                    route, prepare, call_class, endpoint, tracer, instruments, instance, args, kwargs, current
                )
                call_kind = call.kind if call is not None else kind
        except Exception:
            _internal_error(f"starting a {codec.label} span")
            return await wrapped(*args, **kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)  # the codec's route: not an LLM call
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, IN_CALL: True}))
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error(f"leaving a {codec.label} span's context")
        try:
            return finish(call, call_kind, result)  # end the span (or hand it to a stream proxy)
        except Exception:
            return _recover(call, result)

    return wrapper


# _sync_wrapper without the codec's route and prepare hooks (a codec that has neither): the common hot path.
def _sync_direct(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    codec = call_class.codec
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer
    server_of, finish = codec.server_of, codec.finish

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            call = call_class(tracer, kind, kwargs, server_of(instance), instruments, current)
        except Exception:
            _internal_error(f"starting a {codec.label} span")
            return wrapped(*args, **kwargs)
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, IN_CALL: True}))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error(f"leaving a {codec.label} span's context")
        try:
            return finish(call, kind, result)  # end the span (or hand it to a stream proxy)
        except Exception:
            return _recover(call, result)

    return wrapper


# The async twin of _sync_direct, line for line (keep them so), as _async_wrapper is _sync_wrapper's.
def _async_direct(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    codec = call_class.codec
    kind, instruments, own_tracer = endpoint.kind, telemetry.instruments, telemetry.own_tracer
    server_of, finish = codec.server_of, codec.finish

    async def wrapper(
        wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        current = get_current()  # looked up once: suppression, parent span, our span's context
        if (
            current.get(IN_CALL)
            or current.get(_SUPPRESS_OTEL)
            or current.get(_SUPPRESS_OURS)
            or current.get(_SUPPRESS_LLM)
        ):
            return await wrapped(*args, **kwargs)  # nested in our call, or silenced by another instrumentation
        try:
            tracer = own_tracer if own_tracer is not None else tracing.get_tracer()
            call = call_class(tracer, kind, kwargs, server_of(instance), instruments, current)
        except Exception:
            _internal_error(f"starting a {codec.label} span")
            return await wrapped(*args, **kwargs)
        # Our span current, and marked as inside our call: set_span_in_context plus set_value, in one copy.
        scope = attach(Context({**current, SPAN_KEY: call.span, IN_CALL: True}))
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            _record_error(call, error)
            raise
        finally:
            try:
                detach(scope)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _internal_error(f"leaving a {codec.label} span's context")
        try:
            return finish(call, kind, result)  # end the span (or hand it to a stream proxy)
        except Exception:
            return _recover(call, result)

    return wrapper


def _routed(  # the wrapper's locals, passed on rather than rebuilt
    route: Any,
    prepare: Any,
    call_class: type[Call],
    endpoint: Endpoint,
    tracer: Any,
    instruments: Instruments,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    current: Context,
) -> Call | None:
    """Start the call the codec's ``route`` (and ``prepare``) make of this one; None: not traced."""
    routed = route(endpoint, instance, args, kwargs)
    if routed is None:
        return None
    if prepare is not None:
        prepare(instance)
    if len(routed) == 3:
        call_kind, params, server = routed
    else:
        call_kind, params = routed
        server = call_class.codec.server_of(instance)
    return call_class(tracer, call_kind, params, server, instruments, current)


def _deferred_wrapper(endpoint: Endpoint, telemetry: Telemetry, call_class: type[Call]) -> Wrapper:
    """A method returning a manager that sends its request on enter: trace that request (sync or async).

    The manager's request (a callable returning the stream, or an awaitable of it) is replaced with the same
    request sent through the endpoint's ordinary wrapper, so the span covers the request and the stream, starting
    on enter in the context current there.
    """
    codec = call_class.codec
    is_async = endpoint.is_async
    send = _wrapper_of(endpoint, telemetry, call_class)

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        manager = wrapped(*args, **kwargs)  # sends nothing yet
        if suppressed(get_current()):
            return manager
        try:
            found = codec.deferred_request(manager)
            if found is None:
                return manager  # a manager we do not know: untraced, never broken
            name, request = found
            params = {**kwargs, "stream": True}
            if is_async:  # an awaitable, awaited once on enter: ours awaits it inside the span
                setattr(manager, name, send(lambda **_: request, instance, (), params))
            else:  # a callable, called on enter
                setattr(manager, name, partial(send, lambda **_: request(), instance, (), params))
        except Exception:
            _internal_error(f"tracing a {codec.label} stream helper")
        return manager

    return wrapper


def _record_error(call: Call, error: BaseException) -> None:
    with handle_internal_errors(f"recording a {call.codec.label} error"):
        call.fail(error)


def _recover(call: Call, result: Any) -> Any:
    """After our own error recording ``result`` (call from ``except``): logged, span closed, result returned."""
    _internal_error(f"recording a {call.codec.label} response")
    # The user still gets the untouched result, and the span is not left open.
    with handle_internal_errors(f"closing a {call.codec.label} span"):
        call.abandon()
    return result
