"""Mistral content chunks that point at or cite what the model read, through the real ``mistralai`` client.

``reference``, ``tool_reference``, ``resource`` and ``resource_link`` chunks, references inside ``thinking``, a chunk
type the SDK does not know (``UnknownContentChunk``) and ``input_audio``: in the request, in a whole response and
in a stream. No recording holds these chunks: the bodies are made here in the API's shape, parsed by the SDK's own
types, and served by the replay server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mistralai")

from mistralai.client import Mistral
from mistralai.client import models as m
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import semconv as sc

CHAT_URI = "https://api.mistral.ai/v1/chat/completions"
MODEL = "magistral-medium-latest"
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@pytest.fixture(autouse=True)
def instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    evaltrace.instrument_mistral()
    yield
    evaltrace.uninstrument_mistral()


def _served(body: str, content_type: str) -> Recorded:
    return Recorded("POST", CHAT_URI, b"", 200, "OK", [("content-type", content_type)], body.encode())


def _answer(content: list[dict[str, Any]]) -> Recorded:
    body = {"id": "r1", "object": "chat.completion", "model": MODEL, "created": 1, "usage": USAGE,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}  # fmt: skip
    return _served(json.dumps(body), "application/json")


def _streamed(contents: list[list[dict[str, Any]]]) -> Recorded:
    chunks = [{"id": "r1", "object": "chat.completion.chunk", "model": MODEL, "created": 1,
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}]}
              for content in contents]  # fmt: skip
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    chunks[-1]["usage"] = USAGE
    return _served("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n", "text/event-stream")


def _parts(span: ReadableSpan, key: str) -> list[list[dict[str, Any]]]:
    return [message["parts"] for message in json.loads(str((span.attributes or {})[key]))]


USER = [{"role": "user", "content": "hi"}]
THINKING = {"type": "thinking", "thinking": [
    {"type": "text", "text": "The search said rain."},
    {"type": "tool_reference", "tool": "web_search", "title": "Forecast", "url": "https://w.example/paris"},
    {"type": "reference", "reference_ids": [3]},
]}  # fmt: skip
CITED = [
    {"type": "tool_reference", "tool": "web_search", "title": "Forecast", "url": "https://w.example/paris"},
    {"type": "reference", "reference_ids": [3]},
]
# A chunk type this SDK does not know: parsed as ``UnknownContentChunk(type="UNKNOWN", raw=...)``.
NEW_KIND = {"type": "citation_span", "start": 0, "end": 8, "source": "doc-1"}


def test_request_chunks_keep_what_the_model_read(exporter: InMemorySpanExporter) -> None:
    messages = [
        {"role": "user", "content": [
            {"type": "reference", "reference_ids": [1, "doc-2"]},
            {"type": "resource", "uri": "mcp://notes/1", "content": {"type": "text", "text": "the note's text"}},
            {"type": "resource", "uri": "mcp://img/1", "content": {"type": "image_url", "image_url": "https://i/1.png"}},
            {"type": "resource_link", "uri": "mcp://notes/2", "metadata": {"title": "Second note"}},
            {"type": "input_audio", "input_audio": "UklGRiQAAABXQVZF"},
            {"type": "input_audio", "input_audio": "https://a.example/clip.wav"},
        ]},
        {"role": "assistant", "content": [THINKING, {"type": "text", "text": "Rain."}]},
        *USER,
    ]  # fmt: skip
    with ReplayServer([_answer([{"type": "text", "text": "ok"}])]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            client.chat.complete(model=MODEL, messages=messages)
            sent = srv.received[0].json()
    assert [c["type"] for c in sent["messages"][0]["content"]][:4] == ["reference", "resource", "resource",
                                                                     "resource_link"]  # fmt: skip
    (span,) = exporter.get_finished_spans()
    user, assistant, _ = _parts(span, sc.GEN_AI_INPUT_MESSAGES)
    assert user == [
        {"type": "reference", "reference_ids": [1, "doc-2"]},
        {"type": "text", "content": "the note's text"},
        {"type": "uri", "modality": "image", "uri": "https://i/1.png"},
        {"type": "resource_link", "uri": "mcp://notes/2", "metadata": {"title": "Second note"}},
        # base64 audio names no format: no data URL (``data:;base64`` would claim text/plain), no media type, and
        # the payload is left out
        {"type": "uri", "modality": "audio", "uri": "<omitted 16 bytes>"},
        {"type": "uri", "modality": "audio", "uri": "https://a.example/clip.wav"},
    ]
    assert assistant == [{"type": "reasoning", "content": "The search said rain."}, *CITED,
                         {"type": "text", "content": "Rain."}]  # fmt: skip


def test_sdk_chunk_objects_convert_like_dicts(exporter: InMemorySpanExporter) -> None:
    chunks = [
        m.ReferenceChunk(reference_ids=[1]),
        m.ResourceChunk(uri="mcp://notes/1", content=m.TextChunk(text="the note's text")),
        m.ResourceLinkChunk(uri="mcp://notes/2"),
        m.AudioChunk(input_audio="UklGRiQAAABXQVZF"),
    ]
    with ReplayServer([_answer([{"type": "text", "text": "ok"}])]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            client.chat.complete(model=MODEL, messages=[m.UserMessage(content=chunks)])
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_INPUT_MESSAGES) == [[
        {"type": "reference", "reference_ids": [1]},
        {"type": "text", "content": "the note's text"},
        {"type": "resource_link", "uri": "mcp://notes/2"},
        {"type": "uri", "modality": "audio", "uri": "<omitted 16 bytes>"},
    ]]  # fmt: skip


EXPECTED_OUTPUT = [
    {"type": "reasoning", "content": "The search said rain."},
    *CITED,
    {"type": "text", "content": "It rains."},
    {"type": "reference", "reference_ids": [3]},
    dict(NEW_KIND),  # its own type and fields, not "UNKNOWN"
]


def test_response_chunks_and_an_unknown_chunk_keep_their_fields(exporter: InMemorySpanExporter) -> None:
    content = [THINKING, {"type": "text", "text": "It rains."}, {"type": "reference", "reference_ids": [3]}, NEW_KIND]
    with ReplayServer([_answer(content)]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            response = client.chat.complete(model=MODEL, messages=USER)
    last = response.choices[0].message.content[-1]  # type: ignore[index]
    assert (last.type, last.raw) == ("UNKNOWN", NEW_KIND)  # type: ignore[union-attr]
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [EXPECTED_OUTPUT]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_streamed_chunks_record_what_a_whole_response_records(
    is_async: bool, exporter: InMemorySpanExporter
) -> None:
    contents = [[THINKING], [{"type": "text", "text": "It "}], [{"type": "text", "text": "rains."}],
                [{"type": "reference", "reference_ids": [3]}, NEW_KIND]]  # fmt: skip
    with ReplayServer([_streamed(contents)]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if is_async:
                stream = await client.chat.stream_async(model=MODEL, messages=USER)
                events = [e async for e in stream]
            else:
                events = list(client.chat.stream(model=MODEL, messages=USER))
    assert len(events) == len(contents)
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [EXPECTED_OUTPUT]


CONVERSATIONS_URI = "https://api.mistral.ai/v1/conversations"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_conversation_thinking_keeps_what_it_cited(streamed: bool, exporter: InMemorySpanExporter) -> None:
    content = [THINKING, {"type": "text", "text": "It rains."}]
    if streamed:
        events = [
            {"type": "conversation.response.started", "conversation_id": "conv_1"},
            *({"type": "message.output.delta", "id": "msg_1", "model": MODEL, "content": c} for c in content),
            {"type": "conversation.response.done", "usage": USAGE},
        ]
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        reply = Recorded("POST", CONVERSATIONS_URI + "#stream", b"", 200, "OK",
                         [("content-type", "text/event-stream")], body.encode())  # fmt: skip
    else:
        answer = {"object": "conversation.response", "conversation_id": "conv_1", "usage": USAGE,
                  "outputs": [{"object": "entry", "type": "message.output", "id": "msg_1", "role": "assistant",
                               "model": MODEL, "content": content}]}  # fmt: skip
        reply = Recorded("POST", CONVERSATIONS_URI, b"", 200, "OK", [("content-type", "application/json")],
                         json.dumps(answer).encode())  # fmt: skip
    with ReplayServer([reply]) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        if streamed:
            list(client.beta.conversations.start_stream(agent_id="ag_1", inputs="weather?"))
        else:
            client.beta.conversations.start(agent_id="ag_1", inputs="weather?")
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [
        [{"type": "reasoning", "content": "The search said rain."}, *CITED, {"type": "text", "content": "It rains."}]
    ]


# Chunks of types the SDK knows whose fields fail its validation: it parses each as ``UnknownContentChunk``.
INVALID = [
    {"type": "text", "text": None},
    {"type": "thinking", "thinking": [{"type": "text", "text": "Rain."}, {"type": "note", "body": "from a tool"}]},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAABBBB", "detail": 5}},
    {"type": "citation_span", "preview": {"icons": ["data:image/png;base64,AAAA"]}},
]
INVALID_PARTS = [
    {"type": "reasoning", "content": "Rain."},
    {"type": "note", "body": "from a tool"},
    {"type": "text", "content": ""},  # a text with no text is an empty text, never a part without content
    {"type": "uri", "modality": "image", "uri": "data:image/png;base64,<omitted 8 bytes>", "mime_type": "image/png"},
    {"type": "citation_span", "preview": {"icons": ["data:image/png;base64,<omitted 4 bytes>"]}},
]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_known_chunk_types_the_sdk_could_not_validate_are_read_as_their_type(
    streamed: bool, exporter: InMemorySpanExporter
) -> None:
    reply = _streamed([[c] for c in INVALID]) if streamed else _answer(INVALID)
    with ReplayServer([reply]) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        if streamed:
            events = list(client.chat.stream(model=MODEL, messages=USER))
            chunks = [e.data.choices[0].delta.content[0] for e in events]  # type: ignore[index]
        else:
            chunks = client.chat.complete(model=MODEL, messages=USER).choices[0].message.content  # type: ignore[assignment]
    assert [c.type for c in chunks] == ["UNKNOWN"] * len(INVALID)  # type: ignore[union-attr]
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    # A stream joins its text pieces, and an empty one adds nothing to them; a whole reply keeps it empty.
    expected = [p for p in INVALID_PARTS if p != {"type": "text", "content": ""}] if streamed else INVALID_PARTS
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [expected]
    assert (attrs[sc.GEN_AI_RESPONSE_MODEL], attrs[sc.GEN_AI_USAGE_INPUT_TOKENS]) == (MODEL, 10)


def test_a_reply_of_one_text_without_text_keeps_its_usage_and_model(exporter: InMemorySpanExporter) -> None:
    """The one-text-part fast path reads the part's content: an unvalidated text chunk must still have one."""
    with ReplayServer([_answer([{"type": "text", "text": None}])]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            client.chat.complete(model=MODEL, messages=USER)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [[{"type": "text", "content": ""}]]
    assert (attrs[sc.GEN_AI_RESPONSE_MODEL], attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) == (MODEL, 5)


def test_no_data_url_payload_reaches_a_generic_part_and_a_resource_keeps_its_uri(
    exporter: InMemorySpanExporter,
) -> None:
    messages = [{"role": "user", "content": [
        {"type": "tool_reference", "tool": "web_search", "title": "Forecast", "url": "data:text/html;base64,PGI+",
         "favicon": "data:image/png;base64,AAAA"},
        {"type": "resource_link", "uri": "data:text/plain;base64,aGk=", "metadata": {"icon": "data:image/png;base64,AAAA"}},
        {"type": "resource", "uri": "mcp://blob/1", "content": {"type": "blob", "blob": "AAAA"}},
        {"type": "resource", "uri": "mcp://notes/3", "content": {"type": "text", "text": None}},
    ]}]  # fmt: skip
    with ReplayServer([_answer([{"type": "text", "text": "ok"}])]) as srv:
        with Mistral(api_key="x", server_url=srv.url) as client:
            client.chat.complete(model=MODEL, messages=messages)
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_INPUT_MESSAGES) == [[
        {"type": "tool_reference", "tool": "web_search", "title": "Forecast",
         "url": "data:text/html;base64,<omitted 4 bytes>", "favicon": "data:image/png;base64,<omitted 4 bytes>"},
        {"type": "resource_link", "uri": "data:text/plain;base64,<omitted 4 bytes>",
         "metadata": {"icon": "data:image/png;base64,<omitted 4 bytes>"}},
        {"type": "resource", "uri": "mcp://blob/1"},  # content it cannot show: what the model read is named by uri
        {"type": "text", "content": ""},
    ]]  # fmt: skip


