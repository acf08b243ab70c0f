"""What gets wrapped, as data; and the only module that names openai internals.

Each row is an engine ``Endpoint`` (module, class, method, endpoint kind, async). The ``stream()`` helpers of chat
completions and Responses are not listed: in openai >= 1.40 they call ``create(stream=True)``, so they are traced through it
(one span per call), and wrapping them too would double the span. ``beta.chat.completions.parse`` is listed but
wrapped only where it sends its own request: openai 1.40 routes it through ``chat.completions.create`` (traced
there), later 1.x versions post it themselves.
"""

from __future__ import annotations

import importlib
from enum import Enum
from functools import lru_cache
from typing import Any

from evaltrace._internal.engine.codec import Endpoint, owning_class


class EndpointKind(Enum):
    """The three API shapes we understand."""

    CHAT = "chat"
    RESPONSES = "responses"
    EMBEDDINGS = "embeddings"

    # Members are singletons compared by identity: hash them so too (Enum's own hash is Python code, and a
    # kind is part of a cache key looked up on every call).
    __hash__ = object.__hash__


# The resource packages, whose ``__init__`` re-exports the classes in every openai >= 1.40: the defining modules
# moved (``chat/completions.py`` became ``chat/completions/completions.py`` in 1.6x), the re-exports did not.
# A package or method this openai lacks (Responses before 1.66, ``parse`` before it left beta) is skipped.
_CHAT = "openai.resources.chat"
_RESPONSES = "openai.resources.responses"
_BETA_RESPONSES = "openai.resources.beta.responses"
_EMBEDDINGS = "openai.resources.embeddings"
_BETA_CHAT = "openai.resources.beta.chat"  # parse() before it moved to chat.completions; later an alias of it

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(_CHAT, "Completions", "create", EndpointKind.CHAT, False),
    Endpoint(_CHAT, "Completions", "parse", EndpointKind.CHAT, False),
    Endpoint(_CHAT, "AsyncCompletions", "create", EndpointKind.CHAT, True),
    Endpoint(_CHAT, "AsyncCompletions", "parse", EndpointKind.CHAT, True),
    Endpoint(_BETA_CHAT, "Completions", "parse", EndpointKind.CHAT, False, own_request_only=True),
    Endpoint(_BETA_CHAT, "AsyncCompletions", "parse", EndpointKind.CHAT, True, own_request_only=True),
    Endpoint(_RESPONSES, "Responses", "create", EndpointKind.RESPONSES, False),
    Endpoint(_RESPONSES, "Responses", "parse", EndpointKind.RESPONSES, False),
    Endpoint(_RESPONSES, "AsyncResponses", "create", EndpointKind.RESPONSES, True),
    Endpoint(_RESPONSES, "AsyncResponses", "parse", EndpointKind.RESPONSES, True),
    Endpoint(_BETA_RESPONSES, "Responses", "create", EndpointKind.RESPONSES, False),
    Endpoint(_BETA_RESPONSES, "AsyncResponses", "create", EndpointKind.RESPONSES, True),
    Endpoint(_EMBEDDINGS, "Embeddings", "create", EndpointKind.EMBEDDINGS, False),
    Endpoint(_EMBEDDINGS, "AsyncEmbeddings", "create", EndpointKind.EMBEDDINGS, True),
)


# The resource packages, each once: instrument() patches those already imported and hooks the others' import.
MODULES: tuple[str, ...] = tuple(dict.fromkeys(endpoint.module for endpoint in ENDPOINTS))


def resolve_class(endpoint: Endpoint) -> type[Any] | None:
    """Import the endpoint's package; return the class owning ``endpoint``, or None when this openai lacks it."""
    try:
        module = importlib.import_module(endpoint.module)
    except ImportError:
        return None
    return owning_class(module, endpoint)  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def _sentinel_types() -> tuple[type[Any], ...]:
    import openai

    return tuple(t for t in (getattr(openai, "NotGiven", None), getattr(openai, "Omit", None)) if isinstance(t, type))


# Keyword value types that are neither None nor a sentinel: a call whose values are all of these has nothing to drop.
_PLAIN_VALUE_TYPES = frozenset((str, int, float, bool, list, dict, tuple))


def given_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Drop openai's NOT_GIVEN / omit sentinels and None values: they mean 'not in the request'.

    The result is only read: a call with nothing to drop (the common case, checked in one C-level pass over the
    value types) gets ``kwargs`` itself back, uncopied.
    """
    if _PLAIN_VALUE_TYPES.issuperset(map(type, kwargs.values())):
        return kwargs
    sentinels = _sentinel_types()
    return {k: v for k, v in kwargs.items() if v is not None and not isinstance(v, sentinels)}


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
    server = _host_port(str(url))
    _last_server = (url, server)
    return server


@lru_cache(maxsize=256)
def _host_port(url: str) -> tuple[str | None, int | None]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return parts.hostname, port


@lru_cache(maxsize=1)
def _raw_response_types() -> tuple[type[Any], ...]:
    from openai import _legacy_response

    return (_legacy_response.LegacyAPIResponse,)


@lru_cache(maxsize=1)
def _streaming_response_types() -> tuple[type[Any], ...]:
    from openai import _response

    return (_response.APIResponse, _response.AsyncAPIResponse)


def is_raw_response(obj: Any) -> bool:
    """True for the ``with_raw_response`` wrapper object (its body is read; ``parse()`` caches)."""
    return isinstance(obj, _raw_response_types())


def is_streaming_response(obj: Any) -> bool:
    """True for the ``with_streaming_response`` object, whose body the user has not read yet."""
    return isinstance(obj, _streaming_response_types())


def parse_raw_response(raw: Any) -> Any:
    """Return what ``raw.parse()`` returns to the user (cached by openai, so the user gets the same object)."""
    return raw.parse()


def replace_parsed(raw: Any, parsed: Any, replacement: Any) -> None:
    """Make later ``raw.parse()`` calls return ``replacement`` (our stream proxy) instead of ``parsed``."""
    cache: dict[Any, Any] | None = getattr(raw, "_parsed_by_type", None)
    if cache is None:
        return
    for key, value in list(cache.items()):
        if value is parsed:
            cache[key] = replacement


@lru_cache(maxsize=1)
def stream_types() -> tuple[type[Any], type[Any]]:
    """Return (Stream, AsyncStream)."""
    import openai

    return openai.Stream, openai.AsyncStream
