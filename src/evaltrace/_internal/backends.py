"""Exporters for the backends ``configure()`` knows by name: generic OTLP, Langfuse and Phoenix.

Each backend resolves to an ``ExporterTarget`` (protocol, URL, headers); targets are de-duplicated by
(protocol, URL) so a span is never exported twice to the same backend.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.sdk.trace.export import SpanExporter

from evaltrace._internal.otlp_settings import OTLPSettings
from evaltrace.exceptions import ConfigError

LANGFUSE_DEFAULT_HOST = "https://cloud.langfuse.com"
PHOENIX_DEFAULT_URL = "http://localhost:6006"


@dataclass(frozen=True)
class ExporterTarget:
    """One OTLP destination."""

    name: str
    protocol: str
    endpoint: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def key(self) -> tuple[str, str]:
        """Identity used to avoid exporting twice to the same place."""
        return (self.protocol, self.endpoint.rstrip("/"))

    def build(self) -> SpanExporter:
        """Create the OTel exporter for this target."""
        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            endpoint = self.endpoint
            insecure = OTLPSettings(endpoint, "grpc").insecure
            return GrpcExporter(endpoint=endpoint, insecure=insecure, headers=dict(self.headers) or None)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        exporter = HttpExporter(endpoint=self.endpoint, headers=dict(self.headers))
        if self.name == "langfuse":  # LLM spans show their messages as a chat, not the one-line list values
            from evaltrace.exporters.langfuse_view import LangfuseViewExporter

            return LangfuseViewExporter(exporter)
        return exporter


def otlp_target(settings: OTLPSettings) -> ExporterTarget:
    """The generic OTLP target (Jaeger, a collector, any OTLP backend)."""
    return ExporterTarget("otlp", settings.protocol, settings.endpoint, settings.headers)


@dataclass(frozen=True)
class LangfuseSettings:
    """Langfuse host and keys (from kwargs or LANGFUSE_HOST / LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY)."""

    host: str
    public_key: str
    secret_key: str

    @property
    def basic_auth(self) -> str:
        """The ``Authorization`` header value."""
        token = base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        return f"Basic {token}"


def resolve_langfuse(
    enabled: bool | None,
    host: str | None = None,
    public_key: str | None = None,
    secret_key: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> LangfuseSettings | None:
    """Langfuse settings when enabled explicitly or by the presence of its keys in the environment."""
    env = os.environ if environ is None else environ
    public = public_key or env.get("LANGFUSE_PUBLIC_KEY")
    secret = secret_key or env.get("LANGFUSE_SECRET_KEY")
    if enabled is False or (enabled is None and not (public and secret)):
        return None
    if not public or not secret:
        raise ConfigError("langfuse", "needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (or the matching kwargs)")
    resolved_host = (host or env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL") or LANGFUSE_DEFAULT_HOST).rstrip(
        "/"
    )
    if not resolved_host.startswith(("http://", "https://")):
        raise ConfigError("langfuse_host", f"{resolved_host!r} is not an http(s) URL")
    return LangfuseSettings(resolved_host, public, secret)


def langfuse_target(settings: LangfuseSettings) -> ExporterTarget:
    """Langfuse's OTLP/HTTP traces endpoint with Basic auth and the v4 ingestion header (conventions.md 4.1)."""
    return ExporterTarget(
        "langfuse",
        "http/protobuf",
        f"{settings.host}/api/public/otel/v1/traces",
        {"authorization": settings.basic_auth, "x-langfuse-ingestion-version": "4"},
    )


def resolve_phoenix(phoenix: str | bool | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Phoenix base URL when enabled (``True`` = PHOENIX_COLLECTOR_ENDPOINT or localhost:6006)."""
    env = os.environ if environ is None else environ
    if phoenix is None or phoenix is False:
        return None
    url = phoenix if isinstance(phoenix, str) else env.get("PHOENIX_COLLECTOR_ENDPOINT", PHOENIX_DEFAULT_URL)
    url = url.rstrip("/")
    if url.endswith("/v1/traces"):
        url = url[: -len("/v1/traces")]
    if not url.startswith(("http://", "https://")):
        raise ConfigError("phoenix", f"{url!r} is not an http(s) URL")
    return url


def phoenix_target(base_url: str, environ: Mapping[str, str] | None = None) -> ExporterTarget:
    """Phoenix's OTLP/HTTP endpoint, with a Bearer token when PHOENIX_API_KEY is set."""
    env = os.environ if environ is None else environ
    headers = {"authorization": f"Bearer {env['PHOENIX_API_KEY']}"} if env.get("PHOENIX_API_KEY") else {}
    return ExporterTarget("phoenix", "http/protobuf", f"{base_url}/v1/traces", headers)
