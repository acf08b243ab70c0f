"""The google-genai methods we wrap, and the client lookups the codec needs (API flavour, server).

Each request the SDK sends is one span: we wrap ``Models._generate_content`` / ``_generate_content_stream`` (and
their ``AsyncModels`` twins), the methods that send one HTTP request each, not the public ``generate_content`` /
``generate_content_stream``. Those run automatic function calling (AFC) and automatic continuation: several
billed requests, with the application's own Python tool functions called between them. Wrapping the per-request
methods gives every request its span with its own exact usage and cost, and leaves the tool functions outside
our call mark, so an instrumented model call made inside a tool gets its own span (under the caller's current
span). A chat message (``client.chats``), which goes through ``generate_content``, is one span per request too:
one for a plain message. ``embed_content`` sends one request and is wrapped as is, and so is ``caches.create``
(the model reads the contents it caches; a ``task`` span ``create_cache {model}``, not an LLM step: it answers
nothing). The Interactions API (``client.interactions.create``) is wrapped at the generated client's
``Interactions.create``, which the public ``create`` calls once per request it sends (see ``interactions``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.codec import Endpoint
from evaltrace._internal.engine.values import host_port

GEMINI = "gcp.gemini"
VERTEX = "gcp.vertex_ai"


class Kind(NamedTuple):
    """What the codec needs to know of an operation: its name, whether it streams, and which API served it."""

    operation: str
    stream: bool
    provider: str


GENERATE = Kind(sc.OP_GENERATE_CONTENT, False, GEMINI)
GENERATE_STREAM = Kind(sc.OP_GENERATE_CONTENT, True, GEMINI)
EMBED = Kind(sc.OP_EMBEDDINGS, False, GEMINI)
CREATE_CACHE = Kind(sc.OP_CREATE_CACHE, False, GEMINI)
INTERACTION = Kind(sc.OP_CHAT, False, GEMINI)  # the Interactions API; ``route`` sets ``stream`` per call

_MODULE = "google.genai.models"
ENDPOINTS: tuple[Endpoint, ...] = tuple(
    Endpoint(_MODULE, cls, method, kind, is_async)
    for cls, is_async in (("Models", False), ("AsyncModels", True))
    for method, kind in (
        ("_generate_content", GENERATE),
        ("_generate_content_stream", GENERATE_STREAM),
        ("embed_content", EMBED),
    )
) + tuple(Endpoint("google.genai.caches", cls, "create", CREATE_CACHE, is_async)
          for cls, is_async in (("Caches", False), ("AsyncCaches", True)))  # fmt: skip
ENDPOINTS += tuple(Endpoint("google.genai._gaos.interactions", cls, "create", INTERACTION, is_async)
                   for cls, is_async in (("Interactions", False), ("AsyncInteractions", True)))  # fmt: skip


def api_client(instance: Any) -> Any:
    """The ``BaseApiClient`` a ``Models`` / ``AsyncModels`` instance sends through (shared by sync and async)."""
    return getattr(instance, "_api_client", None)


def is_vertex(instance: Any) -> bool:
    """True for a Vertex AI client (``genai.Client(vertexai=True)``), whatever host it is pointed at."""
    return getattr(api_client(instance), "vertexai", None) is True


def server_of(instance: Any) -> tuple[str | None, int | None]:
    """(host, port) of the client's base URL (``generativelanguage.googleapis.com``, a Vertex region, a proxy)."""
    options = getattr(api_client(instance), "_http_options", None)
    base_url = getattr(options, "base_url", None)
    if not isinstance(base_url, str) or not base_url:
        return None, None
    return host_port(base_url)  # cached, bounded
