"""An Anthropic answer's citations: each text block's ``citations`` are its text part's, whole and streamed.

Before, a text block was recorded as its text alone, and a stream's ``citations_delta`` events were skipped: what
each sentence of a grounded answer quoted (``cited_text``) and from where was not in the trace.

No recording holds citations: the message is ``text.json`` (hand-written from the API reference, see
tests/fixtures/anthropic/README.md) with its content replaced by text blocks citing each of the five citation
types in the shapes of the API reference, validated by the SDK's own ``Message`` type. It is served by a real HTTP
server on 127.0.0.1 to the real anthropic client, whole and as the event stream the API sends for it: each text
block starts empty, then its ``citations_delta`` events, one citation each, and its text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, fixture_json, message_events  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from cassettes import Recorded, ReplayServer  # noqa: E402
from evaltrace.evaluators._base import MissingInputError, context_chunks  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

WEB = {"type": "web_search_result_location", "cited_text": "Refunds within 30 days.", "url": "https://a.example/r",
       "title": "Refunds", "encrypted_index": "Eo8BCioIAhgBIiQ2"}  # fmt: skip
SEARCH = {"type": "search_result_location", "cited_text": "Store credit after that.", "source": "kb://policy",
          "title": "Policy", "search_result_index": 0, "start_block_index": 1, "end_block_index": 2}  # fmt: skip
CHAR = {"type": "char_location", "cited_text": "30 days", "document_index": 0, "document_title": "Terms",
        "start_char_index": 10, "end_char_index": 17}  # fmt: skip
PAGE = {"type": "page_location", "cited_text": "See page 2.", "document_index": 1, "document_title": None,
        "start_page_number": 2, "end_page_number": 3, "file_id": "file_011"}  # fmt: skip
BLOCK = {"type": "content_block_location", "cited_text": "Credit.", "document_index": 2, "start_block_index": 0,
         "end_block_index": 1}  # fmt: skip
CONTENT = [
    {"type": "text", "text": "Refunds are accepted within 30 days", "citations": [WEB, CHAR]},
    {"type": "text", "text": ", then store credit.", "citations": [SEARCH, PAGE, BLOCK]},
    {"type": "text", "text": " Anything else?", "citations": None},
]
RECORDED = [
    {"type": "text", "content": "Refunds are accepted within 30 days", "citations": [
        {"type": "web_search_result_location", "cited_text": "Refunds within 30 days.", "source": "https://a.example/r",
         "title": "Refunds"},
        {"type": "char_location", "cited_text": "30 days", "title": "Terms", "document_index": 0,
         "start_char_index": 10, "end_char_index": 17}]},
    {"type": "text", "content": ", then store credit.", "citations": [
        {"type": "search_result_location", "cited_text": "Store credit after that.", "source": "kb://policy",
         "title": "Policy", "search_result_index": 0, "start_block_index": 1, "end_block_index": 2},
        {"type": "page_location", "cited_text": "See page 2.", "document_index": 1, "start_page_number": 2,
         "end_page_number": 3, "file_id": "file_011"},
        {"type": "content_block_location", "cited_text": "Credit.", "document_index": 2, "start_block_index": 0,
         "end_block_index": 1}]},
    {"type": "text", "content": " Anything else?"},
]  # fmt: skip


def _message() -> dict[str, Any]:
    message = dict(fixture_json("text.json"), content=CONTENT)
    anthropic.types.Message.model_validate(message)  # the API reference's shapes, as the SDK types them
    return message


def _stream(message: dict[str, Any], *, at_start: bool = False) -> bytes:
    """The API's events: a text block starts empty, its citations come one per ``citations_delta``, then its text.

    ``at_start``: each text block's citations are given whole on its ``content_block_start`` instead (as a replayed
    or proxied stream may send them), with no ``citations_delta`` at all.
    """
    events: list[dict[str, Any]] = []
    for event in message_events(message):
        block = event.get("content_block")
        if event["type"] == "content_block_start" and block["type"] == "text" and at_start:
            events.append(dict(event, content_block={"type": "text", "text": "", "citations": block["citations"]}))
        elif event["type"] == "content_block_start" and block["type"] == "text":
            events.append(dict(event, content_block={"type": "text", "text": "", "citations": None}))
            for citation in block["citations"] or ():
                delta = {"type": "citations_delta", "citation": citation}
                events.append({"type": "content_block_delta", "index": event["index"], "delta": delta})
        else:
            events.append(event)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.usefixtures("anthropic_instrumented")
@pytest.mark.parametrize(
    ("stream", "at_start"), [(False, False), (True, False), (True, True)], ids=["whole", "streamed", "cited at start"]
)
def test_each_text_block_keeps_what_it_cited(exporter: InMemorySpanExporter, stream: bool, at_start: bool) -> None:
    message = _message()
    if stream:
        kind, body = "text/event-stream", _stream(message, at_start=at_start)
    else:
        kind, body = "application/json", json.dumps(message)
    served = Recorded("POST", "/v1/messages", b"", 200, "OK", [("content-type", kind)],
                      body if isinstance(body, bytes) else body.encode())  # fmt: skip
    ask = [{"role": "user", "content": "Can I get a refund?"}]
    with ReplayServer([served]) as srv, anthropic.Anthropic(api_key="x", base_url=srv.url, max_retries=0) as client:
        answer = client.messages.create(model=MODEL, max_tokens=256, messages=ask, stream=stream)
        if stream:
            list(answer)
    (span,) = exporter.get_finished_spans()
    (output,) = json.loads(str(span.attributes["gen_ai.output.messages"]))  # type: ignore[index]
    assert output["parts"] == RECORDED
    assert "Eo8BCioIAhgBIiQ2" not in str(span.attributes["gen_ai.output.messages"])  # type: ignore[index]


@pytest.mark.usefixtures("anthropic_instrumented")
def test_an_answer_echoed_back_keeps_its_citations(exporter: InMemorySpanExporter) -> None:
    """The next turn sends the cited answer back as history: its text part records what it cited, as the answer's."""
    served = Recorded("POST", "/v1/messages", b"", 200, "OK", [("content-type", "application/json")],
                      json.dumps(fixture_json("text.json")).encode())  # fmt: skip
    history = [{"role": "user", "content": "Can I get a refund?"}, {"role": "assistant", "content": CONTENT},
               {"role": "user", "content": "Thanks."}]  # fmt: skip
    with ReplayServer([served]) as srv, anthropic.Anthropic(api_key="x", base_url=srv.url, max_retries=0) as client:
        client.messages.create(model=MODEL, max_tokens=256, messages=history)
    (span,) = exporter.get_finished_spans()
    _, assistant, _ = json.loads(str(span.attributes["gen_ai.input.messages"]))  # type: ignore[index]
    assert assistant["parts"] == RECORDED


@pytest.mark.usefixtures("anthropic_instrumented")
def test_cited_text_is_the_answers_evidence_never_context(exporter: InMemorySpanExporter) -> None:
    """What a citation quotes is the model's pointer into a source, not a source the model was given: judging an
    answer's faithfulness against its own quotes would pass any answer that cites."""
    served = Recorded("POST", "/v1/messages", b"", 200, "OK", [("content-type", "application/json")],
                      json.dumps(_message()).encode())  # fmt: skip
    ask = [{"role": "user", "content": "Can I get a refund?"}]
    with ReplayServer([served]) as srv, anthropic.Anthropic(api_key="x", base_url=srv.url, max_retries=0) as client:
        client.messages.create(model=MODEL, max_tokens=256, messages=ask)
    trace = trace_from_spans(exporter.get_finished_spans())
    assert trace.output.final_answer == "\n".join(block["text"] for block in CONTENT)  # the text parts, joined
    with pytest.raises(MissingInputError):  # no context to judge against: the quotes are not one
        context_chunks(trace)
