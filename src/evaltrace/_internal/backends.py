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

from evaltrace._internal.otlp_settings import OTLPSettings, validate_endpoint
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
    """Langfuse settings when enabled explicitly or by the presence of its keys in the environment.

    Raises:
        ConfigError: One key is set without the other (the setting named is the missing one), no key is set
            while ``enabled`` is True, or the host is not an http(s) URL (named by the variable it came from).
    """
    env = os.environ if environ is None else environ
    public = public_key or env.get("LANGFUSE_PUBLIC_KEY")
    secret = secret_key or env.get("LANGFUSE_SECRET_KEY")
    if enabled is False:
        return None
    if bool(public) != bool(secret):
        # Half a key pair: exporting would be refused (401) on every batch, and not exporting would hide that
        # the user meant Langfuse to get the traces. Say which half is missing.
        given, missing = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY") if public else _SECRET_ONLY
        raise ConfigError(
            missing,
            f"{given} is set but {missing} is not; set both (Langfuse project settings > API keys), "
            f"or unset {given} (or pass langfuse=False) to not export to Langfuse",
        )
    if not public or not secret:
        if enabled is None:
            return None
        raise ConfigError("langfuse", "needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (or the matching kwargs)")
    setting, raw_host = _first_set(("langfuse_host", host), ("LANGFUSE_HOST", env.get("LANGFUSE_HOST")))
    if raw_host is None:
        setting, raw_host = "LANGFUSE_BASE_URL", env.get("LANGFUSE_BASE_URL") or LANGFUSE_DEFAULT_HOST
    resolved_host = validate_endpoint(raw_host, setting).rstrip("/")
    return LangfuseSettings(resolved_host, public, secret)


_SECRET_ONLY = ("LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY")


def _first_set(*candidates: tuple[str, str | None]) -> tuple[str, str | None]:
    """The first (setting, value) whose value is set (non-empty), else ("", None)."""
    for setting, value in candidates:
        if value:
            return setting, value
    return "", None


def langfuse_target(settings: LangfuseSettings) -> ExporterTarget:
    """Langfuse's OTLP/HTTP traces endpoint with Basic auth and the v4 ingestion header (conventions.md 4.1)."""
    return ExporterTarget(
        "langfuse",
        "http/protobuf",
        f"{settings.host}/api/public/otel/v1/traces",
        {"authorization": settings.basic_auth, "x-langfuse-ingestion-version": "4"},
    )


def resolve_phoenix(phoenix: str | bool | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Phoenix base URL when enabled (``True`` = PHOENIX_COLLECTOR_ENDPOINT or localhost:6006).

    Raises:
        ConfigError: The URL is not an http(s) URL (named ``phoenix`` or ``PHOENIX_COLLECTOR_ENDPOINT``).
    """
    env = os.environ if environ is None else environ
    if phoenix is None or phoenix is False:
        return None
    if isinstance(phoenix, str):
        setting, url = "phoenix", phoenix
    else:
        setting, url = "PHOENIX_COLLECTOR_ENDPOINT", env.get("PHOENIX_COLLECTOR_ENDPOINT") or PHOENIX_DEFAULT_URL
    url = validate_endpoint(url, setting).rstrip("/")
    if url.endswith("/v1/traces"):
        url = url[: -len("/v1/traces")]
    return url


def phoenix_target(base_url: str, environ: Mapping[str, str] | None = None) -> ExporterTarget:
    """Phoenix's OTLP/HTTP endpoint, with a Bearer token when PHOENIX_API_KEY is set."""
    env = os.environ if environ is None else environ
    headers = {"authorization": f"Bearer {env['PHOENIX_API_KEY']}"} if env.get("PHOENIX_API_KEY") else {}
    return ExporterTarget("phoenix", "http/protobuf", f"{base_url}/v1/traces", headers)
