from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace import config
from evaltrace._internal import settings, tracing
from evaltrace._internal.otlp_settings import resolve_otlp
from evaltrace.exporters import LocalTraceStore


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


# --- validation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "setting"),
    [
        ({"otlp_endpoint": "http://x:4318", "protocol": "thrift"}, "protocol"),
        ({"otlp_endpoint": "http://x:4318", "headers": "novalue"}, "headers"),
        ({"otlp_endpoint": "ftp://x"}, "otlp_endpoint"),
        ({"max_attribute_length": -1}, "max_attribute_length"),
        ({"redact": 3}, "redact"),
        ({"langfuse": True}, "langfuse"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_setting(
    kwargs: dict[str, Any], setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY", raising=False)
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=False, **kwargs)
    assert info.value.setting == setting
    assert setting in str(info.value)


_BACKEND_ENV = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_HOST",
    "LANGFUSE_BASE_URL",
    "PHOENIX_COLLECTOR_ENDPOINT",
)


@pytest.fixture
def clean_backend_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _BACKEND_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("given", "missing"),
    [("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"), ("LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY")],
    ids=["public_only", "secret_only"],
)
@pytest.mark.parametrize("langfuse", [None, True], ids=["env", "kwarg"])
def test_half_a_langfuse_key_pair_raises_naming_the_missing_key(
    given: str, missing: str, langfuse: bool | None, clean_backend_env: pytest.MonkeyPatch
) -> None:
    clean_backend_env.setenv(given, "pk-lf-0123" if given == "LANGFUSE_PUBLIC_KEY" else "sk-lf-0123")
    before = config.current_handle()
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=False, langfuse=langfuse)
    assert info.value.setting == missing
    message = str(info.value)
    assert f"{given} is set but {missing} is not" in message and "set both" in message, message
    assert "langfuse=False" in message  # the way out for a user who did not mean Langfuse
    assert "0123" not in message  # the key that is set is not echoed
    assert config.current_handle() is before
    clean_backend_env.setenv(missing, "x")
    evaltrace.configure(local_store=False, langfuse=False)  # opting out still works with half a pair


@pytest.mark.parametrize(
    ("env", "kwargs", "setting", "fragment"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, {}, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318/v1/traces"},
            {},
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://collector:4318/v1/traces",
        ),
        ({}, {"otlp_endpoint": "localhost:4318"}, "otlp_endpoint", "http://localhost:4318"),
        ({}, {"otlp_endpoint": "not a url"}, "otlp_endpoint", "is not a URL"),
        ({}, {"otlp_endpoint": "not a url", "protocol": "grpc"}, "otlp_endpoint", "is not a URL"),
        ({}, {"otlp_endpoint": "http://"}, "otlp_endpoint", "is not an http(s) URL"),
        ({}, {"otlp_endpoint": "http://host:port"}, "otlp_endpoint", "is not an http(s) URL"),
        (
            {"LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": "sk-lf-1", "LANGFUSE_HOST": "localhost:3000"},
            {},
            "LANGFUSE_HOST",
            "http://localhost:3000",
        ),
        (
            {
                "LANGFUSE_PUBLIC_KEY": "pk-lf-1",
                "LANGFUSE_SECRET_KEY": "sk-lf-1",
                "LANGFUSE_BASE_URL": "langfuse.internal",
            },
            {},
            "LANGFUSE_BASE_URL",
            "https://langfuse.internal",
        ),
        ({"PHOENIX_COLLECTOR_ENDPOINT": "localhost:6006"}, {"phoenix": True}, "PHOENIX_COLLECTOR_ENDPOINT", "http://"),
        ({}, {"phoenix": "localhost:6006/v1/traces"}, "phoenix", "http://localhost:6006/v1/traces"),
    ],
    ids=[
        "otlp_env",
        "otlp_traces_env",
        "otlp_kwarg",
        "otlp_kwarg_not_a_url",
        "otlp_kwarg_grpc_not_a_url",
        "otlp_kwarg_no_host",
        "otlp_kwarg_bad_port",
        "langfuse_host_env",
        "langfuse_base_url_env",
        "phoenix_env",
        "phoenix_kwarg",
    ],
)
def test_an_endpoint_that_is_not_a_url_raises_naming_its_setting_and_the_fix(
    env: dict[str, str], kwargs: dict[str, Any], setting: str, fragment: str, clean_backend_env: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        clean_backend_env.setenv(name, value)
    before = config.current_handle()
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=False, **kwargs)
    assert info.value.setting == setting
    assert setting in str(info.value) and fragment in str(info.value), str(info.value)
    assert config.current_handle() is before


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("ftp://collector-user:s3cret-token@collector:4318", "'ftp://***@collector:4318' is not an http(s) URL"),
        ("http://user:s3cret-token@collector:port", "'http://***@collector:port' is not an http(s) URL"),
        ("collector:4318/v1/traces?api-key=s3cret-token", "write it as http://collector:4318/v1/traces?***"),
        ("user:s3cret-token@collector:4318", "'***@collector:4318' is not a URL"),
    ],
    ids=["userinfo_wrong_scheme", "userinfo_bad_port", "query_no_scheme", "userinfo_no_scheme"],
)
def test_an_endpoint_error_never_echoes_its_credentials(
    endpoint: str, shown: str, clean_backend_env: pytest.MonkeyPatch
) -> None:
    with pytest.raises(evaltrace.ConfigError) as info:
        evaltrace.configure(local_store=False, otlp_endpoint=endpoint)
    assert "s3cret" not in str(info.value)
    assert info.value.setting == "otlp_endpoint" and shown in str(info.value), str(info.value)


