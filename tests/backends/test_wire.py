"""What ``configure()`` puts on the wire for Jaeger-style OTLP (HTTP and gRPC) and Langfuse, decoded by real receivers."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from otlp_receivers import OTLPGrpcReceiver, OTLPHttpReceiver, ReceivedSpan, by_name

import evaltrace
from evaltrace._internal import semconv

AGENT = "invoke_agent weather"
TOOL = "execute_tool get_weather"
LLM = "chat gpt-4o-mini"
TASK = "format_answer"
ALL_SPANS = {AGENT, TOOL, LLM, TASK}
MODEL_ATTRIBUTES = (
    semconv.GEN_AI_REQUEST_MODEL,
    semconv.GEN_AI_RESPONSE_MODEL,
    "langfuse.observation.model.name",
    "llm.model_name",
    "model",
)


@evaltrace.tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 21}


@evaltrace.llm(name=LLM, attributes={semconv.GEN_AI_REQUEST_MODEL: "gpt-4o-mini"})
def call_model(prompt: str) -> str:
    return f"sunny ({prompt})"


@evaltrace.trace
def format_answer(text: str) -> str:
    return text.upper()


@evaltrace.agent(name="weather")
def answer(question: str) -> str:
    weather = get_weather("Paris")
    return format_answer(call_model(f"{question} {weather['temp_c']}"))


def run_app() -> None:
    with evaltrace.context(session_id="sess-1", user_id="user-7", tags=["beta", "wire"]):
        assert answer("Weather in Paris?").startswith("SUNNY")


def assert_app_spans(spans: list[ReceivedSpan], service: str) -> dict[str, ReceivedSpan]:
    named = by_name(spans)
    assert set(named) == ALL_SPANS
    assert len(spans) == len(ALL_SPANS), "a span was exported twice"
    agent = named[AGENT]
    assert {s.trace_id for s in spans} == {agent.trace_id}
    assert agent.parent_span_id == ""
    for child in (TOOL, LLM, TASK):
        assert named[child].parent_span_id == agent.span_id
    assert named[TOOL].attributes[semconv.GEN_AI_TOOL_NAME] == "get_weather"
    assert named[TOOL].attributes[semconv.GEN_AI_OPERATION_NAME] == semconv.OP_EXECUTE_TOOL
    assert '"Paris"' in named[TOOL].attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]
    assert named[AGENT].attributes[semconv.GEN_AI_AGENT_NAME] == "weather"
    assert named[LLM].kind == 3  # SPAN_KIND_CLIENT
    assert all(s.resource[semconv.SERVICE_NAME] == service for s in spans)
    return named


@pytest.mark.parametrize("suffix", ["", "/"])
def test_http_generic_endpoint_gets_v1_traces_appended(suffix: str) -> None:
    with OTLPHttpReceiver() as jaeger:
        handle = evaltrace.configure("wire-http", otlp_endpoint=jaeger.base_url + suffix, local_store=False)
        run_app()
        assert handle.force_flush()
        assert_app_spans(jaeger.wait_for_spans(4), "wire-http")
        assert {r.path for r in jaeger.requests} == {"/v1/traces"}
        assert {r.headers["content-type"] for r in jaeger.requests} == {"application/x-protobuf"}


def test_traces_specific_endpoint_is_used_verbatim(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPHttpReceiver() as jaeger:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/ignored")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", jaeger.base_url + "/custom/traces")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=acme")
        handle = evaltrace.configure("wire-env", local_store=False)
        run_app()
        assert handle.force_flush()
        assert_app_spans(jaeger.wait_for_spans(4), "wire-env")
        assert {r.path for r in jaeger.requests} == {"/custom/traces"}
        assert {r.headers.get("x-tenant") for r in jaeger.requests} == {"acme"}


def test_an_endpoint_already_ending_in_v1_traces_is_not_doubled() -> None:
    with OTLPHttpReceiver() as jaeger:
        handle = evaltrace.configure("wire-http", otlp_endpoint=jaeger.base_url + "/v1/traces", local_store=False)
        run_app()
        assert handle.force_flush()
        jaeger.wait_for_spans(4)
        assert {r.path for r in jaeger.requests} == {"/v1/traces"}


def test_grpc_delivers_decoded_spans_and_headers_as_metadata() -> None:
    with OTLPGrpcReceiver() as jaeger:
        handle = evaltrace.configure(
            "wire-grpc", otlp_endpoint=jaeger.endpoint, protocol="grpc", headers="x-tenant=acme", local_store=False
        )
        run_app()
        assert handle.force_flush()
        named = assert_app_spans(jaeger.wait_for_spans(4), "wire-grpc")
        assert named[AGENT].scope.startswith("evaltrace")
        assert {r.headers.get("x-tenant") for r in jaeger.requests} == {"acme"}


def langfuse_env(monkeypatch: pytest.MonkeyPatch, host: str) -> str:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-secret")
    monkeypatch.setenv("LANGFUSE_HOST", host)
    return "Basic " + base64.b64encode(b"pk-lf-test:sk-lf-secret").decode()


def assert_langfuse_ready(spans: list[ReceivedSpan]) -> None:
    """What Langfuse needs (conventions.md 4.4): types, trace-level fields on every span, models only on LLMs."""
    named = by_name(spans)
    expected_types = {AGENT: "agent", TOOL: "tool", LLM: "generation", TASK: "chain"}
    for name, observation_type in expected_types.items():
        assert named[name].attributes[semconv.LANGFUSE_OBSERVATION_TYPE] == observation_type, name
    for span in spans:
        assert span.attributes[semconv.SESSION_ID] == "sess-1", span.name
        assert span.attributes[semconv.USER_ID] == "user-7", span.name
        assert span.attributes[semconv.LANGFUSE_TRACE_TAGS] == ["beta", "wire"], span.name
        if span.name != LLM:
            present = [key for key in MODEL_ATTRIBUTES if key in span.attributes]
            assert not present, f"{span.name} would become a GENERATION in Langfuse because of {present}"
    assert named[LLM].attributes[semconv.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"


def test_langfuse_gets_auth_ingestion_header_and_langfuse_ready_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPHttpReceiver() as langfuse:
        auth = langfuse_env(monkeypatch, langfuse.base_url)
        handle = evaltrace.configure("wire-langfuse", langfuse=True, local_store=False)
        run_app()
        assert handle.force_flush()
        spans = langfuse.wait_for_spans(4)
        assert_app_spans(spans, "wire-langfuse")
        assert_langfuse_ready(spans)
        for request in langfuse.requests:
            assert request.path == "/api/public/otel/v1/traces"
            assert request.headers["authorization"] == auth
            assert request.headers["x-langfuse-ingestion-version"] == "4"
            assert request.headers["content-type"] == "application/x-protobuf"


def test_jaeger_and_langfuse_at_once_each_get_every_span_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPHttpReceiver() as jaeger, OTLPHttpReceiver() as langfuse:
        langfuse_env(monkeypatch, langfuse.base_url)
        handle = evaltrace.configure("wire-both", otlp_endpoint=jaeger.base_url, local_store=False)
        assert sorted(handle.exporter_names) == ["langfuse", "otlp"]
        run_app()
        assert handle.force_flush()
        to_jaeger = assert_app_spans(jaeger.wait_for_spans(4), "wire-both")
        to_langfuse = assert_app_spans(langfuse.wait_for_spans(4), "wire-both")
        assert {s.span_id for s in to_jaeger.values()} == {s.span_id for s in to_langfuse.values()}
        assert all("authorization" not in r.headers for r in jaeger.requests), "Langfuse keys leaked to Jaeger"


def test_langfuse_given_twice_is_exported_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPHttpReceiver() as langfuse:
        auth = langfuse_env(monkeypatch, langfuse.base_url)
        handle = evaltrace.configure(
            "wire-dup",
            otlp_endpoint=langfuse.base_url + "/api/public/otel/v1/traces",
            headers={"authorization": auth, "x-langfuse-ingestion-version": "4"},
            local_store=False,
        )
        assert len(handle.exporter_names) == 1
        run_app()
        assert handle.force_flush()
        assert_app_spans(langfuse.wait_for_spans(4), "wire-dup")  # also asserts nothing arrived twice
        assert {r.headers["authorization"] for r in langfuse.requests} == {auth}


def test_otlp_endpoint_equal_to_langfuse_keeps_langfuse_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    with OTLPHttpReceiver() as langfuse:
        auth = langfuse_env(monkeypatch, langfuse.base_url)
        handle = evaltrace.configure(
            "wire-dup-noheaders", otlp_endpoint=langfuse.base_url + "/api/public/otel/v1/traces", local_store=False
        )
        run_app()
        assert handle.force_flush()
        langfuse.wait_for_spans(4)
        assert {r.headers.get("authorization") for r in langfuse.requests} == {auth}
