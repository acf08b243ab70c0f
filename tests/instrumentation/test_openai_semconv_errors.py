"""Error recording (conventions.md 1.2 "Recording Errors") for failures the recordings do not contain."""

from __future__ import annotations

from typing import Any

import pytest
from openai_replay import client, drain, json_interaction, sse_interaction
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

pytestmark = [pytest.mark.usefixtures("instrumented"), pytest.mark.openai_api("responses")]


def _response(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o-2024-08-06",
        "status": status,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **extra,
    }


def _events(terminal: dict[str, Any]) -> list[dict[str, Any]]:
    created = {"type": "response.created", "sequence_number": 0, "response": _response("in_progress")}
    return [created, {**terminal, "sequence_number": 1}]


async def _stream(events: list[dict[str, Any]], is_async: bool) -> None:
    api, _ = client([sse_interaction("/v1/responses", events)], is_async)
    result = api.responses.create(model="gpt-4o", input="Hello", stream=True)
    if is_async:
        result = await result
    await drain(result, is_async)


async def test_a_failed_response_stream_marks_the_span_failed_with_the_provider_error_code(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The SDK raises nothing for ``response.failed``; the span still gets ERROR and ``error.type`` = the code.

    conventions.md 1.2: "on failure set status ERROR and error.type. error.type is the provider error code".
    """
    usage = {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 7,
    }
    failed = _response("failed", error={"code": "server_error", "message": "The server had an error."}, usage=usage)
    await _stream(_events({"type": "response.failed", "response": failed}), is_async)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "server_error: The server had an error."
    assert attrs["error.type"] == "server_error"
    assert attrs["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs["gen_ai.usage.input_tokens"] == 7  # the failed response is kept
    assert not span.events  # nothing was raised, so no exception event


async def test_a_failed_response_without_a_code_is_other(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """conventions.md 1.2: error.type is the provider code, an exception type, "or ``_OTHER``"."""
    await _stream(_events({"type": "response.failed", "response": _response("failed")}), is_async)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "_OTHER"


async def test_completed_and_incomplete_response_streams_stay_unset(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    incomplete = _response("incomplete", incomplete_details={"reason": "max_output_tokens"})
    await _stream(_events({"type": "response.incomplete", "response": incomplete}), is_async)
    await _stream(_events({"type": "response.completed", "response": _response("completed")}), is_async)
    spans = exporter.get_finished_spans()
    assert [span.status.status_code for span in spans] == [StatusCode.UNSET, StatusCode.UNSET]
    assert all("error.type" not in (span.attributes or {}) for span in spans)
    assert [(span.attributes or {})["gen_ai.response.finish_reasons"] for span in spans] == [
        ("max_output_tokens",),
        ("stop",),
    ]


async def test_a_failed_response_body_marks_the_span_failed(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """Not streamed: HTTP 200 with ``status: failed`` in the body; the SDK returns it without raising."""
    failed = _response("failed", error={"code": "rate_limit_exceeded", "message": "Slow down."})
    api, _ = client([json_interaction("/v1/responses", failed)], is_async)
    result = api.responses.create(model="gpt-4o", input="Hello")
    if is_async:
        result = await result
    assert result.status == "failed"  # the user still gets the response as the SDK returned it
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "rate_limit_exceeded: Slow down."
    assert (span.attributes or {})["error.type"] == "rate_limit_exceeded"
    assert (span.attributes or {})["gen_ai.response.id"] == "resp_1"
    assert not span.events
