"""What gets wrapped, as data; with ``engine.stainless``, the only code that names anthropic internals.

Each row is an engine ``Endpoint`` (module, class, method, kind, async, deferred). ``messages.create`` is traced
for plain and ``stream=True`` calls. The ``messages.stream()`` helper does not go through ``create``: it returns a
manager whose ``__enter__`` sends the request, so it is wrapped too and traced when the request is sent
(``deferred=True``). ``messages.parse`` (structured outputs, anthropic >= 0.70) posts its request itself, never
through ``create``: it is wrapped as ``create`` is. ``messages.count_tokens`` is deliberately absent: it generates
nothing. A package or class this anthropic lacks (``beta`` in old versions) is skipped, by feature detection at
``instrument()``.
"""

from __future__ import annotations

import weakref
from typing import Any

from opentelemetry.trace import INVALID_SPAN

from evaltrace._internal.engine.codec import IN_CALL, Endpoint
from evaltrace._internal.engine.stainless import Stainless
from evaltrace._internal.fast_context import get_current

CHAT = "chat"  # the one endpoint kind: every row is a chat call


_MESSAGES = "anthropic.resources.messages"
_BETA_MESSAGES = "anthropic.resources.beta.messages"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(_MESSAGES, "Messages", "create", CHAT, False),
    Endpoint(_MESSAGES, "AsyncMessages", "create", CHAT, True),
    Endpoint(_MESSAGES, "Messages", "stream", CHAT, False, deferred=True),
    Endpoint(_MESSAGES, "AsyncMessages", "stream", CHAT, True, deferred=True),
    Endpoint(_MESSAGES, "Messages", "parse", CHAT, False),
    Endpoint(_MESSAGES, "AsyncMessages", "parse", CHAT, True),
    Endpoint(_BETA_MESSAGES, "Messages", "create", CHAT, False),
    Endpoint(_BETA_MESSAGES, "AsyncMessages", "create", CHAT, True),
    Endpoint(_BETA_MESSAGES, "Messages", "stream", CHAT, False, deferred=True),
    Endpoint(_BETA_MESSAGES, "AsyncMessages", "stream", CHAT, True, deferred=True),
    Endpoint(_BETA_MESSAGES, "Messages", "parse", CHAT, False),
    Endpoint(_BETA_MESSAGES, "AsyncMessages", "parse", CHAT, True),
)


SDK = Stainless("anthropic")

given_kwargs = SDK.given_kwargs  # drops NOT_GIVEN / omit and None


_API_REQUEST_SUFFIX = "__api_request"  # MessageStreamManager's private (name-mangled) request


def helper_request(manager: Any) -> tuple[str, Any] | None:
    """(attribute name, value) of the request a ``stream()`` manager sends on enter, or None if not found.

    Sync managers hold a callable returning the raw ``Stream``; async ones an awaitable of the ``AsyncStream``.
    Found by suffix, as name mangling puts the (possibly beta) class name in front.
    """
    state = getattr(manager, "__dict__", None)
    if not isinstance(state, dict):
        return None
    for name, value in state.items():
        if name.endswith(_API_REQUEST_SUFFIX):
            return name, value
    return None


class _OutsideOurCalls:
    """The SDK's tracer, gated: no span inside a call we trace (ours describes it), the SDK's own anywhere else.

    The SDK asks its tracer for a span per API call. Inside one of our calls the answer is a span that records
    nothing and propagates nothing, which the SDK treats as no span; every other call on the client (a method we do
    not trace) keeps the SDK's span, so silencing the SDK never leaves a call with no span at all.
    """

    __slots__ = ("tracer",)

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        if get_current().get(IN_CALL):
            return INVALID_SPAN
        return self.tracer.start_span(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracer, name)


def suppress_sdk_span(resource: Any) -> None:
    """Turn off the SDK's own call span inside our calls on this client (anthropic >= 2 traces its calls itself).

    Both spans would describe the same call with ``gen_ai.operation.name=chat``: a trace would count the call, its
    tokens and its cost twice. The SDK looks its tracer up lazily (the ``_tracer`` property) and keeps it in
    ``_lazy_tracer``, None meaning "no spans" there. We put the SDK's tracer behind ``_OutsideOurCalls`` rather than
    None: calls we do not trace keep the SDK's span. :func:`restore_sdk_span` undoes it on ``uninstrument()``.
    """
    client: Any = getattr(resource, "_client", None)
    lazy = getattr(client, "_lazy_tracer", None)
    if lazy is None or type(lazy) is _OutsideOurCalls or "_lazy_tracer" not in vars(client):
        return  # no client, no SDK tracing (an older anthropic, or turned off), or already gated
    tracer = client._tracer  # the SDK's own lookup: None when its spans are off
    if tracer is not None:
        client._lazy_tracer = _OutsideOurCalls(tracer)
        _silenced.add(client)


_silenced: weakref.WeakSet[Any] = weakref.WeakSet()  # weak: never keeps a client alive


def restore_sdk_span() -> None:
    """Let every client :func:`suppress_sdk_span` silenced look its tracer up again (on ``uninstrument()``)."""
    from anthropic import NOT_GIVEN

    for client in list(_silenced):
        client._lazy_tracer = NOT_GIVEN
    _silenced.clear()
