"""``instrument_cohere()``: v2 ``embed`` and ``rerank`` through the real ``cohere`` client, sync and async.

No recording of ``/v2/embed`` or ``/v2/rerank`` exists in the fixture sets: the responses are built from the SDK's
own types (``EmbedByTypeResponse``, ``V2RerankResponse``, ``ApiMeta``; cohere_replay.made) and served by the
replay server on 127.0.0.1; the requests are what the SDK really sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import cohere
import pytest
from cohere import types as t
from cohere.v2 import types as v2
from cohere_replay import async_client_of, client_of, made
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import Recorded, ReplayServer
from evaltrace._internal import settings
from evaltrace.instrumentation.cohere import CohereInstrumentor


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[CohereInstrumentor]:
    instrumentor = CohereInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = pytest.mark.usefixtures("instrumented")

EMBED_MODEL = "embed-v4.0"
RERANK_MODEL = "rerank-v3.5"
DOCUMENTS = ["Paris is in France.", "Berlin is in Germany.", "The Seine flows through Paris."]


def _embedded() -> t.EmbedByTypeResponse:
    return t.EmbedByTypeResponse(
        id="embed-1",
        response_type="embeddings_by_type",
        embeddings=t.EmbedByTypeResponseEmbeddings(float_=[[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]),
        texts=["hello", "goodbye"],
        meta=t.ApiMeta(billed_units=t.ApiMetaBilledUnits(input_tokens=2), tokens=t.ApiMetaTokens(input_tokens=4)),
    )


def _reranked() -> v2.V2RerankResponse:
    return v2.V2RerankResponse(
        id="rerank-1",
        results=[
            v2.V2RerankResponseResultsItem(index=2, relevance_score=0.91),
            v2.V2RerankResponseResultsItem(index=0, relevance_score=0.62),
        ],
        meta=t.ApiMeta(billed_units=t.ApiMetaBilledUnits(search_units=1)),
    )


async def _call(url: str, is_async: bool, method: str, raw: bool = False, **kwargs: Any) -> Any:
    if is_async:
        async with async_client_of(url) as client:
            target = client.with_raw_response if raw else client
            return await getattr(target, method)(**kwargs)
    with client_of(url) as client:
        target = client.with_raw_response if raw else client
        return getattr(target, method)(**kwargs)


async def test_embed_is_an_embeddings_span_with_usage_billed_units_and_dimensions(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([made("/v2/embed", _embedded())]) as server:
        response = await _call(server.url, is_async, "embed", model=EMBED_MODEL, input_type="search_document",
                               texts=["hello", "goodbye"], embedding_types=["float"], output_dimension=1024)  # fmt: skip
        sent = server.received[0].json()
    assert response.embeddings.float_[0] == [0.1, 0.2, 0.3, 0.4]  # the SDK's result, untouched
    assert sent["texts"] == ["hello", "goodbye"]
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == f"embeddings {EMBED_MODEL}"
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["evaltrace.span.kind"] == "embedding"
    assert a["gen_ai.provider.name"] == "cohere"
    assert a["gen_ai.request.model"] == EMBED_MODEL
    assert a["gen_ai.request.encoding_formats"] == ("float",)
    assert a["gen_ai.response.id"] == "embed-1"
    assert a["gen_ai.embeddings.dimension.count"] == 4  # what came back (the request asked 1024)
    assert a["gen_ai.usage.input_tokens"] == 2  # what is billed: the token metric's count
    assert a["cohere.usage.billed_units.input_tokens"] == 2
    assert a["cohere.usage.tokens.input_tokens"] == 4  # the model's tokens, beside them
    assert json.loads(a["input.value"]) == ["hello", "goodbye"]
    assert json.loads(a["langfuse.observation.model.parameters"]) == {
        "input_type": "search_document",
        "output_dimension": 1024,
    }


async def test_embed_through_the_raw_client_is_one_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v2/embed", _embedded())]) as server:
        raw = await _call(server.url, is_async, "embed", raw=True, model=EMBED_MODEL, input_type="search_query",
                          texts=["hello"])  # fmt: skip
    assert raw.data.id == "embed-1"
    (span,) = exporter.get_finished_spans()
    assert span.attributes["gen_ai.response.id"] == "embed-1"
    assert span.attributes["gen_ai.usage.input_tokens"] == 2


async def test_embed_image_inputs_keep_no_payload(exporter: InMemorySpanExporter) -> None:
    image = "data:image/png;base64," + "A" * 400
    inputs = [{"content": [{"type": "text", "text": "a cat"}, {"type": "image_url", "image_url": {"url": image}}]}]
    with ReplayServer([made("/v2/embed", _embedded())]) as server:
        await _call(server.url, False, "embed", model=EMBED_MODEL, input_type="image", images=[image], inputs=inputs)
    (span,) = exporter.get_finished_spans()
    value = span.attributes["input.value"]
    assert "AAAA" not in value
    assert json.loads(value) == [
        "data:image/png;base64,<omitted 400 bytes>",
        ["a cat", "data:image/png;base64,<omitted 400 bytes>"],
    ]


async def test_rerank_is_a_task_span_with_its_ranking_and_search_units(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([made("/v2/rerank", _reranked())]) as server:
        response = await _call(server.url, is_async, "rerank", model=RERANK_MODEL, query="Where is Paris?",
                               documents=DOCUMENTS, top_n=2)  # fmt: skip
    assert [r.index for r in response.results] == [2, 0]
    (span,) = exporter.get_finished_spans()
    a = span.attributes
    assert span.name == f"rerank {RERANK_MODEL}"
    assert a["gen_ai.operation.name"] == "rerank"
    assert a["evaltrace.span.kind"] == "task"  # not an LLM step
    assert a["gen_ai.provider.name"] == "cohere"
    assert a["gen_ai.request.model"] == RERANK_MODEL
    assert a["gen_ai.response.id"] == "rerank-1"
    assert a["cohere.usage.billed_units.search_units"] == 1
    assert "gen_ai.usage.input_tokens" not in a  # the response counted no tokens
    assert "gen_ai.retrieval.documents" not in a  # never read twice as RAG context
    assert json.loads(a["input.value"]) == {"query": "Where is Paris?", "documents": DOCUMENTS}
    assert json.loads(a["output.value"]) == [{"index": 2, "relevance_score": 0.91},
                                             {"index": 0, "relevance_score": 0.62}]  # fmt: skip
    assert json.loads(a["langfuse.observation.model.parameters"]) == {"top_n": 2}


async def test_rerank_through_the_raw_client_is_one_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([made("/v2/rerank", _reranked())]) as server:
        raw = await _call(server.url, is_async, "rerank", raw=True, model=RERANK_MODEL, query="q", documents=DOCUMENTS)
    assert raw.data.id == "rerank-1"
    (span,) = exporter.get_finished_spans()
    assert span.attributes["cohere.usage.billed_units.search_units"] == 1


async def test_embed_and_rerank_without_content_capture(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([made("/v2/embed", _embedded()), made("/v2/rerank", _reranked())]) as server:
            await _call(server.url, False, "embed", model=EMBED_MODEL, input_type="search_query", texts=["secret"])
            await _call(server.url, False, "rerank", model=RERANK_MODEL, query="secret", documents=DOCUMENTS)
    finally:
        settings.replace(previous)
    embed, rerank = exporter.get_finished_spans()
    assert embed.attributes["gen_ai.usage.input_tokens"] == 2
    assert rerank.attributes["cohere.usage.billed_units.search_units"] == 1
    for span in (embed, rerank):
        assert "input.value" not in span.attributes and "output.value" not in span.attributes


async def test_an_embed_error_fails_the_span_and_reaches_the_caller(exporter: InMemorySpanExporter) -> None:
    """Cohere's documented error body (``{"message": ...}``) with a 400: no error was recorded."""
    error = Recorded("POST", "https://api.cohere.com/v2/embed", b"", 400, "Bad Request",
                     [("content-type", "application/json")], b'{"message": "invalid input_type"}')  # fmt: skip
    with ReplayServer([error]) as server, pytest.raises(cohere.BadRequestError) as raised:
        await _call(server.url, False, "embed", model=EMBED_MODEL, input_type="bad", texts=["x"])
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert span.attributes["error.type"]
    assert raised.value.status_code == 400
