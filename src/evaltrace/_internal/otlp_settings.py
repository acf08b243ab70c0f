"""Validated OTLP exporter settings from keyword arguments and the standard OTel environment variables.

Precedence: keyword argument > signal-specific variable (``OTEL_EXPORTER_OTLP_TRACES_*``) > generic variable
(``OTEL_EXPORTER_OTLP_*``). The generic endpoint gets ``/v1/traces`` appended for HTTP; the traces-specific
endpoint is used verbatim (OTel exporter specification).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from evaltrace._internal.shown_urls import shown_url
from evaltrace.exceptions import ConfigError

PROTOCOLS = ("grpc", "http/protobuf")
ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
ENV_TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"


@dataclass(frozen=True)
class OTLPSettings:
    """Where and how to send OTLP traces."""

    endpoint: str
    protocol: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def insecure(self) -> bool:
        """Whether gRPC goes without TLS (an ``http://`` endpoint, or a bare host:port on loopback)."""
        if self.endpoint.startswith("http://"):
            return True
        if self.endpoint.startswith("https://"):
            return False
        host = self.endpoint.split(":", 1)[0]
        return host in {"localhost", "127.0.0.1", "[::1]", "0.0.0.0"}


def parse_headers(raw: str, setting: str) -> dict[str, str]:
    """Parse ``k1=v1,k2=v2`` (values URL-decoded, as the OTel spec says); raise ConfigError when malformed."""
    headers: dict[str, str] = {}
    for position, item in enumerate(raw.split(","), start=1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            # The item is not echoed: a header with its "=" missing is often "Authorization Bearer <token>".
            raise ConfigError(
                setting, f"expected comma-separated key=value pairs; item {position} has no {'key' if sep else '='}"
            )
        headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers


def validate_protocol(protocol: str, setting: str) -> str:
    """Return the protocol normalised, or raise ConfigError naming the supported ones."""
    normalised = protocol.strip().lower()
    if normalised not in PROTOCOLS:
        raise ConfigError(setting, f"unknown OTLP protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
    return normalised


# host:port as gRPC takes it without a scheme: a name, an IPv4 address or a bracketed IPv6 address, and a port.
_HOST_PORT = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):\d{1,5}")
# What a URL missing only its scheme looks like: a host, maybe a port and a path ("localhost:4318/v1/traces").
_SCHEMELESS = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?(?:/\S*)?")


def validate_endpoint(endpoint: str, setting: str, protocol: str = "http/protobuf") -> str:
    """Return ``endpoint`` stripped, or raise ConfigError saying what is wrong with it and how to write it.

    HTTP needs an ``http://`` or ``https://`` URL: an exporter given ``localhost:4318`` fails on every export,
    long after configure() returned. gRPC also takes a bare ``host:port`` (TLS unless the host is loopback, see
    ``OTLPSettings.insecure``).

    Args:
        endpoint: The value as given.
        setting: The keyword argument or environment variable it came from (named in the error).
        protocol: ``grpc`` accepts ``host:port``; anything else needs a URL.
    """
    endpoint = endpoint.strip()
    if not endpoint:
        raise ConfigError(setting, "the endpoint is empty; give a URL such as http://localhost:4318")
    shown = shown_url(endpoint)  # the error is printed: never a token in its userinfo or query string
    if "://" in endpoint:
        parsed = urlparse(endpoint)
        try:
            parsed.port  # noqa: B018 (raises ValueError for a port that is not a number)
        except ValueError:
            parsed = parsed._replace(netloc="")
        if parsed.scheme not in {"http", "https"} or not parsed.hostname or any(c.isspace() for c in endpoint):
            raise ConfigError(
                setting, f"{shown!r} is not an http(s) URL; write it as http://host:port or https://host:port"
            )
        return endpoint
    if protocol == "grpc" and _HOST_PORT.fullmatch(endpoint):
        return endpoint
    if _SCHEMELESS.fullmatch(endpoint):
        problem = f"{shown!r} has no scheme; write it as http://{shown} (or https://{shown} for TLS)"
    else:
        problem = f"{shown!r} is not a URL; write it as http://host:port, e.g. http://localhost:4318"
    raise ConfigError(setting, problem)


def _traces_url(base: str) -> str:
    return base.rstrip("/") + "/v1/traces"


def resolve_otlp(
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> OTLPSettings | None:
    """Resolve the OTLP exporter settings, or None when no endpoint is configured anywhere.

    Args:
        endpoint: Generic endpoint (kwarg); HTTP gets ``/v1/traces`` appended unless the path already ends so.
        protocol: ``grpc`` or ``http/protobuf`` (default ``http/protobuf``, as the OTel spec recommends).
        headers: A mapping or a ``k=v,k2=v2`` string.
        environ: Environment to read (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    if protocol is not None:
        proto = validate_protocol(protocol, "protocol")
    elif env.get(ENV_TRACES_PROTOCOL):
        proto = validate_protocol(env[ENV_TRACES_PROTOCOL], ENV_TRACES_PROTOCOL)
    elif env.get(ENV_PROTOCOL):
        proto = validate_protocol(env[ENV_PROTOCOL], ENV_PROTOCOL)
    else:
        proto = "http/protobuf"

    if endpoint is not None:
        url = validate_endpoint(endpoint, "otlp_endpoint", proto)
        if proto != "grpc" and not url.rstrip("/").endswith("/v1/traces"):
            url = _traces_url(url)
    elif env.get(ENV_TRACES_ENDPOINT):
        url = validate_endpoint(env[ENV_TRACES_ENDPOINT], ENV_TRACES_ENDPOINT, proto)
    elif env.get(ENV_ENDPOINT):
        url = validate_endpoint(env[ENV_ENDPOINT], ENV_ENDPOINT, proto)
        url = url if proto == "grpc" else _traces_url(url)
    else:
        return None

    if isinstance(headers, str):
        parsed = parse_headers(headers, "headers")
    elif headers is not None:
        parsed = {str(k).lower(): str(v) for k, v in headers.items()}
    else:
        parsed = parse_headers(env.get(ENV_HEADERS, ""), ENV_HEADERS)
        parsed.update(parse_headers(env.get(ENV_TRACES_HEADERS, ""), ENV_TRACES_HEADERS))
    return OTLPSettings(endpoint=url, protocol=proto, headers=parsed)
