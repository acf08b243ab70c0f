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


# --- a chunk whose only grounding is its citations, or its URL context -------------------------------------------
# The stream proxy folds each chunk with ``add`` until the first one with output, then the rest with ``add_batch``:
# through the real client, the first chunk below takes ``add`` and the later ones ``add_batch``; the direct folds
# take each path for every chunk. Each path must see a chunk that has citations (or URL context) and nothing else.

RECITED = types.Citation(uri="https://d.example/report", title="Report", start_index=10, end_index=20)
ONLY_CITED_CHUNKS = [
    _chunk([types.Part(text="Spain won ")], citation_metadata=CITATIONS),
    # A later chunk repeats the first's citation before its own: each is kept once, in the order first cited.
    _chunk(
        [types.Part(text="Euro 2024.")],
        finish_reason=types.FinishReason.STOP,
        citation_metadata=types.CitationMetadata(citations=[*(CITATIONS.citations or ()), RECITED]),
    ),
]
BOTH_CITED = [
    {"source": "https://b.example/final", "title": "Final", "license": "", "start_index": 0, "end_index": 5},
    {"source": "https://d.example/report", "title": "Report", "start_index": 10, "end_index": 20},
]
FETCHED = [{"type": "server_tool_call_response", "server_tool_call_response": {"type": "url_context", "response": [
    {"url": "https://c.example/post", "status": "URL_RETRIEVAL_STATUS_SUCCESS"}]}}]  # fmt: skip


def _only_urls_chunks(where: int) -> list[types.GenerateContentResponse]:
    """Two chunks of the answer, the URL context metadata on chunk ``where`` only (no other grounding field)."""
    texts = ["Spain won ", "Euro 2024."]
    return [
        _chunk(
            [types.Part(text=text)],
            finish_reason=types.FinishReason.STOP if n == 1 else None,
            url_context_metadata=URLS if n == where else None,
        )
        for n, text in enumerate(texts)
    ]


def _folded(chunks: list[types.GenerateContentResponse], path: str) -> list[dict[str, object]]:
    acc = GenerateContentAccumulator()
    if path == "add":
        for chunk in chunks:
            acc.add(chunk)
    else:
        acc.add_batch(chunks)
    (message,) = acc.outcome().output_messages or []
    parts: list[dict[str, object]] = message["parts"]
    return parts


def test_chunks_whose_only_grounding_is_citations_are_recorded(exporter: InMemorySpanExporter) -> None:
    cited = types.CitationMetadata(citations=[*(CITATIONS.citations or ()), RECITED])
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, citation_metadata=cited)
    message = _whole_and_streamed(exporter, whole, ONLY_CITED_CHUNKS)
    assert message["parts"] == [{"type": "text", "content": ANSWER, "citations": BOTH_CITED}]


@pytest.mark.parametrize("path", ["add", "add_batch"])
def test_each_fold_path_keeps_a_chunks_citations_when_they_are_its_only_grounding(path: str) -> None:
    assert _folded(ONLY_CITED_CHUNKS, path) == [{"type": "text", "content": ANSWER, "citations": BOTH_CITED}]


@pytest.mark.parametrize("path", ["add", "add_batch"])
def test_a_citation_repeated_with_only_an_unrecorded_field_changed_is_recorded_once(path: str) -> None:
    """What is recorded of a citation is its identity: a repeat differing only in ``publication_date`` is no new source."""
    first, again = (
        RECITED.model_copy(update={"publication_date": types.GoogleTypeDate(year=2024, month=7, day=day)})
        for day in (14, 15)
    )
    chunks = [
        _chunk([types.Part(text="Spain won ")], citation_metadata=types.CitationMetadata(citations=[first])),
        _chunk([types.Part(text="Euro 2024.")], finish_reason=types.FinishReason.STOP,
               citation_metadata=types.CitationMetadata(citations=[again])),
    ]  # fmt: skip
    assert _folded(chunks, path) == [{"type": "text", "content": ANSWER, "citations": BOTH_CITED[1:]}]


@pytest.mark.parametrize("where", [0, 1], ids=["first chunk", "later chunk"])
def test_a_chunk_whose_only_grounding_is_url_context_is_recorded(exporter: InMemorySpanExporter, where: int) -> None:
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, url_context_metadata=URLS)
    message = _whole_and_streamed(exporter, whole, _only_urls_chunks(where))
    assert message["parts"] == [{"type": "text", "content": ANSWER, "grounding": FETCHED}]


