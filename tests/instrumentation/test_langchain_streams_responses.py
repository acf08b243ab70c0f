"""A streamed ``ChatOpenAI`` Responses call that ends short, recorded by the LangChain handler as ``instrument_openai()``
records the same stream: cut at ``max_output_tokens``, failed, or handed back ``failed`` / ``cancelled``.

The recorded Responses stream is re-served on 127.0.0.1 with its last event replaced (see langchain_stream_replay);
the same body is read once more by the plain openai client under ``instrument_openai()``, and the two spans are
compared. Sections 1 and 2 of the LangChain stream tests; 3 to 5 are in test_langchain_streams.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_replay import langchain_instrumented
from langchain_stream_replay import PROMPT, langchain_span, own_client, responses_events, served, sync_model
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from cassettes import ReplayServer

pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.usefixtures("provider", "capture")

# What instrument_openai() records of how a stream ended, compared key by key.
ENDING = (
    "gen_ai.response.finish_reasons",
    "evaltrace.stream.end_reason",
    "evaltrace.stream.completed",
    "error.type",
)


async def _read(model: Any, is_async: bool) -> list[Any]:
    if is_async:
        return [chunk async for chunk in model.astream(PROMPT)]
    return list(model.stream(PROMPT))


def _direct(events: list[dict[str, Any]], exporter: InMemorySpanExporter) -> tuple[ReadableSpan, dict[str, Any]]:
    """The span ``instrument_openai()`` records of the same body read by the plain openai client."""
    import openai

    import evaltrace

    evaltrace.instrument_openai()
    try:
        with ReplayServer([served(events)]) as server:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as client:
                list(client.responses.create(model="gpt-4o-mini", input=PROMPT, stream=True))
    finally:
        evaltrace.uninstrument_openai()
    (span,) = exporter.get_finished_spans()
    exporter.clear()
    return span, dict(span.attributes or {})


def _ending(attrs: dict[str, Any]) -> dict[str, Any]:
    return {key: attrs.get(key) for key in ENDING}


# --- 1. a Responses stream cut at max_output_tokens -------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_an_incomplete_responses_stream_records_what_instrument_openai_records(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """``response.incomplete`` (max_output_tokens): finish reason ``max_output_tokens``, end reason ``incomplete``,
    not completed, no error: the answer was cut by the API, as instrument_openai() says of the same stream."""
    events = responses_events("incomplete")
    direct, expected = _direct(events, exporter)
    with ReplayServer([served(events)]) as server, langchain_instrumented(restored=False):
        async with own_client(server.url, is_async, use_responses_api=True) as model:
            chunks = await _read(model, is_async)
    assert "".join(c.text for c in chunks) == "This is a test."
    span, attrs = langchain_span(exporter)
    assert _ending(attrs) == _ending(expected)
    assert _ending(attrs) == {
        "gen_ai.response.finish_reasons": ("max_output_tokens",),
        "evaltrace.stream.end_reason": "incomplete",
        "evaltrace.stream.completed": False,
        "error.type": None,
    }
    assert span.status.status_code is direct.status.status_code is StatusCode.UNSET


def test_a_completed_responses_stream_is_still_exhausted(exporter: InMemorySpanExporter) -> None:
    events = responses_events("completed")
    _, expected = _direct(events, exporter)
    with ReplayServer([served(events)]) as server, langchain_instrumented():
        with sync_model(server.url, use_responses_api=True) as model:
            list(model.stream(PROMPT))
    _, attrs = langchain_span(exporter)
    assert _ending(attrs) == _ending(expected)
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("exhausted", True)


# --- 2. a failed (or cancelled) Responses stream ------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_response_failed_stream_is_failed_as_instrument_openai_fails_it(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """langchain-openai raises a ``ValueError`` carrying the response's error for ``response.failed``: the span
    names the API's failure (its code, ``"{code}: {message}"``), not the ValueError, and the stream ended in error."""
    events = responses_events("failed")
    direct, expected = _direct(events, exporter)
    with ReplayServer([served(events)]) as server, langchain_instrumented(restored=False):
        async with own_client(server.url, is_async, use_responses_api=True) as model:
            with pytest.raises(ValueError, match="server_error"):  # the integration's error reaches the app unchanged
                await _read(model, is_async)
    span, attrs = langchain_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == direct.status.description == "server_error: The server had an error."
    assert attrs["error.type"] == expected["error.type"] == "server_error"
    assert (attrs["evaltrace.stream.end_reason"], attrs["evaltrace.stream.completed"]) == ("error", False)
    assert (expected["evaltrace.stream.end_reason"], expected["evaltrace.stream.completed"]) == ("error", False)


@pytest.mark.parametrize(("status", "failed"), [("failed", True), ("cancelled", False)], ids=["failed", "cancelled"])
def test_a_responses_answer_ending_failed_or_cancelled_in_on_llm_end(
    status: str, failed: bool, exporter: InMemorySpanExporter
) -> None:
    """A terminal response whose status is ``failed`` that the integration hands back (no error object, so it does
    not raise: the run reaches ``on_llm_end``) fails the span as ``responses_failure`` names it; ``cancelled`` is
    stopped, not failed: no error, as instrument_openai() records the same body."""
    events = responses_events(f"status:{status}")
    direct, expected = _direct(events, exporter)
    with ReplayServer([served(events)]) as server, langchain_instrumented():
        with sync_model(server.url, use_responses_api=True) as model:
            list(model.stream(PROMPT))
    span, attrs = langchain_span(exporter)
    assert span.status.status_code is direct.status.status_code
    assert span.status.description == direct.status.description
    assert attrs.get("error.type") == expected.get("error.type")
    assert attrs["gen_ai.response.finish_reasons"] == expected["gen_ai.response.finish_reasons"] == ("error",)
    assert attrs["evaltrace.stream.completed"] is False if failed else True
    if failed:
        assert span.status.status_code is StatusCode.ERROR
        assert (span.status.description, attrs["error.type"]) == ("_OTHER", "_OTHER")
        assert attrs["evaltrace.stream.end_reason"] == "error"
        assert not [e for e in span.events if e.name == "exception"]  # nothing was raised
    else:
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in attrs
