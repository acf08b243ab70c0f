"""Every recorded cassette, replayed through the real sync and async clients, yields exactly the right span."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai_replay import Interaction, client, drain, load, method_for, resource_for, skip_unless_accepts
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tests_paths import CASSETTES

from evaltrace.instrumentation.openai import OpenAIInstrumentor

_PARAMS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
    "dimensions": "gen_ai.embeddings.dimension.count",
    "service_tier": "openai.request.service_tier",
    "previous_response_id": "gen_ai.request.previous_response.id",
}


@pytest.mark.usefixtures("cassettes")
@pytest.mark.parametrize("path", CASSETTES, ids=[p.stem for p in CASSETTES])
async def test_every_cassette_replays_into_one_correct_span_per_call(
    path: Any, is_async: bool, instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    interactions = load(path)
    for item in interactions:  # Responses cassettes need client.responses; newer request fields, a client that has them
        skip_unless_accepts(f"{resource_for(item.path)}.create", *item.request)
    api, server = client(interactions, is_async)
    for item in interactions:
        await _call(api, item, is_async)
    assert not server.pending
    spans = exporter.get_finished_spans()
    assert len(spans) == len(interactions)
    for span, item in zip(spans, interactions, strict=True):
        _check_common(span, item)
        if item.status >= 400:
            _check_error(span, item)
        elif item.is_sse:
            _check_stream(span, item)
        else:
            _check_response(span, item)


async def _call(api: Any, item: Interaction, is_async: bool) -> None:
    method = method_for(api, item.path)
    try:
        result = method(**item.request)
        if is_async:
            result = await result
        if item.request.get("stream"):
            chunks = await drain(result, is_async)
            assert len(chunks) == len(item.sse_events())
    except openai.APIStatusError as error:
        assert error.status_code == item.status >= 400


def _check_common(span: ReadableSpan, item: Interaction) -> None:
    attrs = span.attributes or {}
    body = item.request
    embeddings = item.path.endswith("/embeddings")
    op = "embeddings" if embeddings else "chat"
    assert span.name == f"{op} {body['model']}"
    assert span.kind is SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == op
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == body["model"]
    assert attrs["server.address"] == "api.openai.com"
    assert attrs["server.port"] == 443
    assert attrs["evaltrace.span.kind"] == ("embedding" if embeddings else "llm")
    assert attrs["langfuse.observation.type"] == ("embedding" if embeddings else "generation")
    if not embeddings:
        api_type = "responses" if item.path.endswith("/responses") else "chat_completions"
        assert attrs["openai.api.type"] == api_type
    for key, name in _PARAMS.items():
        assert attrs.get(name) == body.get(key)
    assert attrs.get("gen_ai.request.max_tokens") == body.get("max_tokens", body.get("max_output_tokens"))
    n = body.get("n")
    assert attrs.get("gen_ai.request.choice.count") == (n if n != 1 else None)
    assert attrs.get("gen_ai.request.stream") == (True if body.get("stream") else None)
    stop = body.get("stop")
    assert attrs.get("gen_ai.request.stop_sequences") == ((stop,) if isinstance(stop, str) else None)
    fmt = body.get("encoding_format")
    assert attrs.get("gen_ai.request.encoding_formats") == ((fmt,) if fmt else None)
    effort = (body.get("reasoning") or {}).get("effort")
    assert attrs.get("gen_ai.request.reasoning.level") == effort
    _check_model_parameters(attrs, body, embeddings)


# Request keywords the recordings use that are model parameters (all scalars, as Langfuse wants them).
_MODEL_PARAMETERS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_output_tokens",
    "seed",
    "n",
    "stop",
    "service_tier",
    "stream",
)


def _check_model_parameters(attrs: Any, body: dict[str, Any], embeddings: bool) -> None:
    expected = {key: body[key] for key in _MODEL_PARAMETERS if key in body}
    if "reasoning" in body:
        expected["reasoning_effort"] = body["reasoning"]["effort"]
    fmt = body.get("response_format") or (body.get("text") or {}).get("format")
    if fmt:
        expected["response_format"] = fmt["type"]
    if embeddings or not expected:
        assert "langfuse.observation.model.parameters" not in attrs
        return
    parameters = attrs["langfuse.observation.model.parameters"]
    assert isinstance(parameters, str) and json.loads(parameters) == expected
    assert all(isinstance(v, str | int | float | bool) for v in json.loads(parameters).values())


def _check_error(span: ReadableSpan, item: Interaction) -> None:
    attrs = span.attributes or {}
    assert span.status.status_code is StatusCode.ERROR
    assert attrs["error.type"] == item.json["error"]["code"]
    assert attrs["http.response.status_code"] == item.status
    (event,) = [e for e in span.events if e.name == "exception"]
    expected = {404: "NotFoundError", 400: "BadRequestError"}[item.status]
    assert (event.attributes or {})["exception.type"].endswith(expected)
    assert "gen_ai.response.id" not in attrs


def _usage_attrs(usage: dict[str, Any] | None, responses: bool) -> dict[str, Any]:
    if usage is None:
        return {}
    if responses:
        return {
            "gen_ai.usage.input_tokens": usage["input_tokens"],
            "gen_ai.usage.output_tokens": usage["output_tokens"],
            "gen_ai.usage.cache_read.input_tokens": usage["input_tokens_details"]["cached_tokens"],
            "gen_ai.usage.reasoning.output_tokens": usage["output_tokens_details"]["reasoning_tokens"],
        }
    out = {"gen_ai.usage.input_tokens": usage["prompt_tokens"]}
    if "completion_tokens" in usage:
        out["gen_ai.usage.output_tokens"] = usage["completion_tokens"]
    if usage.get("prompt_tokens_details"):
        out["gen_ai.usage.cache_read.input_tokens"] = usage["prompt_tokens_details"]["cached_tokens"]
    if usage.get("completion_tokens_details"):
        out["gen_ai.usage.reasoning.output_tokens"] = usage["completion_tokens_details"]["reasoning_tokens"]
    return out


def _assert_usage(attrs: Any, expected: dict[str, Any]) -> None:
    actual = {k: v for k, v in attrs.items() if k.startswith("gen_ai.usage.")}
    assert actual == expected


def _check_response(span: ReadableSpan, item: Interaction) -> None:
    attrs = span.attributes or {}
    body = item.json
    assert span.status.status_code is StatusCode.UNSET
    assert attrs["gen_ai.response.model"] == body["model"]
    responses = item.path.endswith("/responses")
    _assert_usage(attrs, _usage_attrs(body.get("usage"), responses))
    if item.path.endswith("/embeddings"):
        assert "gen_ai.response.id" not in attrs
        return
    assert attrs["gen_ai.response.id"] == body["id"]
    if responses:
        has_call = any(o["type"] == "function_call" for o in body["output"])
        assert attrs["gen_ai.response.finish_reasons"] == ("tool_call" if has_call else "stop",)
    else:
        assert attrs["gen_ai.response.finish_reasons"] == tuple(c["finish_reason"] for c in body["choices"])
    assert "evaltrace.stream.chunks" not in attrs


def _check_stream(span: ReadableSpan, item: Interaction) -> None:
    attrs = span.attributes or {}
    events = item.sse_events()
    assert attrs["evaltrace.stream.chunks"] == len(events)
    assert attrs["evaltrace.stream.completed"] is True
    assert attrs["evaltrace.stream.end_reason"] == "exhausted"
    assert 0 <= attrs["gen_ai.response.time_to_first_chunk"] <= attrs["evaltrace.stream.time_to_last_chunk"]
    assert str(attrs["langfuse.observation.completion_start_time"]).endswith("+00:00")
    if item.path.endswith("/responses"):
        (final,) = [e["response"] for e in events if e["type"] == "response.completed"]
        assert attrs["gen_ai.response.id"] == final["id"]
        assert attrs["gen_ai.response.model"] == final["model"]
        _assert_usage(attrs, _usage_attrs(final["usage"], True))
        return
    assert attrs["gen_ai.response.id"] == events[0]["id"]
    assert attrs["gen_ai.response.model"] == events[0]["model"]
    reasons = {c["index"]: c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")}
    assert attrs.get("gen_ai.response.finish_reasons", ()) == tuple(reasons[i] for i in sorted(reasons))
    usage = next((e["usage"] for e in events if e.get("usage")), None)
    _assert_usage(attrs, _usage_attrs(usage, False))
    if usage is None:
        assert "evaltrace.stream.output_tokens_per_second" not in attrs
