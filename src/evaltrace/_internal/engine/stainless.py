"""What every Stainless-generated SDK shares (openai, anthropic, groq...): one ``Stainless(package)`` per SDK.

Their clients keep the base URL as ``_client._base_url``; their calls return a parsed body, a ``Stream`` /
``AsyncStream``, a ``with_raw_response`` wrapper or a ``with_streaming_response`` one; their keyword defaults are
``NotGiven`` / ``Omit`` sentinels. The SDK is imported on first use, never by ``instrument()``.

``with_raw_response`` returns openai's ``_legacy_response.LegacyAPIResponse``, or, in SDKs without it (anthropic 2,
groq), a ``_response.APIResponse`` / ``AsyncAPIResponse``, the class ``with_streaming_response`` returns too. The
request header ``RAW_RESPONSE_HEADER`` the SDK's wrapper sets tells them apart: ``"raw"`` or ``"stream"``. For
``"raw"`` the SDK has already read the body (or, for ``stream=True``, ``parse()`` builds the ``Stream`` without
reading), and every ``parse()`` caches what it returns: the engine parses once, records the answer (or proxies the
stream) and puts what it made in that cache, so the user's own ``parse()`` returns it. An async response's
``parse()`` is a coroutine that, on such a response, awaits no I/O: it is run to its end on the spot. For
``"stream"`` the body is still on the wire and the user's to read: the span has the request only.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from evaltrace._internal.engine.codec import NO_SUMMARY, PLAIN
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.engine.values import host_port  # also imported from here by older callers

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from evaltrace._internal.engine.call import Call
    from evaltrace._internal.engine.codec import Codec

# Keyword value types that are neither None nor a sentinel: a call whose values are all of these has nothing to drop.
_PLAIN_VALUE_TYPES = frozenset((str, int, float, bool, list, dict, tuple))


class _Types(NamedTuple):
    stream: type[Any]
    async_stream: type[Any]
    raw: tuple[type[Any], ...]  # with_raw_response (empty where the SDK has no legacy response: anthropic 2)
    api: tuple[type[Any], ...]  # with_streaming_response (and anthropic 2's with_raw_response)
    async_api: type[Any]  # the async one of ``api``: its parse() is a coroutine
    raw_header: str  # the request header naming the wrapper: "raw" (with_raw_response) or "stream"
    sentinels: tuple[type[Any], ...]


class Stainless:
    """The result types and request sentinels of one Stainless SDK (``Stainless("openai")``)."""

    __slots__ = ("_types", "package")

    def __init__(self, package: str) -> None:
        self.package = package
        self._types: _Types | None = None

    def types(self) -> _Types:
        """The SDK's classes, imported on first use."""
        types = self._types
        if types is None:
            import importlib

            sdk = importlib.import_module(self.package)
            try:
                legacy = importlib.import_module(f"{self.package}._legacy_response")
                raw: tuple[type[Any], ...] = (legacy.LegacyAPIResponse,)
            except ImportError:
                raw = ()
            response = importlib.import_module(f"{self.package}._response")
            constants = importlib.import_module(f"{self.package}._constants")
            header = getattr(constants, "RAW_RESPONSE_HEADER", "X-Stainless-Raw-Response")
            sentinels = tuple(t for t in (getattr(sdk, "NotGiven", None), getattr(sdk, "Omit", None)) if t)
            api = (response.APIResponse, response.AsyncAPIResponse)
            self._types = types = _Types(sdk.Stream, sdk.AsyncStream, raw, api, api[1], header, sentinels)
        return types

    def given_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Drop the NOT_GIVEN / omit sentinels and None values: they mean 'not in the request'.

        The result is only read: a call with nothing to drop (the common case, checked in one C-level pass over the
        value types) gets ``kwargs`` itself back, uncopied.
        """
        if _PLAIN_VALUE_TYPES.issuperset(map(type, kwargs.values())):
            return kwargs
        sentinels = self.types().sentinels
        return {k: v for k, v in kwargs.items() if v is not None and not isinstance(v, sentinels)}

    def finish_special(
        self, codec: Codec, call: Call, kind: Any, result: Any, sync_proxy: type[Any] | None = None
    ) -> Any:
        """``Codec.finish_special`` for these SDKs: raw and streaming responses, streams; ``PLAIN`` otherwise.

        ``sync_proxy``: the proxy class of a sync stream, when the SDK's needs more than the engine's
        ``SyncStreamProxy`` (a subclass of it); the engine's when None.
        """
        types = self.types()
        if types.raw and isinstance(result, types.raw):
            # with_raw_response: the SDK caches parse(), so reading it here gives the user the same object.
            return _finish_raw(codec, call, kind, result, result.parse)
        if isinstance(result, types.api):
            parse = _raw_parse(result, types)
            if parse is None:
                # with_streaming_response: the body is the user's to read; the span has the request only.
                call.finish(Outcome, _no_summary)
                return result
            return _finish_raw(codec, call, kind, result, parse)
        if isinstance(result, types.stream) or isinstance(result, types.async_stream):
            from evaltrace._internal.engine.stream import AsyncStreamProxy, StreamState, SyncStreamProxy

            call.hold_request()  # written with the response, when the stream ends
            if isinstance(result, types.stream):
                proxy = SyncStreamProxy if sync_proxy is None else sync_proxy
            else:
                proxy = AsyncStreamProxy
            return proxy(result, StreamState(call, codec.accumulator(kind)))
        return PLAIN


def _no_summary() -> Summary:
    return NO_SUMMARY


def _finish_raw(codec: Codec, call: Call, kind: Any, raw: Any, parse: Callable[[], Any]) -> Any:
    """End ``call`` with what ``parse()`` makes of the raw response (a stream: proxied); return ``raw``."""
    try:
        parsed = parse()
    except Exception:
        # The SDK's own parse error (a body that does not parse, a post-parser's LengthFinishReasonError) is the
        # user's to meet at their own parse(), as without us: a failed parse caches nothing, so it raises again
        # there. Not our bug: no log; the span keeps the request only.
        call.finish(Outcome, _no_summary)
        return raw
    if parsed is _UNREAD:
        call.finish(Outcome, _no_summary)
        return raw
    traced = codec.finish(call, kind, parsed)
    if traced is not parsed:
        replace_parsed(raw, parsed, traced)
    return raw


_UNREAD: Any = object()
"""``_run_now``'s answer when an async ``parse()`` suspended after all: closed there, nothing parsed or recorded."""


