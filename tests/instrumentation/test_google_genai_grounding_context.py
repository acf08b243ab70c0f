"""What a Gemini answer was grounded on is the context the RAG evaluators judge it against.

The grounding chunks the API returns (``grounding_metadata``) are recorded as ``search_result`` parts under the
answer's text part (test_google_genai_grounding.py). Before, the trace mapping read the text and dropped them: a
grounded answer had no context, and every RAG evaluator skipped it. Now each source with text is one chunk of
``context_chunks``: ``title - uri`` then its text, once, in order; never the answer's own segments a source supports.

No recording holds grounding metadata (tests/fixtures/google-genai-cassettes has none): every body is the SDK's own
``GenerateContentResponse``, validated by its types and served as the Developer API sends it to the real google-genai
client (``test_google_genai_output_media._served``).
"""

from __future__ import annotations

import pytest
from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, client_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_google_genai_output_media import MODEL, _chunk, _served, instrumented

from cassettes import ReplayServer
from evaltrace.evaluators import Faithfulness
from evaltrace.evaluators._base import MissingInputError, context_chunks
from evaltrace.evaluators.judge import Judge
from evaltrace.mapping import trace_from_spans

pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]
__all__ = ["instrumented"]  # the fixture, imported to be used here

ANSWER = "Spain won Euro 2024, beating England 2-1."
REPORT = "Spain beat England 2-1 in the final in Berlin."
SQUAD = "Spain's squad was led by Rodri, named player of the tournament."


def _grounding(*chunks: types.GroundingChunk) -> types.GroundingMetadata:
    return types.GroundingMetadata(
        web_search_queries=["euro 2024 winner"],
        grounding_chunks=list(chunks),
        grounding_supports=[
            types.GroundingSupport(
                segment=types.Segment(start_index=0, end_index=len(ANSWER), text=ANSWER),
                grounding_chunk_indices=list(range(len(chunks))),
            )
        ],
    )


WEB = types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://a.example/euro", title="a.example"))
RAG = types.GroundingChunk(
    retrieved_context=types.GroundingChunkRetrievedContext(uri="gs://docs/euro.pdf", title="Euro report", text=REPORT)
)
SEARCH = types.GroundingChunk(
    retrieved_context=types.GroundingChunkRetrievedContext(uri="gs://docs/squad.pdf", title="Squad", text=SQUAD)
)
JUDGE = Judge("judge-model", api_key="k", base_url="http://127.0.0.1:9/v1")  # never called by these tests


def _answer(grounding: types.GroundingMetadata) -> types.GenerateContentResponse:
    return _chunk([types.Part(text=ANSWER)], finish_reason=types.FinishReason.STOP, grounding_metadata=grounding)


def _ask(responses: list[types.GenerateContentResponse], stream: bool) -> None:
    with ReplayServer([_served([r], stream=stream) for r in responses]) as server:
        client = client_for(server)
        for _ in responses:
            if stream:
                list(client.models.generate_content_stream(model=MODEL, contents="Who won Euro 2024?"))
            else:
                client.models.generate_content(model=MODEL, contents="Who won Euro 2024?")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
def test_the_sources_a_gemini_answer_was_grounded_on_are_its_context(
    exporter: InMemorySpanExporter, stream: bool, lazy: bool
) -> None:
    _ask([_answer(_grounding(WEB, RAG, SEARCH))], stream)
    trace = trace_from_spans(exporter.get_finished_spans(), lazy=lazy)
    report = f"Euro report - gs://docs/euro.pdf\n{REPORT}"
    squad = f"Squad - gs://docs/squad.pdf\n{SQUAD}"
    # One chunk per source with text, in the order the API listed them; the web source (a title and a URI, no
    # text: what Google Search grounding gives) is no chunk, and the answer's segments are never context.
    assert context_chunks(trace) == [report, squad]
    context = Faithfulness(JUDGE).variables(trace, None)["context"]
    assert REPORT in context and SQUAD in context
    assert ANSWER not in context and "a.example" not in context
    assert trace.output.final_answer == ANSWER  # the answer is still the text


def test_a_source_two_model_calls_were_grounded_on_is_one_chunk(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    with provider.get_tracer("app").start_as_current_span("agent"):
        _ask([_answer(_grounding(RAG)), _answer(_grounding(SEARCH, RAG))], stream=False)
    trace = trace_from_spans(exporter.get_finished_spans())
    assert context_chunks(trace) == [
        f"Euro report - gs://docs/euro.pdf\n{REPORT}",
        f"Squad - gs://docs/squad.pdf\n{SQUAD}",
    ]


async def test_an_answer_grounded_on_sources_without_text_is_not_judged(exporter: InMemorySpanExporter) -> None:
    """Google Search grounding names its sources (title, URI) without their text: nothing to judge against."""
    _ask([_answer(_grounding(WEB))], stream=False)
    trace = trace_from_spans(exporter.get_finished_spans())
    with pytest.raises(MissingInputError, match="provider sources with text"):
        context_chunks(trace)
    result = await Faithfulness(JUDGE).evaluate(trace)
    assert result.status == "skipped"
