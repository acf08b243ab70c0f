"""Groq's grounded answers, compound usage and service tier, through the real ``groq`` client on 127.0.0.1.

``documents`` / ``citation_options`` in the request, ``annotations`` (citations) in the answer, whole and streamed,
``usage_breakdown`` (a compound model's usage per model, and the cost it gives) and ``service_tier``. The usage
breakdown is the recorded ``compound-beta`` web searches' (tests/fixtures/groq-cassettes); no recording has
documents, annotations or a streamed service tier, so those responses are made here in the SDK's own types' shape
(``ChatCompletion``, ``ChatCompletionChunk``), and the requests are typed with the SDK's param types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")

from groq.types.chat import ChatCompletionMessageParam  # noqa: E402
from groq.types.chat.completion_create_params import Document  # noqa: E402
from groq_replay import WEB_SEARCH, WEB_SEARCH_STREAM, call_kwargs, groq_client, interactions, served, server  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import ReplayServer  # noqa: E402
from evaltrace import pricing  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace._internal import settings  # noqa: E402


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_groq()
    yield
    evaltrace.uninstrument_groq()


pytestmark = pytest.mark.usefixtures("instrumented")

MODEL = "llama-3.3-70b-versatile"
DOCUMENTS: list[Document] = [
    {"id": "menu", "source": {"type": "text", "text": "Soup costs 5 euros."}},
    {"id": "hours", "source": {"type": "json", "data": {"opens": "9h", "café": True}}},
]
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "Answer from the documents."},
    {"role": "user", "content": "What does soup cost?"},
]
ANSWER = "Soup costs 5 euros [menu]."
ANNOTATIONS = [
    {"type": "document_citation", "document_citation": {"document_id": "menu", "start_index": 0, "end_index": 19}},
    {"type": "function_citation", "function_citation": {"tool_call_id": "call_7", "start_index": 20, "end_index": 26}},
]
CITATIONS = [
    {"type": "document_citation", "source": "menu", "start_index": 0, "end_index": 19},
    {"type": "function_citation", "source": "call_7", "start_index": 20, "end_index": 26},
]


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _json(span: ReadableSpan, key: str) -> Any:
    return json.loads(str(_attributes(span)[key]))


def _completion(message: dict[str, Any], **top: Any) -> bytes:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}, **top}  # fmt: skip
    return json.dumps(body).encode()


def _stream(events: list[dict[str, Any]]) -> bytes:
    lines = [f"data: {json.dumps({'id': 'chatcmpl-1', 'object': 'chat.completion.chunk', 'created': 1, **e})}\n\n"
             for e in events]  # fmt: skip
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def _chunk(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    return {"model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top}


async def _create(url: str, is_async: bool, **kwargs: Any) -> Any:
    client = groq_client(url, is_async)
    result = client.chat.completions.create(**kwargs)
    if is_async:
        result = await result
        if kwargs.get("stream"):
            result = [chunk async for chunk in result]
        await client.close()
    else:
        if kwargs.get("stream"):
            result = list(result)
        client.close()
    return result


async def test_documents_are_input_and_annotations_are_citations(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    """The documents: one user message of their text after the system message; the citations on the answer."""
    with ReplayServer([served(_completion({"content": ANSWER, "annotations": ANNOTATIONS}))]) as srv:
        answer = await _create(
            srv.url, is_async, model=MODEL, messages=MESSAGES, documents=DOCUMENTS, citation_options="enabled"
        )
        sent = srv.received[0].json()
    assert sent["documents"] == DOCUMENTS and sent["citation_options"] == "enabled"
    assert answer.choices[0].message.annotations[0].document_citation.document_id == "menu"
    (span,) = exporter.get_finished_spans()
    assert _attributes(span)[sc.GROQ_REQUEST_CITATION_OPTIONS] == "enabled"
    assert _json(span, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "system", "parts": [{"type": "text", "content": "Answer from the documents."}]},
        {
            "role": "user",
            "parts": [
                # Each document's id on its part: the citations name it.
                # Marked documents (the RAG evaluators' context, test_request_documents_context.py).
                {"type": "text", "content": "Soup costs 5 euros.", "document": True, "id": "menu"},
                {"type": "text", "content": '{"opens": "9h", "café": true}', "document": True, "id": "hours"},
            ],
        },
        {"role": "user", "parts": [{"type": "text", "content": "What does soup cost?"}]},
    ]
    (message,) = _json(span, sc.GEN_AI_OUTPUT_MESSAGES)
    assert message["parts"] == [{"type": "text", "content": ANSWER, "citations": CITATIONS}]


def test_documents_without_content_capture_are_not_recorded(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([served(_completion({"content": ANSWER, "annotations": ANNOTATIONS}))]) as srv:
            with groq_client(srv.url, False) as client:
                client.chat.completions.create(model=MODEL, messages=MESSAGES, documents=DOCUMENTS)
    finally:
        settings.replace(previous)
    (span,) = exporter.get_finished_spans()
    attrs = _attributes(span)
    assert sc.GEN_AI_INPUT_MESSAGES not in attrs and sc.GEN_AI_OUTPUT_MESSAGES not in attrs
    assert "Soup" not in json.dumps(attrs)


def test_documents_without_system_message_come_first(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([served(_completion({"content": ANSWER}))]) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model=MODEL, messages=MESSAGES[1:], documents=DOCUMENTS[:1])
    (span,) = exporter.get_finished_spans()
    assert [m["role"] for m in _json(span, sc.GEN_AI_INPUT_MESSAGES)] == ["user", "user"]
    assert _json(span, sc.GEN_AI_INPUT_MESSAGES)[0]["parts"] == [
        {"type": "text", "content": "Soup costs 5 euros.", "document": True, "id": "menu"}
    ]
    assert sc.GROQ_REQUEST_CITATION_OPTIONS not in _attributes(span)


def test_a_document_without_contents_gives_no_part(exporter: InMemorySpanExporter) -> None:
    """A ``text`` source whose ``text`` is no string (or a source without data) records no part, not "null"; a
    document without an id has a part without one."""
    documents: Any = [
        {"id": "bad", "source": {"type": "text", "text": None}},
        {"source": {"type": "json", "data": None}},
        {"source": {"type": "text", "text": "Soup costs 5 euros."}},
    ]
    with ReplayServer([served(_completion({"content": ANSWER}))] * 2) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model=MODEL, messages=MESSAGES[1:], documents=documents)
        client.chat.completions.create(model=MODEL, messages=MESSAGES[1:], documents=documents[:2])
    first, second = exporter.get_finished_spans()
    assert _json(first, sc.GEN_AI_INPUT_MESSAGES)[0] == {
        "role": "user",
        "parts": [{"type": "text", "content": "Soup costs 5 euros.", "document": True}],
    }
    assert _json(second, sc.GEN_AI_INPUT_MESSAGES) == [
        {"role": "user", "parts": [{"type": "text", "content": "What does soup cost?"}]}
    ]


async def test_streamed_annotations_are_the_answers_citations(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """Citations sent over several chunks (one repeated) are the streamed answer's, each once."""
    events = [
        _chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_1"}),
        _chunk({"content": "Soup costs 5 euros", "annotations": ANNOTATIONS[:1]}),
        _chunk({"content": " [menu]."}),
        _chunk({"annotations": ANNOTATIONS}, "stop"),
        _chunk({}, x_groq={"id": "req_1", "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}),
    ]
    with ReplayServer([served(_stream(events), stream=True)]) as srv:
        chunks = await _create(srv.url, is_async, model=MODEL, messages=MESSAGES, documents=DOCUMENTS, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
    (span,) = exporter.get_finished_spans()
    (message,) = _json(span, sc.GEN_AI_OUTPUT_MESSAGES)
    assert message["parts"] == [{"type": "text", "content": ANSWER, "citations": CITATIONS}]
    assert _attributes(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 40


def _breakdown_cost(breakdown: dict[str, Any]) -> float:
    """The cost of each model's usage at that model's price, summed (computed here from the public pricing API)."""
    total = 0.0
    for entry in breakdown["models"]:
        usage = entry["usage"]
        cost = pricing.cost_of(
            entry["model"],
            input_tokens=usage["prompt_tokens"],
            output_tokens=usage["completion_tokens"],
            provider="groq",
        )
        assert cost is not None
        total += cost.total_usd
    return total


def _entries(breakdown: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "model": m["model"],
            "input_tokens": m["usage"]["prompt_tokens"],
            "output_tokens": m["usage"]["completion_tokens"],
        }
        for m in breakdown["models"]
    ]


def test_compound_usage_breakdown_is_recorded_and_priced(exporter: InMemorySpanExporter) -> None:
    """The recorded ``compound-beta`` answer: total usage as ``gen_ai.usage.*``, each model's usage, and the cost
    of each model's tokens at its price (the compound model itself has none)."""
    (item,) = interactions(WEB_SEARCH)
    recorded = json.loads(item.body)
    assert pricing.price_of(recorded["model"], "groq") is None
    with server(WEB_SEARCH) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(**call_kwargs(item))
    (span,) = exporter.get_finished_spans()
    attrs = _attributes(span)
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == recorded["usage"]["prompt_tokens"] == 5296
    assert attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == recorded["usage"]["completion_tokens"]
    assert _json(span, sc.GROQ_USAGE_BREAKDOWN) == _entries(recorded["usage_breakdown"])
    assert attrs[sc.EVALTRACE_COST_USD] == pytest.approx(_breakdown_cost(recorded["usage_breakdown"]))
    details = _json(span, sc.LANGFUSE_OBSERVATION_COST_DETAILS)
    assert details["total"] == pytest.approx(attrs[sc.EVALTRACE_COST_USD])


def test_streamed_compound_usage_breakdown_is_recorded_but_not_summed_into_a_cost(
    exporter: InMemorySpanExporter,
) -> None:
    """The recorded stream's ``x_groq`` breakdown repeats the whole total in each entry (it is no partition of the
    usage, unlike a whole answer's): recorded as given, but its sum would price the call several times over, so
    the cost stays the total's (none: the compound model has no price)."""
    (item,) = interactions(WEB_SEARCH_STREAM)
    last = json.loads([line for line in item.body.decode().split("\n") if line.startswith("data: {")][-1][6:])
    breakdown = last["x_groq"]["usage_breakdown"]
    usage = last["x_groq"]["usage"]
    assert sum(m["usage"]["prompt_tokens"] for m in breakdown["models"]) > usage["prompt_tokens"]
    with server(WEB_SEARCH_STREAM) as srv, groq_client(srv.url, False) as client:
        for _ in client.chat.completions.create(**call_kwargs(item)):
            pass
    (span,) = exporter.get_finished_spans()
    attrs = _attributes(span)
    assert attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] == usage["prompt_tokens"]
    assert _json(span, sc.GROQ_USAGE_BREAKDOWN) == _entries(breakdown)
    assert sc.EVALTRACE_COST_USD not in attrs
    assert sc.LANGFUSE_OBSERVATION_COST_DETAILS not in attrs


def test_a_breakdown_that_is_no_partition_leaves_the_totals_cost(exporter: InMemorySpanExporter) -> None:
    """A priced model's call whose breakdown does not sum to its usage: the cost is the total's, not the sum's."""
    usage = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    breakdown = {"models": [{"model": MODEL, "usage": usage}, {"model": MODEL, "usage": usage}]}
    body = _completion({"content": "Hi."}, usage_breakdown=breakdown)
    with ReplayServer([served(body)]) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model=MODEL, messages=MESSAGES)
    (span,) = exporter.get_finished_spans()
    expected = pricing.cost_of(MODEL, input_tokens=40, output_tokens=9, provider="groq")
    assert expected is not None
    assert _attributes(span)[sc.EVALTRACE_COST_USD] == pytest.approx(expected.total_usd)
    assert len(_json(span, sc.GROQ_USAGE_BREAKDOWN)) == 2


def test_a_breakdown_with_an_unpriced_model_gives_no_partial_cost(exporter: InMemorySpanExporter) -> None:
    usage = {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}
    breakdown = {"models": [{"model": MODEL, "usage": usage}, {"model": "no-such-model", "usage": usage}]}
    body = _completion({"content": "Hi."}, usage_breakdown=breakdown, model="groq/compound")
    with ReplayServer([served(body)]) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model="groq/compound", messages=MESSAGES)
    (span,) = exporter.get_finished_spans()
    attrs = _attributes(span)
    assert [e["model"] for e in _json(span, sc.GROQ_USAGE_BREAKDOWN)] == [MODEL, "no-such-model"]
    assert sc.EVALTRACE_COST_USD not in attrs