def test_grpc_still_takes_host_port_without_a_scheme(clean_backend_env: pytest.MonkeyPatch) -> None:
    grpc = resolve_otlp("localhost:4317", "grpc", environ={})
    assert grpc is not None and grpc.endpoint == "localhost:4317" and grpc.insecure
    ipv6 = resolve_otlp(environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "[::1]:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert ipv6 is not None and ipv6.endpoint == "[::1]:4317"


def test_invalid_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift")
    with pytest.raises(evaltrace.ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        evaltrace.configure()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1,broken")
    with pytest.raises(evaltrace.ConfigError, match="OTEL_EXPORTER_OTLP_HEADERS"):
        evaltrace.configure()


def test_endpoint_resolution_follows_the_otel_spec() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    http = resolve_otlp(environ=env)
    assert http is not None and http.endpoint == "http://collector:4318/v1/traces"
    env_traces = {**env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/custom/path"}
    verbatim = resolve_otlp(environ=env_traces)
    assert verbatim is not None and verbatim.endpoint == "http://jaeger:4318/custom/path"
    grpc = resolve_otlp(environ={**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc is not None and grpc.endpoint == "http://collector:4318/" and grpc.insecure
    headers = resolve_otlp(
        environ={**env, "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20abc,x-langfuse-ingestion-version=4"}
    )
    assert headers is not None and headers.headers == {
        "authorization": "Basic abc",
        "x-langfuse-ingestion-version": "4",
    }
    assert resolve_otlp(environ={}) is None
    kwarg = resolve_otlp("http://localhost:4318", environ=env)
    assert kwarg is not None and kwarg.endpoint == "http://localhost:4318/v1/traces"


# --- pipeline --------------------------------------------------------------------------------------------


def test_default_is_the_local_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "LANGFUSE_PUBLIC_KEY"):
        monkeypatch.delenv(var, raising=False)
    handle = evaltrace.configure(service_name="store-test")
    assert handle.exporter_names == ["local_store"]

    @evaltrace.agent
    def hello(name: str) -> str:
        return f"hi {name}"

    hello("ada")
    assert handle.force_flush()
    summaries = LocalTraceStore(tmp_path / ".evaltrace").list_traces()
    assert len(summaries) == 1
    assert summaries[0].root_name == "invoke_agent hello"
    assert summaries[0].service_name == "store-test"
    spans = LocalTraceStore(tmp_path / ".evaltrace").spans(summaries[0].trace_id[:8])
    assert [s.name for s in spans] == ["invoke_agent hello"]
    assert json.loads(spans[0].attributes["output.value"]) == "hi ada"  # type: ignore[index]


def test_configure_twice_replaces_without_duplicates() -> None:
    first = InMemorySpanExporter()
    second = InMemorySpanExporter()
    evaltrace.configure(exporters=[first], local_store=False, batch=False)
    handle = evaltrace.configure(exporters=[second], local_store=False, batch=False)

    @evaltrace.trace
    def f() -> None:
        return None

    f()
    handle.force_flush()
    assert len(first.get_finished_spans()) == 0
    assert [s.name for s in second.get_finished_spans()] == ["f"]


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "simple"])
def test_configure_twice_with_the_same_exporter_keeps_exporting(batch: bool) -> None:
    exporter = InMemorySpanExporter()
    other = InMemorySpanExporter()

    @evaltrace.trace
    def first() -> None:
        return None

    @evaltrace.trace
    def second() -> None:
        return None

    evaltrace.configure(exporters=[exporter, other], local_store=False, batch=batch)
    first()
    handle = evaltrace.configure(exporters=[exporter], local_store=False, batch=batch, redact=True)
    second()
    assert handle.force_flush()
    # The reused exporter was flushed by the old pipeline and not shut down by it; the dropped one was.
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["first", "second"]
    assert [s.name for s in other.get_finished_spans()] == ["first"]
    other.clear()
    other.export(spans)
    assert other.get_finished_spans() == ()  # an exporter the new configuration dropped was shut down
    handle.shutdown()
    exporter.clear()
    exporter.export(spans)
    assert exporter.get_finished_spans() == ()  # and the last configuration's shutdown still releases it


def test_attaches_to_an_explicit_user_provider() -> None:
    user_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(tracer_provider=user_provider, exporters=[exporter], local_store=False, batch=False)
    assert handle.provider is user_provider

    @evaltrace.trace
    def g() -> int:
        return 1

    g()
    assert [s.name for s in exporter.get_finished_spans()] == ["g"]


def test_attaches_to_a_global_provider_the_application_set() -> None:
    script = """
import evaltrace
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
app_exporter, ours = InMemorySpanExporter(), InMemorySpanExporter()
tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(app_exporter)); trace.set_tracer_provider(tp)
h = evaltrace.configure(exporters=[ours], local_store=False, batch=False)
assert h.provider is tp
@evaltrace.trace
def f(): return 1
f()
print(len(app_exporter.get_finished_spans()), len(ours.get_finished_spans()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]


def test_redaction_applies_to_exported_copies_only() -> None:
    exporter = InMemorySpanExporter()
    seen: list[str] = []
    evaltrace.configure(exporters=[exporter], local_store=False, batch=False, redact=True)

    @evaltrace.trace
    def echo(text: str) -> str:
        seen.append(text)
        return text

    echo("mail me at ada@example.com, key sk-proj-abcdefghijklmnopqrstuvwx")
    assert seen == ["mail me at ada@example.com, key sk-proj-abcdefghijklmnopqrstuvwx"]
    exported = dict(exporter.get_finished_spans()[0].attributes or {})
    assert "ada@example.com" not in exported["input.value"]
    assert "[REDACTED:EMAIL]" in exported["input.value"]
    assert "[REDACTED:API_KEY]" in exported["output.value"]


def test_capture_content_env_var_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "no_content")
    exporter = InMemorySpanExporter()
    evaltrace.configure(exporters=[exporter], local_store=False, batch=False)

    @evaltrace.trace
    def f(x: int) -> int:
        return x

    f(1)
    assert "input.value" not in dict(exporter.get_finished_spans()[0].attributes or {})


class _Receiver(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def test_otlp_http_export_reaches_a_real_receiver_with_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Receiver.requests.clear()
    try:
        port = server.server_address[1]
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=search")
        handle = evaltrace.configure(service_name="otlp-test")
        assert handle.exporter_names == ["otlp"]

        @evaltrace.tool
        def lookup(q: str) -> str:
            return q

        lookup("x")
        assert handle.force_flush(10_000)
    finally:
        server.shutdown()
        server.server_close()
    path, headers, body = _Receiver.requests[0]
    assert path == "/v1/traces"
    assert headers["x-team"] == "search"
    request = ExportTraceServiceRequest.FromString(body)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert span.name == "execute_tool lookup"
    resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "otlp-test"
