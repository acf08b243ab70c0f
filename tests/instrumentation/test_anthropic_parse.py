"""``messages.parse`` and ``beta.messages.parse`` (structured outputs): the SDK posts them itself, never through
``create``, so they are wrapped on their own. Replayed from tests/fixtures/anthropic through the real client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, Reply, attrs_json, client, fixture_json  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from evaltrace.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402

USER = [
    {"role": "user", "content": "Extract the contact: John Smith (john.smith@example.com) wants an Enterprise demo."}
]


class Contact(BaseModel):
    name: str
    email: str
    plan_interest: str
    demo_requested: bool


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[AnthropicInstrumentor]:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")


def _resource(api: Any, beta: bool) -> Any:
    if not hasattr(api.messages, "parse"):
        pytest.skip("this anthropic has no messages.parse")
    return api.beta.messages if beta else api.messages


async def _parse(api: Any, is_async: bool, beta: bool = False) -> Any:
    result = _resource(api, beta).parse(model=MODEL, max_tokens=1024, messages=USER, output_format=Contact)
    return await result if is_async else result


@pytest.mark.parametrize("beta", [False, True], ids=["messages", "beta"])
async def test_parse_is_traced(beta: bool, is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, server = client([Reply("parse.json")], is_async)
    message = await _parse(api, is_async, beta)
    assert message.parsed_output == Contact(
        name="John Smith", email="john.smith@example.com", plan_interest="Enterprise", demo_requested=True
    )  # the user's result, untouched
    assert len(server.requests) == 1

    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == f"chat {MODEL}"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.request.max_tokens"] == 1024
    assert a["gen_ai.output.type"] == "json"  # structured outputs: Conditionally Required
    assert "gen_ai.request.reasoning.level" not in a  # no effort given
    assert a["gen_ai.response.id"] == "msg_01StructuredOut000001"
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (210, 38)
    assert a["evaltrace.cost_usd"] > 0
    assert attrs_json(span, "gen_ai.input.messages") == [
        {"role": "user", "parts": [{"type": "text", "content": USER[0]["content"]}]}
    ]
    text = fixture_json("parse.json")["content"][0]["text"]
    assert attrs_json(span, "gen_ai.output.messages") == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]
    assert span.status.status_code is StatusCode.UNSET


async def test_parse_error_is_recorded_and_raised_unchanged(is_async: bool, exporter: InMemorySpanExporter) -> None:
    api, _ = client([Reply("error_429.json", 429)], is_async)
    with pytest.raises(anthropic.RateLimitError):
        await _parse(api, is_async)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "rate_limit_error"


SCHEMA = {"type": "json_schema", "schema": Contact.model_json_schema() | {"additionalProperties": False}}


@pytest.mark.parametrize(
    ("output_config", "output_type", "level"),
    [
        ({"format": SCHEMA, "effort": "high"}, "json", "high"),
        ({"format": SCHEMA}, "json", None),
        ({"effort": "low"}, None, "low"),
        ({}, None, None),
    ],
    ids=["format and effort", "format", "effort", "empty"],
)
def test_output_config_gives_the_output_type_and_the_reasoning_level(
    output_config: dict[str, Any], output_type: str | None, level: str | None, exporter: InMemorySpanExporter
) -> None:
    # messages.create with output_config: the JSON-schema format is gen_ai.output.type "json", and the effort is
    # gen_ai.request.reasoning.level, verbatim (Anthropic's own scale), as OpenAI's reasoning_effort is.
    api, server = client([Reply("parse.json")])
    api.messages.create(model=MODEL, max_tokens=1024, messages=USER, output_config=output_config)
    assert server.requests[0]["output_config"] == output_config  # sent as given
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert a.get("gen_ai.output.type") == output_type
    assert a.get("gen_ai.request.reasoning.level") == level
    params = json.loads(a["langfuse.observation.model.parameters"])
    assert params.get("effort") == level


def test_a_type_expression_parse_accepts_is_a_json_output_too() -> None:
    # parse() takes any type its TypeAdapter can read (list[Contact], a union), not only a class.
    from evaltrace._internal.anthropic.request import request_attributes

    for output_format in (Contact, list[Contact], Contact | None, {"type": "json_schema", "schema": {}}):
        assert request_attributes({"output_format": output_format})["gen_ai.output.type"] == "json", output_format
    for output_format in (None, {"type": "text"}, "json"):
        assert "gen_ai.output.type" not in request_attributes({"output_format": output_format}), output_format
