"""Host of the client's base URL -> ``gen_ai.provider.name`` (conventions.md 6.4).

The openai client talks to OpenAI and to many OpenAI-compatible servers; the host is the only reliable hint of
which one. Unknown hosts (vLLM, proxies, localhost) keep ``openai`` and rely on ``server.address``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

DEFAULT_PROVIDER: Final = "openai"

# (host suffix, provider name); suffix match so regional and per-resource hosts are covered.
_HOST_SUFFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("openai.azure.com", "azure.ai.openai"),
    ("cognitiveservices.azure.com", "azure.ai.openai"),
    ("services.ai.azure.com", "azure.ai.openai"),
    ("deepseek.com", "deepseek"),
    ("groq.com", "groq"),
    ("x.ai", "x_ai"),
    ("mistral.ai", "mistral_ai"),
    ("perplexity.ai", "perplexity"),
    ("openai.com", "openai"),
)


@lru_cache(maxsize=256)
def provider_for_host(host: str | None) -> str:
    """Return the semconv provider name for a base-URL host (``openai`` when unknown)."""
    if not host:
        return DEFAULT_PROVIDER
    host = host.lower().rstrip(".")
    for suffix, provider in _HOST_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            return provider
    return DEFAULT_PROVIDER
