"""``litellm.rerank`` / ``arerank`` through the real LiteLLM: a ``rerank {model}`` task span, Cohere's shape.

No recording of a rerank exists in any fixture set (tests/fixtures, /work/shared/fixtures: no Cohere ``/v2/rerank``,
Jina or NVIDIA NIM traffic). LiteLLM is pointed (``api_base``) at the replay server on 127.0.0.1 serving, for each
provider, a body in the shape its API reference documents: Cohere's v2 rerank (``id``, ``results``,
``meta.billed_units.search_units``), Jina's (``model``, ``usage.total_tokens``, ``results`` with the document) and
NVIDIA NIM's reranking (``rankings`` of ``index`` / ``logit``, and ``usage`` when the service reports one). The
requests are what LiteLLM really sent.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM fetches its price map at import otherwise

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_replay import LITELLM_WARNINGS, close_clients  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace._internal import settings  # noqa: E402

COHERE = "cohere/rerank-v3.5"
JINA = "jina_ai/jina-reranker-v2-base-multilingual"
NIM = "nvidia_nim/nvidia/llama-3.2-nv-rerankqa-1b-v2"
QUERY = "Where is Paris?"
DOCUMENTS = ["Paris is in France.", "Berlin is in Germany.", "The Seine flows through Paris."]
RANKING = [{"index": 2, "relevance_score": 0.91}, {"index": 0, "relevance_score": 0.62}]


@pytest.fixture(autouse=True)
async def _close_litellm_clients() -> AsyncIterator[None]:
    """Close and drop LiteLLM's cached clients here, not in a later test (``litellm_replay.close_clients``)."""
    yield
    await close_clients()


pytestmark = [pytest.mark.usefixtures("litellm_instrumented"), *LITELLM_WARNINGS]


def _served(body: dict[str, Any], status: int = 200) -> Recorded:
    return Recorded("POST", "https://api.example/rerank", b"", status, "OK" if status == 200 else "Error",
                    [("content-type", "application/json")], json.dumps(body).encode())  # fmt: skip


def _cohere() -> dict[str, Any]:
    """Cohere's v2 rerank answer (API reference): the ranking, billed in search units, no tokens."""
    meta = {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
    return {"id": "rerank-1", "results": RANKING, "meta": meta}


def _jina(total_tokens: int = 42) -> dict[str, Any]:
    """Jina's rerank answer (API reference): ``usage.total_tokens``, each result with its document; no id."""
    results = [{**r, "document": {"text": DOCUMENTS[int(r["index"])]}} for r in RANKING]
    return {"model": "jina-reranker-v2-base-multilingual", "usage": {"total_tokens": total_tokens}, "results": results}


def _nim(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """NVIDIA NIM's reranking answer (API reference): ``rankings`` of logits; ``usage`` only when reported."""
    body: dict[str, Any] = {"rankings": [{"index": 2, "logit": 3.1}, {"index": 0, "logit": -1.2}]}
    return {**body, "usage": usage} if usage is not None else body


async def _rerank(is_async: bool, url: str, *args: Any, **kwargs: Any) -> Any:
    params = {"api_key": "test", "api_base": url, "num_retries": 0, **kwargs}
    if is_async:
        return await litellm.arerank(*args, **params)
    return litellm.rerank(*args, **params)


def _attrs(exporter: InMemorySpanExporter) -> dict[str, Any]:
    (span,) = exporter.get_finished_spans()
    return dict(span.attributes or {})


async def test_a_cohere_rerank_is_the_cohere_rerank_span(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_served(_cohere())]) as server:
        response = await _rerank(is_async, server.url, model=COHERE, query=QUERY, documents=DOCUMENTS, top_n=2)
        assert server.received[0].path == "/v2/rerank"
        port = int(server.url.rsplit(":", 1)[1])
    assert [r["index"] for r in response.results] == [2, 0]
    (span,) = exporter.get_finished_spans()
    a = dict(span.attributes or {})
    assert span.name == f"rerank {COHERE}"
    assert a["gen_ai.operation.name"] == "rerank"
    assert a["evaltrace.span.kind"] == "task"  # not an LLM step
    assert a["gen_ai.provider.name"] == "cohere"
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
    assert a["gen_ai.request.model"] == COHERE
    assert a["gen_ai.response.id"] == "rerank-1"
    assert a["cohere.usage.billed_units.search_units"] == 1
    assert not any(k.startswith("gen_ai.usage.") for k in a)  # search units are no tokens
    assert "gen_ai.retrieval.documents" not in a  # never read twice as RAG context
    assert json.loads(a["input.value"]) == {"query": QUERY, "documents": DOCUMENTS}
    assert json.loads(a["output.value"]) == RANKING
    assert json.loads(a["langfuse.observation.model.parameters"]) == {"top_n": 2}
    assert span.status.status_code is StatusCode.UNSET


async def test_positional_arguments_are_named_as_litellm_names_them(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_served(_cohere())]) as server:
        await _rerank(is_async, server.url, COHERE, QUERY, DOCUMENTS, None, 2)
    a = _attrs(exporter)
    assert a["gen_ai.request.model"] == COHERE
    assert json.loads(a["input.value"]) == {"query": QUERY, "documents": DOCUMENTS}
    assert json.loads(a["langfuse.observation.model.parameters"]) == {"top_n": 2}


