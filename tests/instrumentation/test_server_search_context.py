"""The results of a provider's own search tools as RAG context: one chunk per source with text, or none.

Before, a server tool's result reached ``context_chunks`` as the JSON of its recorded object: Groq compound's web
search, seventeen sources, was one chunk of JSON with scores in it; an Anthropic server tool's result was recorded
as its type alone, so its chunk was ``{"type": "web_search_tool_result"}`` (or ``mcp_tool_result``...), which a judge
would have taken as the context the answer had to be faithful to. Now a retrieval tool's result gives each source
with text as a chunk (``title - url`` then its text) and nothing when none has text (an Anthropic web search's
results are encrypted: the trace keeps their URLs and titles only), so the evaluators skip instead of judging
against a marker; Anthropic's result blocks keep what the model was given (a fetched page's text, an MCP tool's
text, a code run's output). Code execution is not retrieval: its output stays one chunk, as any tool result.

Groq: the recorded compound-beta web search (tests/fixtures/groq-cassettes, provenance in its README) replayed to
the real groq client. Anthropic: no recording holds a server tool, so the messages are validated by the SDK's own
``Message`` / ``BetaMessage`` types and served to the real anthropic client, whole and cut into the events the API
streams (``anthropic_replay.message_events``: a server tool's result block starts whole, as the API sends it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

groq = pytest.importorskip("groq")
anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL as CLAUDE  # noqa: E402
from anthropic_replay import inline_client  # noqa: E402
from groq_replay import WEB_SEARCH, WEB_SEARCH_STREAM, call_kwargs, interactions, server  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from test_anthropic_server_tools import ASK, MCP_MESSAGE, MESSAGE, TOOLS  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace.evaluators import Faithfulness  # noqa: E402
from evaltrace.evaluators._base import MissingInputError, context_chunks  # noqa: E402
from evaltrace.evaluators.judge import Judge  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

JUDGE = Judge("judge-model", api_key="k", base_url="http://127.0.0.1:9/v1")  # never called by these tests


@pytest.fixture
def groq_instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_groq()
    yield
    evaltrace.uninstrument_groq()


def _groq(url: str) -> Any:
    return groq.Groq(api_key="x", base_url=url, max_retries=0)


@pytest.mark.usefixtures("groq_instrumented")
@pytest.mark.parametrize("name", [WEB_SEARCH, WEB_SEARCH_STREAM])
def test_each_source_of_a_groq_web_search_is_one_chunk(name: str, exporter: InMemorySpanExporter) -> None:
    (item,) = interactions(name)
    with server(name) as srv:
        result = _groq(srv.url).chat.completions.create(**call_kwargs(item))
        if name == WEB_SEARCH_STREAM:
            tools = [t for chunk in result for c in chunk.choices for t in c.delta.executed_tools or ()]
            output = tools[-1].output or ""
        else:
            output = (result.choices[0].message.executed_tools or [])[0].output or ""
    trace = trace_from_spans(exporter.get_finished_spans())
    chunks = context_chunks(trace)
    # The search's results as the model read them (seventeen in the one recording, sixteen in the other), each one.
    assert len(chunks) == output.count("\nURL: ") >= 16
    assert chunks[0].startswith("Weather in San Francisco - https://www.weatherapi.com/\n{'location': ")
    if name == WEB_SEARCH:
        assert chunks[1] == (
            "Wednesday, September 17, 2025. San Francisco, CA - Weather ... - "
            "https://weathershogun.com/weather/usa/ca/san-francisco/480/september/2025-09-17\n"
            "San Francisco, California Weather: Wednesday, September 17, 2025. Day 75°. Night 59°. "
            "Precipitation 0 %. Wind 8 mph. UV Index (0 - 11+) 11"
        )
    assert not any("Score:" in c or c.startswith("{") for c in chunks)  # no ranking score, no JSON
    context = Faithfulness(JUDGE).variables(trace, None)["context"]
    assert f"[{len(chunks)}]" in context and (trace.output.final_answer or "-") not in context


def _served(completion: dict[str, Any]) -> Recorded:
    return Recorded("POST", "/openai/v1/chat/completions", b"", 200, "OK", [("content-type", "application/json")],
                    json.dumps(completion).encode())  # fmt: skip


def _completion(tool: dict[str, Any], answer: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": answer, "executed_tools": [tool]}
    return {"id": "r1", "object": "chat.completion", "created": 1, "model": "compound",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}  # fmt: skip


@pytest.mark.usefixtures("groq_instrumented")
def test_search_results_without_an_output_are_each_a_chunk_and_code_output_stays_one(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    """Groq compound may send a search's ``search_results`` with no ``output``; a code run is not a source."""
    results = {"results": [
        {"title": "Weather", "url": "https://w.example", "content": "Sunny, 21 C.", "score": 0.9},
        {"title": "No text", "url": "https://n.example", "content": "", "score": 0.5},
        {"title": "Weather", "url": "https://w.example", "content": "Sunny, 21 C.", "score": 0.4},
    ]}  # fmt: skip
    search = {"index": 0, "type": "search", "arguments": '{"query": "weather"}', "search_results": results}
    code = {"index": 0, "type": "python", "arguments": '{"code": "21 * 9 / 5 + 32"}', "output": "69.8"}
    with provider.get_tracer("app").start_as_current_span("agent"):
        with ReplayServer([_served(_completion(search, "Sunny.")), _served(_completion(code, "69.8 F."))]) as srv:
            client = _groq(srv.url)
            client.chat.completions.create(model="compound", messages=[{"role": "user", "content": "Weather?"}])
            client.chat.completions.create(model="compound", messages=[{"role": "user", "content": "In F?"}])
    trace = trace_from_spans(exporter.get_finished_spans())
    assert context_chunks(trace) == [
        "Weather - https://w.example\nSunny, 21 C.",  # once; the source without text is none
        '{"output": "69.8", "type": "python"}',  # what the model computed: the tool result as any other
    ]