@pytest.mark.parametrize("where", [0, 1], ids=["first chunk", "later chunk"])
@pytest.mark.parametrize("path", ["add", "add_batch"])
def test_each_fold_path_keeps_a_chunks_url_context_when_it_is_its_only_grounding(path: str, where: int) -> None:
    assert _folded(_only_urls_chunks(where), path) == [{"type": "text", "content": ANSWER, "grounding": FETCHED}]


# --- a retrieved context without a URI (the Gemini API's File Search) --------------------------------------------


def test_a_retrieved_context_without_a_uri_is_recorded_by_its_store_title_and_text(
    exporter: InMemorySpanExporter,
) -> None:
    """File Search's chunks name their store and document title, not a URI: the source is the store, never lost."""
    filed = types.GroundingChunkRetrievedContext(
        title="euro-report.pdf", text="Spain beat England 2-1 in Berlin.", file_search_store="fileSearchStores/euro-1"
    )
    shown = types.GroundingChunkRetrievedContext(  # a multimodal result: its media blob is more specific than its store
        title="final.png", media_id="fileSearchStores/euro-1/media/b-7", file_search_store="fileSearchStores/euro-1"
    )
    bare = types.GroundingChunkRetrievedContext(text="Berlin hosted the final.")  # nothing names where it came from
    grounding = types.GroundingMetadata(
        grounding_chunks=[types.GroundingChunk(retrieved_context=c) for c in (filed, shown, bare)],
        grounding_supports=[
            types.GroundingSupport(
                segment=types.Segment(start_index=0, end_index=20, text=ANSWER), grounding_chunk_indices=[0]
            )
        ],
    )
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, grounding_metadata=grounding)
    chunks = [
        _chunk([types.Part(text="Spain won ")]),
        _chunk([types.Part(text="Euro 2024.")], finish_reason=types.FinishReason.STOP, grounding_metadata=grounding),
    ]
    message = _whole_and_streamed(exporter, whole, chunks)
    assert message["parts"] == [
        {"type": "text", "content": ANSWER, "grounding": [
            {"type": "search_result", "kind": "retrieved_context", "source": "fileSearchStores/euro-1",
             "title": "euro-report.pdf", "content": "Spain beat England 2-1 in Berlin.",
             "citations": [{"text": ANSWER, "start_index": 0, "end_index": 20}]},
            {"type": "search_result", "kind": "retrieved_context", "source": "fileSearchStores/euro-1/media/b-7",
             "title": "final.png", "content": ""},
            {"type": "search_result", "kind": "retrieved_context", "content": "Berlin hosted the final."}]},
    ]  # fmt: skip


def test_a_retrieved_contexts_document_is_its_source_before_its_media_blob(exporter: InMemorySpanExporter) -> None:
    """Vertex AI Search's document name is more specific than a media blob (and a store): it is the source."""
    context = types.GroundingChunkRetrievedContext(
        title="final.png",
        document_name="projects/p/locations/global/collections/c/dataStores/d/branches/0/documents/final",
        media_id="fileSearchStores/euro-1/media/b-7",
        file_search_store="fileSearchStores/euro-1",
    )
    grounding = types.GroundingMetadata(grounding_chunks=[types.GroundingChunk(retrieved_context=context)])
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, grounding_metadata=grounding)
    chunks = [
        _chunk([types.Part(text="Spain won ")]),
        _chunk([types.Part(text="Euro 2024.")], finish_reason=types.FinishReason.STOP, grounding_metadata=grounding),
    ]
    message = _whole_and_streamed(exporter, whole, chunks)
    assert message["parts"] == [
        {"type": "text", "content": ANSWER, "grounding": [
            {"type": "search_result", "kind": "retrieved_context", "source": context.document_name,
             "title": "final.png", "content": ""}]},
    ]  # fmt: skip


def test_a_whole_response_repeating_a_citation_records_it_once(exporter: InMemorySpanExporter) -> None:
    """Whole and streamed agree: a citation the candidate lists twice (or with only an unrecorded field changed)
    is one source, in the order first cited."""
    again = RECITED.model_copy(update={"publication_date": types.GoogleTypeDate(year=2024, month=7, day=15)})
    cited = types.CitationMetadata(
        citations=[*(CITATIONS.citations or ()), RECITED, *(CITATIONS.citations or ()), again]
    )
    whole = _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, citation_metadata=cited)
    message = _whole_and_streamed(exporter, whole, ONLY_CITED_CHUNKS)
    assert message["parts"] == [{"type": "text", "content": ANSWER, "citations": BOTH_CITED}]