async def test_jina_total_tokens_are_input_tokens_and_no_cohere_counts(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_served(_jina(42))]) as server:
        response = await _rerank(is_async, server.url, model=JINA, query=QUERY, documents=DOCUMENTS, top_n=2)
    a = _attrs(exporter)
    assert a["gen_ai.provider.name"] == "jina_ai"
    assert a["gen_ai.usage.input_tokens"] == 42
    assert "gen_ai.usage.output_tokens" not in a  # a rerank writes nothing
    assert not any(k.startswith("cohere.") for k in a)
    assert json.loads(a["output.value"]) == RANKING
    # Jina's answer has no id: the one LiteLLM made up names nothing the provider knows.
    assert response.id and "gen_ai.response.id" not in a


async def test_a_nim_result_count_is_not_recorded_as_tokens(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """NIM sent no usage: LiteLLM writes the number of results as ``billed_units.total_tokens``; not tokens."""
    with ReplayServer([_served(_nim())]) as server:
        response = await _rerank(is_async, server.url, model=NIM, query=QUERY, documents=DOCUMENTS, top_n=2)
    assert response.meta["billed_units"]["total_tokens"] == len(response.results) == 2  # LiteLLM's stand-in
    a = _attrs(exporter)
    assert a["gen_ai.provider.name"] == "nvidia_nim"
    assert not any(k.startswith(("gen_ai.usage.", "cohere.")) for k in a)
    assert "gen_ai.response.id" not in a


async def test_a_nim_token_usage_is_recorded(is_async: bool, exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_served(_nim({"prompt_tokens": 57, "total_tokens": 57}))]) as server:
        await _rerank(is_async, server.url, model=NIM, query=QUERY, documents=DOCUMENTS, top_n=2)
    assert _attrs(exporter)["gen_ai.usage.input_tokens"] == 57


async def test_without_content_capture_no_query_documents_or_ranking(exporter: InMemorySpanExporter) -> None:
    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        with ReplayServer([_served(_jina())]) as server:
            await _rerank(False, server.url, model=JINA, query="secret", documents=DOCUMENTS)
    finally:
        settings.replace(previous)
    a = _attrs(exporter)
    assert "input.value" not in a and "output.value" not in a
    assert a["gen_ai.usage.input_tokens"] == 42


async def test_a_rerank_error_sets_error_type_and_reraises(is_async: bool, exporter: InMemorySpanExporter) -> None:
    """Cohere's documented error body (``{"message": ...}``) with a 400."""
    with ReplayServer([_served({"message": "invalid request: query must not be empty"}, 400)]) as server:
        with pytest.raises(litellm.BadRequestError):
            await _rerank(is_async, server.url, model=COHERE, query="", documents=DOCUMENTS)
    (span,) = exporter.get_finished_spans()
    assert span.name == f"rerank {COHERE}"
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "BadRequestError"


@pytest.mark.parametrize(
    ("provider", "meta", "expected"),
    [
        # LiteLLM's Hugging Face rerank: its own token estimate and a search unit it always writes: no usage.
        (
            "huggingface",
            {"billed_units": {"search_units": 1}, "tokens": {"input_tokens": 30, "output_tokens": 9}},
            None,
        ),
        # Bedrock without usage: LiteLLM writes ``search_units: 1``, no tokens: none, and no ``cohere.*`` (below).
        ("bedrock", {"billed_units": {"search_units": 1}, "tokens": {}}, None),
        # Fireworks: its prompt tokens in ``tokens``, its total under ``search_units``: the tokens.
        ("fireworks_ai", {"billed_units": {"search_units": 20}, "tokens": {"input_tokens": 20}}, (20, None)),
        # Cohere with billed tokens (a v2 answer that counts some): billed first, as the Cohere span reads them.
        ("cohere", {"billed_units": {"input_tokens": 5, "search_units": 1}, "tokens": {"input_tokens": 7}}, (5, None)),
        # A provider that counts output tokens too: both kept.
        ("voyage", {"tokens": {"input_tokens": 3, "output_tokens": 2}}, (3, 2)),
    ],
)
def test_where_each_providers_rerank_usage_is_read(
    provider: str, meta: dict[str, Any], expected: tuple[int, int | None] | None
) -> None:
    """LiteLLM's ``RerankResponse`` as its provider transformations build it (read here without a server)."""
    from litellm.types.rerank import RerankResponse

    from evaltrace.instrumentation.litellm import rerank

    response = RerankResponse(id="r", results=[{"index": 0, "relevance_score": 0.5}], meta=meta)
    usage = rerank.usage(response, provider)
    assert (None if usage is None else (usage.input_tokens, usage.output_tokens)) == expected
    attributes = rerank.outcome(response, provider, False, 1024).attributes or {}
    assert any(k.startswith("cohere.") for k in attributes) is (provider == "cohere")
