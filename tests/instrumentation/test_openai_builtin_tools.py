"""OpenAI Responses built-in tools and citations: web and file search calls with what they found, annotations.

Before, a ``web_search_call`` / ``file_search_call`` output item was recorded as its type and id alone and an
``output_text``'s ``annotations`` were dropped: the queries, the files' texts the model read (asked with
``include=["file_search_call.results"]``) and what the answer cited never reached the trace or the RAG evaluators.

The recorded traffic is Logfire's Agents SDK file search run (tests/fixtures/openai-agents-cassettes, provenance in
its README): a ``file_search_call`` without results (``include=[]``) and a ``file_citation``, then the next turn
echoing both back. No recording holds a search's results, sources or a ``url_citation``: those responses are the
recorded response with its output replaced by items in the API reference's shapes (openai's ``Response`` type
validates them), served whole and as the event stream the API sends, by a real HTTP server on 127.0.0.1 to the real
openai client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pydantic
import pytest

openai = pytest.importorskip("openai")
# The Responses API came after the oldest supported openai (1.40, CI's oldest-versions step): feature-detected.
pytest.importorskip("openai.types.responses", reason=f"openai {openai.__version__} has no Responses API")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import evaltrace  # noqa: E402
from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette  # noqa: E402
from evaltrace._internal import settings  # noqa: E402
from evaltrace._internal.sources import server_result_chunks  # noqa: E402
from evaltrace.evaluators._base import context_chunks  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

FILE_SEARCH = FIXTURES / "openai-agents-cassettes/logfire/test_openai_agents/test_file_search.yaml"
TOOLS = [{"type": "file_search", "vector_store_ids": ["vs_1"]}, {"type": "web_search"}]
RESULTS = [
    {"file_id": "file-1", "filename": "refunds.md", "score": 0.92, "text": "Refunds are accepted within 30 days.",
     "attributes": {"team": "support"}},
    {"file_id": "file-2", "filename": "empty.md", "score": 0.11, "text": ""},
]  # fmt: skip
SEARCH = {"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["refund window"],
          "results": RESULTS}  # fmt: skip
WEB = {"id": "ws_1", "type": "web_search_call", "status": "completed",
       "action": {"type": "search", "query": "refund law EU",
                  "sources": [{"type": "url", "url": "https://europa.eu/refunds"}]}}  # fmt: skip
ANSWER = "Refunds are accepted within 30 days."
# An answer no page holds: asserting it survives the cap cannot pass on a marker quoting a page.
OWN_ANSWER = "You have a month to ask for your money back."
PAGE = "Refunds are accepted within 30 days. " * 100  # 3,700 characters
CITED = [
    {"type": "file_citation", "file_id": "file-1", "filename": "refunds.md", "index": 36},
    {"type": "url_citation", "url": "https://europa.eu/refunds", "title": "EU refunds", "start_index": 0,
     "end_index": 36},
]  # fmt: skip
MESSAGE = {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": ANSWER, "annotations": CITED}]}  # fmt: skip


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_openai()
    yield
    evaltrace.uninstrument_openai()


def _client(url: str) -> Any:
    return openai.OpenAI(api_key="x", base_url=f"{url}/v1", max_retries=0)


def _output(exporter: InMemorySpanExporter, key: str = "gen_ai.output.messages") -> list[Any]:
    (span,) = [s for s in exporter.get_finished_spans() if s.attributes and key in s.attributes]
    return json.loads(str(span.attributes[key]))  # type: ignore[index]


def _recorded_response() -> dict[str, Any]:
    """The first recorded response, its output replaced by the searches and the answer in the reference's shapes."""
    body = load_cassette(FILE_SEARCH)[0].response_json()
    body["output"] = [SEARCH, WEB, MESSAGE]
    for item in body["output"]:  # the shapes are the SDK's own (the 2026 recording's usage lacks a newer field)
        pydantic.TypeAdapter(openai.types.responses.ResponseOutputItem).validate_python(item)
    return dict(body)


