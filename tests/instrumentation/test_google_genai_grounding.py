"""What a Gemini answer was grounded on (search queries, sources, citations, URLs fetched), whole and streamed.

No recording holds grounding metadata or citations (the fixture set in tests/fixtures/google-genai-cassettes has
none): every body is the SDK's own ``GenerateContentResponse``, validated by its types and serialised as the
Developer API sends it (``test_google_genai_output_media._served``), served to the real google-genai client.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_google_genai_output_media import _chunk, _whole_and_streamed, instrumented

from evaltrace.instrumentation.google_genai.stream import GenerateContentAccumulator
from evaltrace.mapping import trace_from_spans

pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]
__all__ = ["instrumented"]  # the fixture, imported to be used here

ANSWER = "Spain won Euro 2024."


GROUNDING = types.GroundingMetadata(
    web_search_queries=["euro 2024 winner"],
    search_entry_point=types.SearchEntryPoint(rendered_content="<style>.chip{}</style><div>euro 2024</div>"),
    grounding_chunks=[
        types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://a.example/euro", title="a.example")),
        types.GroundingChunk(
            retrieved_context=types.GroundingChunkRetrievedContext(
                uri="gs://docs/euro.pdf", title="Euro report", text="Spain beat England 2-1 in Berlin."
            )
        ),
    ],
    grounding_supports=[
        types.GroundingSupport(
            segment=types.Segment(start_index=0, end_index=20, text=ANSWER),
            grounding_chunk_indices=[0, 1],
            confidence_scores=[0.9, 0.7],
        )
    ],
)
CITATIONS = types.CitationMetadata(
    citations=[types.Citation(uri="https://b.example/final", title="Final", start_index=0, end_index=5, license="")]
)
URLS = types.UrlContextMetadata(
    url_metadata=[
        types.UrlMetadata(
            retrieved_url="https://c.example/post",
            url_retrieval_status=types.UrlRetrievalStatus.URL_RETRIEVAL_STATUS_SUCCESS,
        )
    ]
)


def test_the_sources_an_answer_was_grounded_on_are_recorded_whole_and_streamed(exporter: InMemorySpanExporter) -> None:
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, grounding_metadata=GROUNDING,
                   citation_metadata=CITATIONS, url_context_metadata=URLS)  # fmt: skip
    early = types.GroundingMetadata(web_search_queries=GROUNDING.web_search_queries)
    late = GROUNDING.model_copy(update={"web_search_queries": None})
    chunks = [
        # The queries may come early, the sources later (each field's latest value is kept); a chunk may repeat a
        # citation an earlier one carried (kept once).
        _chunk([types.Part(text="Spain won ")], citation_metadata=CITATIONS, grounding_metadata=early),
        _chunk(
            [types.Part(text="Euro 2024.")],
            finish_reason=types.FinishReason.STOP,
            grounding_metadata=late,
            citation_metadata=CITATIONS,
            url_context_metadata=URLS,
        ),  # fmt: skip
    ]
    message = _whole_and_streamed(exporter, whole, chunks)
    segment = {"text": ANSWER, "start_index": 0, "end_index": 20}
    assert message["parts"] == [
        {"type": "text", "content": ANSWER, "citations": [
            {"source": "https://b.example/final", "title": "Final", "license": "", "start_index": 0, "end_index": 5}],
         "grounding": [
            {"type": "server_tool_call", "name": "google_search",
             "server_tool_call": {"type": "google_search", "arguments": {"queries": ["euro 2024 winner"]}}},
            {"type": "search_result", "kind": "web", "source": "https://a.example/euro", "title": "a.example",
             "content": "", "citations": [{**segment, "confidence": 0.9}]},
            {"type": "search_result", "kind": "retrieved_context", "source": "gs://docs/euro.pdf",
             "title": "Euro report", "content": "Spain beat England 2-1 in Berlin.",
             "citations": [{**segment, "confidence": 0.7}]},
            {"type": "server_tool_call_response", "server_tool_call_response": {"type": "url_context", "response": [
                {"url": "https://c.example/post", "status": "URL_RETRIEVAL_STATUS_SUCCESS"}]}}]},
    ]  # fmt: skip
    assert message["finish_reason"] == "stop"
    # The message still reads as its text: the trace's answer is the text, not the message's parts as structure.
    assert trace_from_spans(exporter.get_finished_spans()).output.final_answer == ANSWER
    assert "chip" not in json.dumps(message)  # the search suggestions' HTML names no source


def test_a_chunk_without_grounding_fields_folds_as_before() -> None:
    """A chunk of another shape (a test double, an SDK without the grounding fields) is read, not failed on."""
    candidate = SimpleNamespace(index=0, content=SimpleNamespace(parts=[types.Part(text="Hi")]), finish_reason="STOP")
    chunk = SimpleNamespace(response_id="r-1", model_version="m", usage_metadata=None, candidates=[candidate])
    acc = GenerateContentAccumulator()
    assert acc.add(chunk) is True
    acc.add_batch([chunk])
    (message,) = acc.outcome().output_messages or []
    assert message["parts"] == [{"type": "text", "content": "HiHi"}]
