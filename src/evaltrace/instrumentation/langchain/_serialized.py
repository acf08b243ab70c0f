"""What a model's constructor arguments tell a model span: the server it calls, the stop sequences it was built with.

LangChain hands a model callback the model serialized (``dumpd(model)``): its ``kwargs`` hold the constructor
arguments that differ from the defaults (secrets replaced by references), among them the API's URL
(``ChatOpenAI(base_url=...)`` as ``openai_api_base``, ``ChatAnthropic``'s ``anthropic_api_url``, ``AzureChatOpenAI``'s
``azure_endpoint``, ``ChatGroq``'s ``groq_api_base``, ``ChatOllama``'s ``base_url``...) and the stop sequences given
to the constructor (``ChatAnthropic(stop_sequences=...)``), which the invocation params do not always repeat.
Everything here reads plain values and never raises: an unknown shape gives nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.values import host_port

__all__ = ["constructor_stop", "server_attributes"]

# The URL arguments integrations name, most specific first; any other ``*_api_base`` / ``*_api_url`` /
# ``*_base_url`` argument is read after them (an integration's own name for the same thing).
_URL_KEYS = (
    "openai_api_base",
    "anthropic_api_url",
    "azure_endpoint",
    "base_url",
    "endpoint_url",
    "endpoint",
    "api_base",
    "api_url",
)
_URL_SUFFIXES = ("_api_base", "_api_url", "_base_url")
# Where a provider's SDK sends a call when the model names no URL. OpenAI's client reads OPENAI_BASE_URL (which
# ChatOpenAI does not copy into its arguments); ChatAnthropic always serializes its URL (its default included).
_DEFAULT_URLS = {"openai": ("OPENAI_BASE_URL", "https://api.openai.com/v1")}


def _kwargs(serialized: Any) -> Mapping[str, Any]:
    kwargs = serialized.get("kwargs") if isinstance(serialized, Mapping) else None
    return kwargs if isinstance(kwargs, Mapping) else {}


def _url(kwargs: Mapping[str, Any], ls_provider: Any) -> str | None:
    for key in _URL_KEYS:
        value = kwargs.get(key)
        if isinstance(value, str) and "://" in value:
            return value
    for key, value in kwargs.items():
        if isinstance(key, str) and key.endswith(_URL_SUFFIXES) and isinstance(value, str) and "://" in value:
            return value
    default = _DEFAULT_URLS.get(ls_provider) if isinstance(ls_provider, str) else None
    if default is None:
        return None
    env, url = default
    return os.environ.get(env) or url


def server_attributes(serialized: Any, ls_provider: Any) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of the API the model calls (none when it names no URL).

    Args:
        serialized: The serialized model the callback was given (``dumpd(model)``), or None.
        ls_provider: The model's ``ls_provider`` metadata (a provider's default URL when the model names none).
    """
    try:
        url = _url(_kwargs(serialized), ls_provider)
        if url is None:
            return {}
        host, port = host_port(url)
    except Exception:  # a malformed URL: the call goes ahead without the server
        return {}
    out: dict[str, Any] = {}
    if host:
        out[sc.SERVER_ADDRESS] = host
        if port is not None:
            out[sc.SERVER_PORT] = port
    return out


def constructor_stop(serialized: Any) -> list[str] | None:
    """The stop sequences the model was constructed with (``stop_sequences=`` or ``stop=``), or None."""
    kwargs = _kwargs(serialized)
    for key in ("stop_sequences", "stop"):
        stop = kwargs.get(key)
        if isinstance(stop, str) and stop:
            return [stop]
        if isinstance(stop, Sequence) and stop and all(isinstance(s, str) for s in stop):
            return list(stop)
    return None