def _whole(body: dict[str, Any]) -> Recorded:
    return Recorded("POST", "/v1/responses", b"", 200, "OK", [("content-type", "application/json")],
                    json.dumps(body).encode())  # fmt: skip


def _events(body: dict[str, Any], terminal: bool = True) -> Recorded:
    """The API's event stream for ``body``: created, each item added / (searching) / done, text, annotations."""
    progress = dict(body, status="in_progress", output=[])
    events: list[dict[str, Any]] = [{"type": "response.created", "response": progress}]
    for index, item in enumerate(body["output"]):
        opened = dict(item, status="in_progress") if item["type"] != "message" else dict(item, content=[])
        events.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        kind = item["type"]
        if kind != "message":
            for step in ("in_progress", "searching", "completed"):
                events.append({"type": f"response.{kind}.{step}", "output_index": index, "item_id": item["id"]})
        else:
            (content,) = item["content"]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append({"type": "response.output_text.delta", **where, "delta": content["text"], "logprobs": []})
            for n, annotation in enumerate(content["annotations"]):
                events.append({"type": "response.output_text.annotation.added", **where, "annotation_index": n,
                               "annotation": annotation})  # fmt: skip
            events.append({"type": "response.output_text.done", **where, "text": content["text"], "logprobs": []})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    if terminal:
        events.append({"type": "response.completed", "response": body})
    text = "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n" for n, e in enumerate(events)
    )
    return Recorded("POST", "/v1/responses", b"", 200, "OK", [("content-type", "text/event-stream")], text.encode())


@pytest.mark.usefixtures("instrumented")
def test_a_recorded_file_search_keeps_its_queries_and_the_file_it_cited(exporter: InMemorySpanExporter) -> None:
    first, second = load_cassette(FILE_SEARCH)
    with ReplayServer([first, second]) as srv, _client(srv.url) as client:
        client.responses.create(**first.request_json())
        client.responses.create(**second.request_json())
    spans = [s for s in exporter.get_finished_spans() if s.attributes and "gen_ai.output.messages" in s.attributes]
    outputs = [json.loads(str(s.attributes["gen_ai.output.messages"])) for s in spans]  # type: ignore[index]
    search_id = "fs_05cdfcc11457b63e0069933709b8ec81a0b339e16bec80b213"
    # No ``include``: the search's results are not in the response, so no response part stands for them.
    assert outputs[0][0]["parts"] == [
        {"type": "server_tool_call", "id": search_id, "name": "file_search_call",
         "server_tool_call": {"type": "file_search_call", "arguments": {"queries": ["Who made Logfire?"]}}},
        {"type": "text", "content": "Logfire is made by Pydantic.",
         "citations": [{"type": "file_citation", "source": "file-CmKZQn5qLRRgcAjS61GSqv", "title": "test.txt",
                        "index": 27}]},
    ]  # fmt: skip
    # The next turn echoes both back as input: recorded as the answer recorded them.
    history = json.loads(str(spans[1].attributes["gen_ai.input.messages"]))  # type: ignore[index]
    assert [p for m in history for p in m["parts"]][1:3] == outputs[0][0]["parts"]


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_search_results_sources_and_citations_are_recorded_and_the_files_texts_are_context(
    exporter: InMemorySpanExporter, stream: bool
) -> None:
    body = _recorded_response()
    include = ["file_search_call.results", "web_search_call.action.sources"]
    with ReplayServer([_events(body) if stream else _whole(body)]) as srv, _client(srv.url) as client:
        answer = client.responses.create(
            model="gpt-4o", input="Refund window?", tools=TOOLS, include=include, stream=stream
        )
        if stream:
            list(answer)
    (message,) = _output(exporter)
    assert message["parts"] == [
        {"type": "server_tool_call", "id": "fs_1", "name": "file_search_call",
         "server_tool_call": {"type": "file_search_call", "arguments": {"queries": ["refund window"]}}},
        {"type": "server_tool_call_response", "id": "fs_1",
         "server_tool_call_response": {"type": "file_search_call", "results": RESULTS}},
        {"type": "server_tool_call", "id": "ws_1", "name": "web_search_call",
         "server_tool_call": {"type": "web_search_call", "arguments": {"type": "search", "query": "refund law EU"}}},
        {"type": "server_tool_call_response", "id": "ws_1",
         "server_tool_call_response": {"type": "web_search_call",
                                       "sources": [{"type": "url", "url": "https://europa.eu/refunds"}]}},
        {"type": "text", "content": ANSWER, "citations": [
            {"type": "file_citation", "source": "file-1", "title": "refunds.md", "index": 36},
            {"type": "url_citation", "source": "https://europa.eu/refunds", "title": "EU refunds", "start_index": 0,
             "end_index": 36}]},
    ]  # fmt: skip
    trace = trace_from_spans(exporter.get_finished_spans())
    assert trace.output.final_answer == ANSWER
    # The file's text, named by its file, then its attributes as ``key: value`` lines (the metadata it was filed
    # with); the empty one and the URL-only web sources have no text to judge against.
    assert context_chunks(trace) == ["refunds.md\nRefunds are accepted within 30 days.\nteam: support"]


