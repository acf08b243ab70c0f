"""Who may send spans to the worker: an optional shared token, TLS, and a warning for exposed workers.

The token travels as ``Authorization: Bearer <token>`` (what ``OTEL_EXPORTER_OTLP_HEADERS`` and the
collector's ``headers`` or ``bearertokenauth`` extension send), or as the whole value of another header
named by ``header``. It is compared with :func:`hmac.compare_digest`, whose time does not depend on where
the first difference is, so the token cannot be guessed byte by byte from response times.
"""

from __future__ import annotations

import hmac
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from evaltrace.exceptions import ConfigError

__all__ = ["TokenAuth", "TlsFiles", "exposure_warning"]

TOKEN_ENV = "EVALTRACE_WORKER_TOKEN"
_BEARER = "bearer "


@dataclass(frozen=True)
class TokenAuth:
    """A shared secret every export must carry.

    Args:
        token: The secret (not empty).
        header: Header carrying it; for ``Authorization`` the value is ``Bearer <token>``, for any other header
            the value is the token itself.
    """

    token: str
    header: str = "Authorization"

    def __post_init__(self) -> None:
        if not isinstance(self.token, str) or not self.token.strip():
            raise ConfigError("auth_token", "must be a non-empty string")
        if not isinstance(self.header, str) or not self.header.strip() or ":" in self.header:
            raise ConfigError("auth_header", f"must be a header name, got {self.header!r}")

    def __repr__(self) -> str:  # never print the secret in a traceback or a log line
        return f"TokenAuth(token='***', header={self.header!r})"

    @property
    def metadata_key(self) -> str:
        """The header as gRPC metadata names it (lower case)."""
        return self.header.strip().lower()

    def allows(self, value: str | None) -> bool:
        """Whether a request whose ``header`` had ``value`` (None: absent) carries the token."""
        if value is None:
            return False
        presented = value.strip()
        if self.metadata_key == "authorization":
            if presented[: len(_BEARER)].lower() != _BEARER:
                return False
            presented = presented[len(_BEARER) :].strip()
        return hmac.compare_digest(presented.encode(), self.token.encode())


@dataclass(frozen=True)
class TlsFiles:
    """A PEM certificate chain and its private key, for serving HTTPS and gRPC over TLS.

    Args:
        cert: Certificate (chain) file.
        key: Private key file (not encrypted).
    """

    cert: Path
    key: Path

    def __post_init__(self) -> None:
        for what, path in (("cert", self.cert), ("key", self.key)):
            if not Path(path).is_file():
                raise ConfigError(f"tls_{what}", f"file {str(path)!r} does not exist")

    def server_context(self) -> ssl.SSLContext:
        """A server-side TLS context (TLS 1.2 or later).

        Raises:
            ConfigError: The files do not hold a matching certificate and key.
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, OSError) as exc:
            problem = f"cannot load {str(self.cert)!r} with key {str(self.key)!r}: {exc}"
            raise ConfigError("tls_cert", problem) from exc
        return context

    def grpc_pair(self) -> tuple[bytes, bytes]:
        """``(private key, certificate chain)`` bytes, as ``grpc.ssl_server_credentials`` takes them."""
        return Path(self.key).read_bytes(), Path(self.cert).read_bytes()


def exposure_warning(host: str, auth: TokenAuth | None) -> str | None:
    """A warning when ``host`` is reachable from other machines and no token guards the worker."""
    if auth is not None or host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:  # a host name other than localhost: it may resolve to anything
        pass
    return (
        f"WARNING: listening on {host} without authentication: anyone who can reach this port can send spans "
        f"and fill the sinks; set --auth-token (or {TOKEN_ENV}) or keep the worker behind a collector"
    )