def test_a_breakdown_entrys_reasoning_tokens_give_the_thinking_cost(exporter: InMemorySpanExporter) -> None:
    """An entry counting reasoning tokens (a reasoning model run by the compound model): its reasoning share is
    priced and written as the call's thinking cost, next to the summed total."""
    thinker = "openai/gpt-oss-120b"
    router = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
    reasoner = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                "completion_tokens_details": {"reasoning_tokens": 3}}  # fmt: skip
    breakdown = {"models": [{"model": MODEL, "usage": router}, {"model": thinker, "usage": reasoner}]}
    body = _completion({"content": "Hi."}, usage_breakdown=breakdown, model="groq/compound")
    with ReplayServer([served(body)]) as srv, groq_client(srv.url, False) as client:
        client.chat.completions.create(model="groq/compound", messages=MESSAGES)
    (span,) = exporter.get_finished_spans()
    attrs = _attributes(span)
    first = pricing.cost_of(MODEL, input_tokens=30, output_tokens=4, provider="groq")
    second = pricing.cost_of(thinker, input_tokens=10, output_tokens=5, reasoning_tokens=3, provider="groq")
    assert first is not None and second is not None and second.reasoning_usd > 0
    assert attrs[sc.EVALTRACE_COST_USD] == pytest.approx(first.total_usd + second.total_usd)
    assert attrs[sc.EVALTRACE_COST_THINKING_USD] == pytest.approx(second.reasoning_usd)
    assert _json(span, sc.GROQ_USAGE_BREAKDOWN)[1]["reasoning_output_tokens"] == 3