@pytest.mark.usefixtures("instrumented")
def test_a_stream_cut_before_its_terminal_event_keeps_the_finished_searches_and_the_citations(
    exporter: InMemorySpanExporter,
) -> None:
    body = _recorded_response()
    with ReplayServer([_events(body, terminal=False)]) as srv, _client(srv.url) as client:
        list(client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS, stream=True))
    (message,) = _output(exporter)
    kinds = [(p["type"], p.get("id")) for p in message["parts"]]
    # In output order, as a whole response records them: the searches, then the answer they led to.
    assert kinds == [("server_tool_call", "fs_1"), ("server_tool_call_response", "fs_1"),
                     ("server_tool_call", "ws_1"), ("server_tool_call_response", "ws_1"), ("text", None)]  # fmt: skip
    assert [c["type"] for c in message["parts"][-1]["citations"]] == ["file_citation", "url_citation"]
    assert message["parts"][1]["server_tool_call_response"]["results"] == RESULTS


@contextmanager
def _capped(cap: int) -> Iterator[None]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True, max_attribute_length=cap))
    try:
        yield
    finally:
        settings.replace(previous)


@pytest.fixture
def cap_16k() -> Iterator[None]:
    with _capped(16_384):
        yield


def _pages(n: int, prefix: str = "file") -> list[dict[str, Any]]:
    """``n`` ranked chunks of a long page, as a file search returns them."""
    return [{"file_id": f"{prefix}-{k}", "filename": f"{prefix}{k}.md", "score": 1 - k / 100, "text": PAGE}
            for k in range(n)]  # fmt: skip


def _answer_with(*items: dict[str, Any]) -> dict[str, Any]:
    body = _recorded_response()
    body["output"] = [*items, dict(MESSAGE, content=[{"type": "output_text", "text": OWN_ANSWER, "annotations": []}])]
    return body


def _responses_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p["server_tool_call_response"] for m in messages for p in m["parts"] if p["type"].endswith("_response")]