@pytest.mark.usefixtures("anthropic_instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_anthropic_web_search_recorded_without_its_text_is_no_context(
    exporter: InMemorySpanExporter, stream: bool
) -> None:
    """The search's results are encrypted (``encrypted_content``): the trace cannot show the judge what they said."""
    answer = inline_client(MESSAGE, stream=stream).messages.create(
        model=CLAUDE, max_tokens=1024, messages=ASK, tools=TOOLS, stream=stream
    )
    if stream:
        list(answer)
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [r.name for r in trace.tool_results] == ["web_search"]  # the result is still the trace's
    with pytest.raises(MissingInputError):
        context_chunks(trace)
    result = await Faithfulness(JUDGE).evaluate(trace)
    assert result.status == "skipped"


@pytest.mark.usefixtures("anthropic_instrumented")
def test_an_mcp_tool_result_anthropic_ran_is_its_text(exporter: InMemorySpanExporter) -> None:
    """Before, the result block was recorded as ``{"type": "mcp_tool_result"}``: the context was that marker."""
    servers = [{"type": "url", "url": "https://docs.example/mcp", "name": "docs"}]
    inline_client(MCP_MESSAGE, stream=False).beta.messages.create(
        model=CLAUDE, max_tokens=256, messages=ASK, mcp_servers=servers
    )
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [r.content for r in trace.tool_results] == [
        {"type": "mcp_tool_result", "content": "Refunds within 30 days."}
    ]
    assert context_chunks(trace) == ["Refunds within 30 days."]  # what the model read, not the JSON around it


PAGE = "Lisbon forecast for Tuesday: sunny, 24 C, light wind from the north."
FETCH_AND_RUN: dict[str, Any] = {
    **MESSAGE,
    "id": "msg_01Fetch000000000000001",
    "content": [
        {"type": "server_tool_use", "id": "srvtoolu_f", "name": "web_fetch",
         "input": {"url": "https://weather.example/lisbon"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_f", "content": {
            "type": "web_fetch_result", "url": "https://weather.example/lisbon", "retrieved_at": "2026-11-30T10:00:00Z",
            "content": {"type": "document", "title": "Lisbon forecast",
                        "source": {"type": "text", "media_type": "text/plain", "data": PAGE}}}},
        {"type": "server_tool_use", "id": "srvtoolu_c", "name": "code_execution",
         "input": {"code": "print(24 * 9 / 5 + 32)"}},
        {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_c", "content": {
            "type": "code_execution_result", "stdout": "75.2\n", "stderr": "", "return_code": 0, "content": []}},
        {"type": "server_tool_use", "id": "srvtoolu_e", "name": "web_fetch",
         "input": {"url": "https://down.example/"}},
        {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_e",
         "content": {"type": "web_fetch_tool_result_error", "error_code": "url_not_accessible"}},
        {"type": "text", "text": "Sunny in Lisbon on Tuesday, 24 C (75.2 F)."},
    ],
}  # fmt: skip
FETCH_TOOLS = [
    {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2},
    {"type": "code_execution_20250825", "name": "code_execution"},
]


def test_the_fetch_message_is_one_the_sdk_accepts() -> None:
    from anthropic.types.beta import BetaMessage

    message = BetaMessage.model_validate(FETCH_AND_RUN)
    kinds = [b.type for b in message.content]
    assert kinds[1::2] == ["web_fetch_tool_result", "code_execution_tool_result", "web_fetch_tool_result"]


@pytest.mark.usefixtures("anthropic_instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_page_anthropic_fetched_is_one_chunk_and_a_code_run_its_output(
    exporter: InMemorySpanExporter, stream: bool
) -> None:
    """A fetched text page is the source the answer rests on; the code run's output stays one chunk of its own."""
    answer = inline_client(FETCH_AND_RUN, stream=stream).beta.messages.create(
        model=CLAUDE, max_tokens=1024, messages=ASK, tools=FETCH_TOOLS, stream=stream
    )
    if stream:
        list(answer)
    trace = trace_from_spans(exporter.get_finished_spans())
    assert [r.content for r in trace.tool_results] == [
        {"type": "web_fetch_tool_result", "url": "https://weather.example/lisbon", "title": "Lisbon forecast",
         "content": PAGE},
        {"type": "code_execution_tool_result", "stdout": "75.2\n", "stderr": "", "return_code": 0},
        {"type": "web_fetch_tool_result", "error_code": "url_not_accessible"},
    ]  # fmt: skip
    assert context_chunks(trace) == [
        f"Lisbon forecast - https://weather.example/lisbon\n{PAGE}",
        '{"return_code": 0, "stderr": "", "stdout": "75.2\\n", "type": "code_execution_tool_result"}',
    ]