@pytest.mark.parametrize("where", ["first chunk", "last chunk", "x_groq"])
def test_a_streamed_service_tier_is_recorded_as_the_whole_answers(where: str, exporter: InMemorySpanExporter) -> None:
    """Wherever a stream carries it (groq's chunk type declares none), the tier is the attribute a whole answer's
    ``service_tier`` is written as."""
    usage = {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
    first = _chunk({"role": "assistant", "content": "Hi"}, x_groq={"id": "req_1"})
    last = _chunk({}, "stop", x_groq={"id": "req_1", "usage": usage})
    if where == "first chunk":
        first["service_tier"] = "flex"
    elif where == "last chunk":
        last["service_tier"] = "flex"
    else:
        last["x_groq"]["service_tier"] = "flex"
    whole = _completion({"content": "Hi"}, service_tier="flex")
    with ReplayServer([served(whole), served(_stream([first, last]), stream=True)]) as srv:
        with groq_client(srv.url, False) as client:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, service_tier="flex")
            for _ in client.chat.completions.create(model=MODEL, messages=MESSAGES, service_tier="flex", stream=True):
                pass
    whole_span, streamed = exporter.get_finished_spans()
    assert _attributes(whole_span)[sc.OPENAI_RESPONSE_SERVICE_TIER] == "flex"
    assert _attributes(streamed)[sc.OPENAI_RESPONSE_SERVICE_TIER] == "flex"
    assert (
        _attributes(streamed)[sc.OPENAI_REQUEST_SERVICE_TIER] == _attributes(whole_span)[sc.OPENAI_REQUEST_SERVICE_TIER]
    )