def _results_of(message: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [response["results"] for response in _responses_of([message])]


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_long_result_texts_keep_half_the_cap_so_the_answer_is_not_lost(exporter: InMemorySpanExporter) -> None:
    """Twenty long chunks would pass the cap: the whole output, the answer with it, would be a truncation marker."""
    with ReplayServer([_whole(_answer_with(dict(SEARCH, results=_pages(20))))]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    (response,) = _responses_of([message])
    kept = response["results"]
    # The best ranked first and whole, within half the cap (the search's query, the fields, ids and names counted
    # with the texts), the rest left out and counted.
    assert [len(r["text"]) for r in kept] == [3_700, 3_700, 8_192 - len('"refund window"') - 2 * 3_700 - sum(len(json.dumps(
        {k: v for k, v in r.items() if k in ("file_id", "filename", "score")})) for r in kept)]  # fmt: skip
    assert kept[2]["evaltrace.truncated"] is True and kept[2]["original_lengths"] == {"text": 3_700}
    assert response["evaltrace.truncated"] is True and response["original_lengths"] == {"results": 20}
    assert len(json.dumps(kept)) <= 8_192 + 200  # half the cap, the texts' keys and the cut one's marker
    assert trace_from_spans(exporter.get_finished_spans()).output.final_answer == OWN_ANSWER


@pytest.mark.usefixtures("instrumented", "cap_16k")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "cut-stream"])
def test_two_searches_in_one_response_share_half_the_cap(exporter: InMemorySpanExporter, stream: bool) -> None:
    """Each search taking half the cap of its own, two of them filled the output: the answer was lost."""
    first = dict(SEARCH, results=_pages(20))
    second = dict(SEARCH, id="fs_2", queries=["refund policy"], results=_pages(20, "other"))
    body = _answer_with(first, second)
    served = _events(body, terminal=False) if stream else _whole(body)
    with ReplayServer([served]) as srv, _client(srv.url) as client:
        answer = client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS, stream=stream)
        if stream:
            list(answer)
    (message,) = _output(exporter)
    one, two = _responses_of([message])
    assert [len(r["text"]) for r in one["results"]][:2] == [3_700, 3_700]
    # The first search's results took the share: the second's are left out, their number said.
    assert two == {"type": "file_search_call", "results": [], "evaltrace.truncated": True,
                   "original_lengths": {"results": 20}}  # fmt: skip
    assert message["parts"][-1]["content"] == OWN_ANSWER


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_large_result_attributes_count_against_the_share(exporter: InMemorySpanExporter) -> None:
    """Ten results with a dozen attributes of 500 characters each passed the cap with one search, texts short."""
    attributes = {f"key{k}": "x" * 500 for k in range(12)}
    results = [dict(r, text="Refunds within 30 days.", attributes=attributes) for r in _pages(10)]
    with ReplayServer([_whole(_answer_with(dict(SEARCH, results=results)))]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    (kept,) = _results_of(message)
    assert kept[0]["attributes"] == attributes  # the first fits whole
    dropped = [r for r in kept if "attributes" not in r]
    assert dropped and all(r["original_lengths"] == {"attributes": len(json.dumps(attributes))} for r in dropped)
    assert all(r["text"] == "Refunds within 30 days." for r in kept)  # texts first: what the answer rests on
    assert trace_from_spans(exporter.get_finished_spans()).output.final_answer == OWN_ANSWER


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_earlier_searches_sent_back_share_half_the_cap_so_the_question_is_not_lost(
    exporter: InMemorySpanExporter,
) -> None:
    """Each earlier search sent back with its results took half the cap: two turned the whole input into a marker."""
    question = "And for a gift I was given?"
    earlier = [
        {"role": "user", "content": "Refund window?"},
        dict(SEARCH, results=_pages(20)),
        dict(MESSAGE, content=[{"type": "output_text", "text": OWN_ANSWER, "annotations": []}]),
        {"role": "user", "content": "And after a month?"},
        dict(SEARCH, id="fs_2", results=_pages(20, "other")),
        dict(MESSAGE, id="msg_2", content=[{"type": "output_text", "text": "Store credit.", "annotations": []}]),
        {"role": "user", "content": question},
    ]
    with ReplayServer([_whole(_answer_with())]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input=earlier, tools=TOOLS)  # type: ignore[arg-type]
    history = _output(exporter, "gen_ai.input.messages")
    assert history[-1] == {"role": "user", "parts": [{"type": "text", "content": question}]}
    one, two = _responses_of(history)
    assert len(one["results"][0]["text"]) == 3_700
    assert two["results"] == [] and two["original_lengths"] == {"results": 20}


@pytest.mark.usefixtures("instrumented")
def test_without_a_cap_every_result_text_is_kept_whole(exporter: InMemorySpanExporter) -> None:
    """``max_attribute_length=0`` records values uncapped: the results too."""
    with _capped(0):
        with ReplayServer([_whole(_answer_with(dict(SEARCH, results=_pages(20))))]) as srv, _client(srv.url) as c:
            c.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    (kept,) = _results_of(message)
    assert [r["text"] for r in kept] == [PAGE] * 20 and not any("evaltrace.truncated" in r for r in kept)


def _call_of(message: dict[str, Any], item_id: str) -> dict[str, Any]:
    (part,) = [p for p in message["parts"] if p["type"] == "server_tool_call" and p["id"] == item_id]
    return dict(part["server_tool_call"])


@pytest.mark.usefixtures("instrumented", "cap_16k")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "cut-stream"])
def test_web_search_sources_count_against_the_share_so_the_answer_is_not_lost(
    exporter: InMemorySpanExporter, stream: bool
) -> None:
    """A web search's sources were recorded whole, uncounted: 400 of them passed the cap and lost the answer."""
    sources = [{"type": "url", "url": f"https://example.invalid/refunds/{k:04d}/{'x' * 40}"} for k in range(400)]
    web = dict(WEB, action=dict(WEB["action"], sources=sources))
    body = _answer_with(web)
    with ReplayServer([_events(body, terminal=False) if stream else _whole(body)]) as srv, _client(srv.url) as client:
        answer = client.responses.create(
            model="gpt-4o", input="Refund window?", tools=TOOLS, include=["web_search_call.action.sources"],
            stream=stream,
        )  # fmt: skip
        if stream:
            list(answer)
    (message,) = _output(exporter)
    (response,) = _responses_of([message])
    kept = response["sources"]
    assert 0 < len(kept) < 400 and kept == sources[: len(kept)]  # the first, whole and in order
    # Within half the cap with the query, each source's JSON counted: the next one would not have fitted.
    used = len('"refund law EU"') + sum(len(json.dumps(source)) for source in kept)
    assert used <= 8_192 < used + len(json.dumps(sources[len(kept)]))
    assert response["evaltrace.truncated"] is True and response["original_lengths"] == {"sources": 400}
    assert message["parts"][-1]["content"] == OWN_ANSWER
    assert trace_from_spans(exporter.get_finished_spans()).output.final_answer == OWN_ANSWER


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_long_search_queries_count_against_the_share_and_are_marked(exporter: InMemorySpanExporter) -> None:
    """A web search's query and a file search's queries were recorded whole: a long one cost the answer."""
    query = "refund " * 3_000  # 21,000 characters
    queries = [f"refund window question {k} " + "y" * 200 for k in range(100)]
    web = dict(WEB, action={"type": "search", "query": query})
    search = dict(SEARCH, id="fs_q", queries=queries, results=_pages(2))
    with ReplayServer([_whole(_answer_with(web, search))]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    web_call, file_call = _call_of(message, "ws_1"), _call_of(message, "fs_q")
    # The query took the whole share: cut to it, its length said on the call.
    assert web_call["arguments"] == {"type": "search", "query": query[:8_192]}
    assert web_call["evaltrace.truncated"] is True and web_call["original_lengths"] == {"query": len(query)}
    # Nothing left for the file search: its queries and results left out, how many said.
    assert file_call["arguments"] == {"queries": []}
    assert file_call["evaltrace.truncated"] is True and file_call["original_lengths"] == {"queries": 100}
    (response,) = _responses_of([message])
    assert response["results"] == [] and response["original_lengths"] == {"results": 2}
    trace = trace_from_spans(exporter.get_finished_spans())
    assert trace.output.final_answer == OWN_ANSWER
    # The Trace's calls keep the mark: a cut query is not taken for the one the model sent.
    calls = {call.id: call.arguments for call in trace.tool_calls}
    assert calls["ws_1"] == {"type": "search", "query": query[:8_192], "evaltrace.truncated": True,
                             "original_lengths": {"query": len(query)}}  # fmt: skip
    assert calls["fs_q"] == {"queries": [], "evaltrace.truncated": True, "original_lengths": {"queries": 100}}


def _searched(exporter: InMemorySpanExporter, *items: dict[str, Any]) -> dict[str, Any]:
    """The output message of a response whose built-in tools ran ``items``, recorded under a 16k cap."""
    exporter.clear()  # a test may record several responses: each read alone
    with ReplayServer([_whole(_answer_with(*items))]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    return message


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_one_query_left_out_is_marked(exporter: InMemorySpanExporter) -> None:
    first, second = "a" * 8_000, "b" * 500  # the first fits the 8,192 share (8,002 as JSON), the second not
    message = _searched(exporter, dict(SEARCH, queries=[first, second]))
    assert _call_of(message, "fs_1") == {"type": "file_search_call", "arguments": {"queries": [first]},
                                         "evaltrace.truncated": True, "original_lengths": {"queries": 2}}  # fmt: skip


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_nothing_is_kept_after_a_query_left_out(exporter: InMemorySpanExporter) -> None:
    """A short query or result after one that did not fit is left out too: the record keeps a prefix, in order."""
    message = _searched(exporter, dict(SEARCH, queries=["refund", "x" * 9_000, "credit"], results=RESULTS[:1]))
    assert _call_of(message, "fs_1")["arguments"] == {"queries": ["refund"]}
    assert _call_of(message, "fs_1")["original_lengths"] == {"queries": 3}
    (response,) = _responses_of([message])
    assert response["results"] == [] and response["original_lengths"] == {"results": 1}


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_queries_exactly_as_long_as_what_is_left_are_kept_whole(exporter: InMemorySpanExporter) -> None:
    exact = "q" * 8_190  # 8,192 as JSON: the whole share
    message = _searched(exporter, dict(SEARCH, queries=[exact], results=RESULTS[:1]))
    assert _call_of(message, "fs_1") == {"type": "file_search_call", "arguments": {"queries": [exact]}}
    query = "r" * 8_192  # a web search's query is counted by its length
    message = _searched(exporter, dict(WEB, action={"type": "search", "query": query}))
    assert _call_of(message, "ws_1") == {"type": "web_search_call", "arguments": {"type": "search", "query": query}}


@pytest.mark.usefixtures("instrumented", "cap_16k")
def test_queries_that_fit_are_kept_whole_and_unmarked(exporter: InMemorySpanExporter) -> None:
    search = dict(SEARCH, queries=["refund window", "store credit"], results=_pages(1))
    with ReplayServer([_whole(_answer_with(search, WEB))]) as srv, _client(srv.url) as client:
        client.responses.create(model="gpt-4o", input="Refund window?", tools=TOOLS)
    (message,) = _output(exporter)
    assert _call_of(message, "fs_1") == {"type": "file_search_call",
                                         "arguments": {"queries": ["refund window", "store credit"]}}  # fmt: skip
    assert _call_of(message, "ws_1") == {"type": "web_search_call",
                                         "arguments": {"type": "search", "query": "refund law EU"}}  # fmt: skip
    web = _responses_of([message])[1]
    assert web == {"type": "web_search_call", "sources": WEB["action"]["sources"]}  # type: ignore[index]


def test_file_attributes_are_key_value_lines_of_the_chunk() -> None:
    """Strings, numbers and flags, after the text; the result's ids and score stay out."""
    result = {"file_id": "file-9", "filename": "policy.md", "score": 0.8, "text": "Refunds within 30 days.",
              "attributes": {"author": "Legal", "year": 2025, "public": True, "empty": ""}}  # fmt: skip
    assert server_result_chunks({"type": "file_search_call", "results": [result]}) == [
        "policy.md\nRefunds within 30 days.\nauthor: Legal\nyear: 2025\npublic: true"
    ]
