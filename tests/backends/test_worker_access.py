"""Who may talk to ``evaltrace worker``: a shared token (HTTP header or gRPC metadata) and TLS, over real sockets."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_receivers import poll
from test_worker import make_spans

from evaltrace.exceptions import ConfigError
from evaltrace.worker import EvaluationWorker
from evaltrace.worker.limits import ReceiverLimits
from evaltrace.worker.security import TlsFiles, TokenAuth, exposure_warning

TOKEN = "s3cret-token"
EMPTY_EXPORT = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def guarded() -> Iterator[EvaluationWorker]:
    with EvaluationWorker([], port=0, grpc_port=0, batch=False, auth=TokenAuth(TOKEN)) as worker:
        yield worker


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Bearer {TOKEN}x"}, 401),
        ({"Authorization": TOKEN}, 401),  # the scheme is part of the header's value
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        ({"X-Other": TOKEN}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"Authorization": f"bearer  {TOKEN}"}, 200),  # the scheme is case-insensitive (RFC 9110)
    ],
    ids=["missing", "wrong", "longer", "no-scheme", "basic", "other-header", "right", "lowercase-scheme"],
)
def test_http_exports_need_the_bearer_token(guarded: EvaluationWorker, headers: dict[str, str], status: int) -> None:
    response = httpx.post(guarded.url + "/v1/traces", content=b"", headers={**EMPTY_EXPORT, **headers})
    assert response.status_code == status, response.text
    if status == 401:
        assert "token" in response.text and response.headers["WWW-Authenticate"] == "Bearer"


def test_health_needs_no_token_and_the_real_exporter_sends_it(guarded: EvaluationWorker) -> None:
    assert httpx.get(guarded.url + "/healthz").status_code == 200  # probes carry no secrets
    sender = HttpExporter(endpoint=guarded.url + "/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"})
    assert sender.export(make_spans()) is SpanExportResult.SUCCESS
    sender.shutdown()
    anonymous = HttpExporter(endpoint=guarded.url + "/v1/traces", timeout=5)
    assert anonymous.export(make_spans()) is SpanExportResult.FAILURE
    anonymous.shutdown()


@pytest.mark.parametrize(
    ("metadata", "code"),
    [
        ((), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", "Bearer wrong"),), grpc.StatusCode.UNAUTHENTICATED),
        ((("authorization", f"Bearer {TOKEN}"),), grpc.StatusCode.OK),
    ],
    ids=["missing", "wrong", "right"],
)
def test_grpc_calls_need_the_token_in_metadata(
    guarded: EvaluationWorker, metadata: tuple[tuple[str, str], ...], code: grpc.StatusCode
) -> None:
    assert guarded.grpc is not None
    sender = GrpcExporter(endpoint=f"127.0.0.1:{guarded.grpc.port}", insecure=True, headers=dict(metadata), timeout=5)
    try:
        result = sender.export(make_spans())
    finally:
        sender.shutdown()
    assert (result is SpanExportResult.SUCCESS) == (code is grpc.StatusCode.OK)
    if code is not grpc.StatusCode.OK:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        with grpc.insecure_channel(f"127.0.0.1:{guarded.grpc.port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(ExportTraceServiceRequest(), metadata=metadata, timeout=5)
        assert refused.value.code() is code


def test_a_custom_header_carries_the_bare_token() -> None:
    auth = TokenAuth(TOKEN, header="X-Evaltrace-Token")
    with EvaluationWorker([], port=0, batch=False, auth=auth) as worker:
        url = worker.url + "/v1/traces"
        assert httpx.post(url, content=b"", headers={**EMPTY_EXPORT, "X-Evaltrace-Token": TOKEN}).status_code == 200
        assert httpx.post(url, content=b"", headers={**EMPTY_EXPORT, "X-Evaltrace-Token": "no"}).status_code == 401
        bearer = {**EMPTY_EXPORT, "Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(url, content=b"", headers=bearer).status_code == 401


def test_the_token_never_shows_in_its_repr_and_bad_settings_name_themselves() -> None:
    assert TOKEN not in repr(TokenAuth(TOKEN))
    with pytest.raises(ConfigError, match="auth_token"):
        TokenAuth("")
    with pytest.raises(ConfigError, match="auth_header"):
        TokenAuth(TOKEN, header="Bad: header")


@pytest.mark.parametrize(
    ("host", "token", "warns"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("10.1.2.3", None, True),
        ("worker.internal", None, True),
        ("0.0.0.0", TOKEN, False),
    ],
)
def test_an_exposed_worker_without_a_token_is_warned_about(host: str, token: str | None, warns: bool) -> None:
    warning = exposure_warning(host, TokenAuth(token) if token else None)
    assert (warning is not None) == warns
    if warning is not None:
        assert warning.startswith("WARNING") and "--auth-token" in warning


# --- TLS ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A self-signed certificate for 127.0.0.1, made now (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return TlsFiles(cert, key)


def test_tls_round_trip_over_http_and_grpc(certificate: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    # requests lets these variables override the exporter's own certificate_file (its session.verify).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    auth = TokenAuth(TOKEN)
    with EvaluationWorker([], port=0, grpc_port=0, batch=False, auth=auth, tls=certificate) as worker:
        assert worker.url.startswith("https://") and worker.grpc is not None
        # A client that connects and never starts the handshake must not hold up anyone else.
        with socket.create_connection(("127.0.0.1", worker.http.port)):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            sender = HttpExporter(
                endpoint=worker.url + "/v1/traces", certificate_file=str(certificate.cert), headers=headers, timeout=10
            )
            assert sender.export(make_spans()) is SpanExportResult.SUCCESS
            sender.shutdown()
        credentials = grpc.ssl_channel_credentials(root_certificates=certificate.cert.read_bytes())
        grpc_sender = GrpcExporter(
            endpoint=f"127.0.0.1:{worker.grpc.port}",
            credentials=credentials,
            headers={"authorization": f"Bearer {TOKEN}"},  # gRPC metadata keys are lower case
            timeout=10,
        )
        assert grpc_sender.export(make_spans()) is SpanExportResult.SUCCESS
        grpc_sender.shutdown()
        with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port gets no answer
            httpx.post(f"http://127.0.0.1:{worker.http.port}/v1/traces", content=b"", headers=headers, timeout=5)
        assert worker.stats()["accepted_spans"] == 4


def test_over_tls_a_connection_past_the_cap_gets_503_with_retry_after_not_a_bare_close(
    certificate: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)  # as above: the exporter's certificate_file must win
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    trusted = ssl.create_default_context(cafile=str(certificate.cert))
    limits = ReceiverLimits(max_connections=2, idle_timeout_s=30.0)
    with EvaluationWorker([], port=0, batch=False, tls=certificate, limits=limits, retry_after_s=3) as worker:
        holders = [trusted.wrap_socket(socket.create_connection(("127.0.0.1", worker.http.port), timeout=20),
                                       server_hostname="127.0.0.1") for _ in range(2)]  # fmt: skip
        try:
            for holder in holders:  # each holds a connection thread, mid-request
                holder.sendall(b"POST /v1/traces HTTP/1.1\r\n")
            with httpx.Client(verify=trusted, timeout=20) as client:
                refused = client.post(worker.url + "/v1/traces", content=b"", headers=EMPTY_EXPORT)
                assert (refused.status_code, refused.headers.get("Retry-After")) == (503, "3"), refused.text
                assert "too many connections" in refused.text
                # A client that never starts its handshake takes a refusal thread for a bounded time only.
                with socket.create_connection(("127.0.0.1", worker.http.port), timeout=20):
                    again = client.post(worker.url + "/v1/traces", content=b"", headers=EMPTY_EXPORT)
                assert again.status_code == 503
        finally:
            for holder in holders:
                holder.close()
        sender = HttpExporter(endpoint=worker.url + "/v1/traces", certificate_file=str(certificate.cert), timeout=10)
        try:  # the slots come back once the holders are gone
            assert poll(lambda: sender.export(make_spans()) is SpanExportResult.SUCCESS)
        finally:
            sender.shutdown()


def test_tls_files_that_do_not_exist_or_do_not_match_are_a_config_error(tmp_path: Path, certificate: TlsFiles) -> None:
    with pytest.raises(ConfigError, match="tls_cert.*does not exist"):
        TlsFiles(tmp_path / "none.pem", certificate.key)
    with pytest.raises(ConfigError, match="cannot load"):
        TlsFiles(certificate.key, certificate.key).server_context()