# Text and what it cites, interleaved: the whole reply's order is the order a stream must record.
WOVEN = [
    {"type": "text", "text": "Paris is rainy"},
    {"type": "tool_reference", "tool": "web_search", "title": "Paris", "url": "https://w.example/paris"},
    {"type": "text", "text": " and Lyon sunny"},
    {"type": "tool_reference", "tool": "web_search", "title": "Lyon", "url": "https://w.example/lyon"},
]
WOVEN_PARTS = [
    {"type": "text", "content": "Paris is rainy"},
    {"type": "tool_reference", "tool": "web_search", "title": "Paris", "url": "https://w.example/paris"},
    {"type": "text", "content": " and Lyon sunny"},
    {"type": "tool_reference", "tool": "web_search", "title": "Lyon", "url": "https://w.example/lyon"},
]
# The stream splits the first text in two pieces: joined, as no other part came between them.
WOVEN_DELTAS = [[{"type": "text", "text": "Paris "}], [{"type": "text", "text": "is rainy"}], *([c] for c in WOVEN[1:])]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_text_and_references_keep_their_order_whole_and_streamed(
    streamed: bool, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    with ReplayServer([_streamed(WOVEN_DELTAS) if streamed else _answer(WOVEN)]) as srv:
        async with Mistral(api_key="x", server_url=srv.url) as client:
            if streamed and is_async:
                [e async for e in await client.chat.stream_async(model=MODEL, messages=USER)]
            elif streamed:
                list(client.chat.stream(model=MODEL, messages=USER))
            elif is_async:
                await client.chat.complete_async(model=MODEL, messages=USER)
            else:
                client.chat.complete(model=MODEL, messages=USER)
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [WOVEN_PARTS]


TOOL_FILE = {"type": "tool_file", "tool": "code_interpreter", "file_id": "file_1", "file_name": "chart.png",
             "file_type": "png"}  # fmt: skip


def _conversation(content: list[Any], streamed: bool) -> Recorded:
    if streamed:
        events = [
            {"type": "conversation.response.started", "conversation_id": "conv_1"},
            *({"type": "message.output.delta", "id": "msg_1", "model": MODEL, "content": c} for c in content),
            {"type": "conversation.response.done", "usage": USAGE},
        ]
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return Recorded("POST", CONVERSATIONS_URI + "#stream", b"", 200, "OK",
                        [("content-type", "text/event-stream")], body.encode())  # fmt: skip
    answer = {"object": "conversation.response", "conversation_id": "conv_1", "usage": USAGE,
              "outputs": [{"object": "entry", "type": "message.output", "id": "msg_1", "role": "assistant",
                           "model": MODEL, "content": content}]}  # fmt: skip
    return Recorded("POST", CONVERSATIONS_URI, b"", 200, "OK", [("content-type", "application/json")],
                    json.dumps(answer).encode())  # fmt: skip


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_conversation_tool_files_and_woven_references(streamed: bool, exporter: InMemorySpanExporter) -> None:
    content = [*WOVEN, TOOL_FILE]
    with ReplayServer([_conversation(content, streamed)]) as srv, Mistral(api_key="x", server_url=srv.url) as client:
        if streamed:
            events = list(client.beta.conversations.start_stream(agent_id="ag_1", inputs="weather?"))
            last = events[-2].data.content  # type: ignore[union-attr]
        else:
            response = client.beta.conversations.start(agent_id="ag_1", inputs="weather?")
            last = response.outputs[0].content[-1]  # type: ignore[union-attr,index]
    assert type(last) is m.ToolFileChunk  # an SDK object, read as a dict is read
    (span,) = exporter.get_finished_spans()
    assert _parts(span, sc.GEN_AI_OUTPUT_MESSAGES) == [[*WOVEN_PARTS, TOOL_FILE]]
