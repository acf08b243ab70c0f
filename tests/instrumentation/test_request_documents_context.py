"""The documents an application sends with its request are the RAG evaluators' context.

Before, Groq's ``documents=``, Cohere's ``documents=`` (not recorded at all) and Anthropic's ``document`` /
``search_result`` blocks reached the trace as plain input text (or not at all): ``context_chunks`` found no context
and Faithfulness skipped the answer ("no retrieved context"). Now each document is a text part marked
``"document": true`` (a search result its ``search_result`` part), and the mapping makes every one a chunk: its
title, then its text, once, in order. A retriever span's documents still come first and alone.

Groq: the real client against a 127.0.0.1 server answering in the SDK's ``ChatCompletion`` shape (no recording has
documents). Cohere: the real ``ClientV2`` replaying a recorded ``/v2/chat`` answer (tests/fixtures/cohere-cassettes,
provenance in its README). Anthropic: the real client answering the recorded ``text.json`` message
(tests/fixtures/anthropic). Faithfulness is judged by a real OpenAI-compatible endpoint on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")
cohere = pytest.importorskip("cohere")
anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL as CLAUDE  # noqa: E402
from anthropic_replay import Reply, client  # noqa: E402
from cohere_replay import client_of, cohere_interactions  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace._internal import semconv as sc  # noqa: E402
from evaltrace.evaluators import Faithfulness  # noqa: E402
from evaltrace.evaluators._base import context_chunks, question_text  # noqa: E402
from evaltrace.evaluators.judge import Judge  # noqa: E402
from evaltrace.instrumentation.cohere import CohereInstrumentor  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402
from judge_server import serve_judge  # noqa: E402

GROQ_MODEL = "llama-3.3-70b-versatile"
QUESTION = "What does soup cost?"
ANSWER = "Soup costs 5 euros."
GROQ_DOCUMENTS: Any = [
    {"id": "menu", "source": {"type": "text", "text": "Soup costs 5 euros."}},
    {"id": "card", "source": {"type": "json", "data": {"title": "Card", "text": "Bread is free.", "year": 2025}}},
    {"id": "hours", "source": {"type": "json", "data": {"opens": "9h"}}},
    {"id": "again", "source": {"type": "text", "text": "Soup costs 5 euros."}},  # the same text: one chunk
]
GROQ_CHUNKS = ["Soup costs 5 euros.", "Card\nBread is free.\nyear: 2025", '{"opens": "9h"}']


@pytest.fixture
def groq_instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_groq()
    yield
    evaltrace.uninstrument_groq()


@pytest.fixture
def cohere_instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    instrumentor = CohereInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def _groq_served() -> Recorded:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": GROQ_MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ANSWER}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}  # fmt: skip
    return Recorded("POST", "/openai/v1/chat/completions", b"", 200, "OK", [("content-type", "application/json")],
                    json.dumps(body).encode())  # fmt: skip


def _groq_trace(exporter: InMemorySpanExporter, provider: TracerProvider, retrieved: list[str] | None = None) -> Any:
    messages: Any = [{"role": "system", "content": "Answer from the documents."}, {"role": "user", "content": QUESTION}]
    with provider.get_tracer("app").start_as_current_span("rag"):
        if retrieved is not None:  # an explicit retriever span, as evaltrace's retriever spans record it
            with provider.get_tracer("app").start_as_current_span("retrieval menu") as span:
                span.set_attribute(sc.GEN_AI_OPERATION_NAME, "retrieval")
                span.set_attribute(sc.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps([{"content": c} for c in retrieved]))
        with ReplayServer([_groq_served()]) as srv, groq.Groq(api_key="x", base_url=srv.url, max_retries=0) as api:
            api.chat.completions.create(model=GROQ_MODEL, messages=messages, documents=GROQ_DOCUMENTS)
    return trace_from_spans(exporter.get_finished_spans())


@pytest.mark.usefixtures("groq_instrumented")
def test_groq_documents_are_the_context_each_once_title_first(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    trace = _groq_trace(exporter, provider)
    chat = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat"))
    documents = json.loads(str((chat.attributes or {})[sc.GEN_AI_INPUT_MESSAGES]))[1]
    assert documents["parts"][0] == {"type": "text", "content": "Soup costs 5 euros.", "document": True, "id": "menu"}
    assert context_chunks(trace) == GROQ_CHUNKS
    assert question_text(trace) == QUESTION  # the documents' message is not the question


@pytest.mark.usefixtures("groq_instrumented")
def test_a_retriever_spans_documents_still_come_alone(exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
    """As for the provider's own sources: an explicit retrieval's documents are the context, nothing beside them."""
    trace = _groq_trace(exporter, provider, retrieved=["Soup costs 5 euros (retrieved)."])
    assert context_chunks(trace) == ["Soup costs 5 euros (retrieved)."]


@pytest.mark.usefixtures("groq_instrumented")
async def test_faithfulness_judges_an_answer_grounded_on_groq_documents(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """Before, the answer was skipped for "no retrieved context"; now the judge is shown every document."""
    trace = _groq_trace(exporter, provider)
    claims = {"claims": [{"claim": "Soup costs 5 euros.", "supported": True}]}
    with serve_judge(lambda body: claims) as judge:
        result = await Faithfulness(Judge("judge-model", api_key="k", base_url=judge.url)).evaluate(trace)
        prompts = [json.dumps(r["body"]["messages"], ensure_ascii=False) for r in judge.requests]
    assert result.status == "completed" and result.score == 1.0, result.error
    # The step that checks the claims against the context is shown each document, and the question is the user's.
    assert any(all(json.dumps(chunk)[1:-1] in prompt for chunk in GROQ_CHUNKS) for prompt in prompts)
    assert all("What does soup cost?" in prompt for prompt in prompts)


@pytest.mark.usefixtures("cohere_instrumented")
def test_cohere_documents_are_recorded_and_are_the_context(exporter: InMemorySpanExporter) -> None:
    documents: Any = [
        "Soup costs 5 euros.",
        {"id": "card", "data": {"title": "Card", "snippet": "Bread is free."}},
        {"data": {"opens": "9h"}},
    ]
    messages: Any = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    with ReplayServer(cohere_interactions("test_request_simple_success_with_vcr.yaml")) as srv:
        with client_of(srv.url) as api:
            api.chat(model="command-r7b-12-2024", messages=messages, documents=documents)
        sent = srv.received[0].json()
    assert sent["documents"] == documents  # sent as given
    (span,) = exporter.get_finished_spans()
    recorded = json.loads(str((span.attributes or {})[sc.GEN_AI_INPUT_MESSAGES]))
    assert [m["role"] for m in recorded] == ["system", "user", "user"]
    assert recorded[1]["parts"] == [
        {"type": "text", "content": "Soup costs 5 euros.", "document": True},
        {"type": "text", "content": '{"title": "Card", "snippet": "Bread is free."}', "document": True, "id": "card"},
        {"type": "text", "content": '{"opens": "9h"}', "document": True},
    ]
    trace = trace_from_spans(exporter.get_finished_spans())
    assert context_chunks(trace) == ["Soup costs 5 euros.", "Card\nBread is free.", '{"opens": "9h"}']
    assert question_text(trace) == QUESTION


PDF = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK"}


@pytest.mark.usefixtures("anthropic_instrumented")
def test_anthropic_documents_and_search_results_are_the_context(exporter: InMemorySpanExporter) -> None:
    text_document = {"type": "document", "title": "Menu", "context": "Printed in 2025.",
                     "source": {"type": "text", "media_type": "text/plain", "data": "Soup costs 5 euros."},
                     "citations": {"enabled": True}}  # fmt: skip
    content_document = {"type": "document", "source": {"type": "content", "content": [
        {"type": "text", "text": "Bread "}, {"type": "text", "text": "is free."}]}}  # fmt: skip
    search_result = {"type": "search_result", "source": "https://cafe.example/hours", "title": "Hours",
                     "content": [{"type": "text", "text": "Opens at 9h."}]}  # fmt: skip
    pdf = {"type": "document", "source": PDF, "title": "Scan"}  # no text to judge against: no chunk
    content = [text_document, content_document, search_result, pdf, {"type": "text", "text": QUESTION}]
    api, server = client([Reply("text.json")])
    api.messages.create(model=CLAUDE, max_tokens=256, messages=[{"role": "user", "content": content}])
    assert server.requests[0]["messages"][0]["content"] == content
    (span,) = exporter.get_finished_spans()
    (user,) = json.loads(str((span.attributes or {})[sc.GEN_AI_INPUT_MESSAGES]))
    assert user["parts"][:2] == [
        {"type": "text", "content": "Soup costs 5 euros.", "document": True, "title": "Menu",
         "context": "Printed in 2025."},
        {"type": "text", "content": "Bread is free.", "document": True},
    ]  # fmt: skip
    assert user["parts"][3]["type"] == "uri" and "document" not in user["parts"][3]  # a PDF: no text, no mark
    trace = trace_from_spans(exporter.get_finished_spans())
    assert question_text(trace) == QUESTION  # the documents sent beside it are not the question
    assert context_chunks(trace) == [
        "Menu\nSoup costs 5 euros.\ncontext: Printed in 2025.",
        "Bread is free.",
        "Hours - https://cafe.example/hours\nOpens at 9h.",
    ]