def _raw_parse(response: Any, types: _Types) -> Callable[[], Any] | None:
    """``response.parse`` as a plain call, for a ``with_raw_response`` ``APIResponse``; None for any other.

    Only what needs no I/O: a body the SDK has read (it reads it unless the wrapper asked for ``"stream"``), or a
    server-sent event stream, which ``parse()`` wraps in a ``Stream`` without reading.
    """
    if response.http_request.headers.get(types.raw_header) != "raw":
        return None
    if not getattr(response, "_is_sse_stream", False):
        try:
            response.http_response.content  # noqa: B018 -- raises ResponseNotRead while the body is on the wire
        except Exception:
            return None
    if isinstance(response, types.async_api):
        return partial(_run_now, response.parse)
    return response.parse  # type: ignore[no-any-return]


def _run_now(parse: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run the coroutine ``parse()`` returns to its end, here, and return what it returns (or raise what it raises).

    Nothing here keeps it from suspending: ``_raw_parse``'s guard does, by passing on only a response whose body the
    SDK has already read (``.content`` did not raise), or an event stream, which ``parse()`` wraps unread. Should it
    suspend after all (an SDK that reads differently), it is closed at that first await and ``_UNREAD`` returned, so
    the span keeps the request only. Nothing was cached, but this is no clean undo: had it suspended inside a read of
    the body, httpx already counts that body as consumed, and the user's own ``await parse()`` would fail.
    """
    coroutine = parse()
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    return _UNREAD


def replace_parsed(raw: Any, parsed: Any, replacement: Any) -> None:
    """Make later ``raw.parse()`` calls return ``replacement`` (our stream proxy) instead of ``parsed``."""
    cache: dict[Any, Any] | None = getattr(raw, "_parsed_by_type", None)
    if cache is None:
        return
    for key, value in list(cache.items()):
        if value is parsed:
            cache[key] = replacement


# (base_url object, its (host, port)) of the last call: one client is the norm. Replaced whole, never mutated,
# so a concurrent reader sees a consistent pair.
_last_server: tuple[Any, tuple[str | None, int | None]] = (None, (None, None))


def server_of(resource: Any) -> tuple[str | None, int | None]:
    """Return (host, port) of the resource's client base URL; the port defaults from the scheme."""
    client = getattr(resource, "_client", None)
    url = getattr(client, "_base_url", None)  # what the client's base_url property returns, without the call
    if url is None:
        url = getattr(client, "base_url", None)
        if url is None:
            return None, None
    global _last_server
    last_url, last = _last_server
    if url is last_url:  # the same URL object as last call: skip str() and the parse cache
        return last
    server = host_port(str(url))
    _last_server = (url, server)
    return server
