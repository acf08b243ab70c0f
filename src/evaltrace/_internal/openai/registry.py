"""What gets wrapped, as data; with ``engine.stainless``, the only code that names openai internals.

Each row is an engine ``Endpoint`` (module, class, method, endpoint kind, async). The ``stream()`` helpers of chat
completions and Responses are not listed: in openai >= 1.40 they call ``create(stream=True)``, so they are traced
through it (one span per call), and wrapping them too would double the span. ``beta.chat.completions.parse`` is listed but
wrapped only where it sends its own request: openai 1.40 routes it through ``chat.completions.create`` (traced
there), later 1.x versions post it themselves.
"""

from __future__ import annotations

import importlib
from enum import Enum
from typing import Any

from evaltrace._internal.engine.codec import Endpoint, owning_class
from evaltrace._internal.engine.stainless import Stainless


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


SDK = Stainless("openai")

given_kwargs = SDK.given_kwargs  # drops NOT_GIVEN / omit and None (the common call: its kwargs, uncopied)
