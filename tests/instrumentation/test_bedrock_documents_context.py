"""Text documents sent to Bedrock Converse are the RAG evaluators' context, never the question.

A Converse request may carry a ``document`` content block whose source is text (``source.text``) or text chunks
(``source.content``, for citations). Before, it was recorded as a plain ``text`` part: the question became the
user's words and the document's text run together, and ``context_chunks`` found no context (Faithfulness skipped
the answer). Now it is a text part marked ``"document": true`` with its ``name`` as the title (and its
``context``), as Anthropic's text documents are, so the trace mapping makes it a context chunk
(``mapping._request_documents``) and the question leaves it out, for ``converse`` and ``converse_stream``.

Replayed traffic (tests/fixtures/bedrock-cassettes, provenance in its README) through a real boto3 client:
pydantic-ai's recorded ``converse`` of a text document (sent as ``bytes``, then answered) and OpenInference's
recorded ``converse-stream`` answer. No recording sends a document as ``source.text`` / ``source.content``: the
recorded request is sent with its document given so (boto3 validates it against its service model), and the
replay server answers with the recorded response.
"""

from __future__ import annotations

import base64
import copy
from dataclasses import replace
from typing import Any

import pytest

boto3 = pytest.importorskip("boto3")

from bedrock_replay import OPENINFERENCE, PYDANTIC_AI, only_span, read_stream, replay, send  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from evaltrace.evaluators._base import MissingInputError, context_chunks, question_text  # noqa: E402
from evaltrace.mapping import trace_from_spans  # noqa: E402

TEXT_DOCUMENT = PYDANTIC_AI / "cassettes" / "test_bedrock" / "test_text_as_binary_content_input.yaml"
STREAM = OPENINFERENCE / "TestConverseStream.test_invoke_text_message.yaml"
QUESTION = "What is the main content on this document?"


pytestmark = pytest.mark.usefixtures("bedrock_instrumented")


def _with_source(params: dict[str, Any], source: dict[str, Any], **document: Any) -> dict[str, Any]:
    """The recorded params, the user message's document given ``source`` (and ``document``'s other fields)."""
    sent = copy.deepcopy(params)
    (block,) = [b for b in sent["messages"][0]["content"] if "document" in b]
    block["document"] = {**{k: v for k, v in block["document"].items() if k != "source"}, "source": source, **document}
    return sent


def _recorded_text(params: dict[str, Any]) -> str:
    (block,) = [b for b in params["messages"][0]["content"] if "document" in b]
    return base64.b64decode(block["document"]["source"]["bytes"]).decode()


@pytest.mark.parametrize("shape", ["text", "content"])
def test_a_converse_text_document_is_context_and_not_the_question(exporter: InMemorySpanExporter, shape: str) -> None:
    with replay(TEXT_DOCUMENT) as (api, calls, _):
        (call,) = calls
        text = _recorded_text(call.params)  # "This is a test document."
        source = (
            {"text": text} if shape == "text" else {"content": [{"text": "This is a "}, {"text": "test document."}]}
        )
        result = send(api, replace(call, params=_with_source(call.params, source)))
    assert result["output"]["message"]["content"][0]["text"].startswith("The document you're referring to")
    trace = trace_from_spans([only_span(exporter)])
    assert question_text(trace) == QUESTION  # the user's words alone
    assert context_chunks(trace) == [f"Document 1\n{text}"]  # the document, named
    assert trace.output.final_answer == result["output"]["message"]["content"][0]["text"]


def test_a_document_context_field_is_kept_with_its_text(exporter: InMemorySpanExporter) -> None:
    with replay(TEXT_DOCUMENT) as (api, calls, _):
        (call,) = calls
        params = _with_source(call.params, {"text": "This is a test document."}, context="Our staff handbook.")
        send(api, replace(call, params=params))
    trace = trace_from_spans([only_span(exporter)])
    assert context_chunks(trace) == ["Document 1\nThis is a test document.\ncontext: Our staff handbook."]


def test_a_document_of_bytes_stays_media_and_is_no_context(exporter: InMemorySpanExporter) -> None:
    """As recorded: a document's bytes are never recorded, so there is no text to judge against."""
    with replay(TEXT_DOCUMENT) as (api, calls, _):
        (call,) = calls
        send(api, call)
    trace = trace_from_spans([only_span(exporter)])
    assert question_text(trace) == QUESTION
    with pytest.raises(MissingInputError):
        context_chunks(trace)


def test_a_converse_stream_text_document_is_context_and_not_the_question(exporter: InMemorySpanExporter) -> None:
    document = {"document": {"name": "Arithmetic", "format": "txt", "source": {"text": "1 + 2 + ... + 10 = 55."}}}
    with replay(STREAM) as (api, calls, _):
        (call,) = calls
        params = copy.deepcopy(call.params)
        params["messages"][0]["content"].insert(0, document)
        events = read_stream(send(api, replace(call, params=params)))
    assert any("messageStop" in event for event in events)
    trace = trace_from_spans([only_span(exporter)])
    assert question_text(trace) == "What is sum of 1 to 10?"
    assert context_chunks(trace) == ["Arithmetic\n1 + 2 + ... + 10 = 55."]
    assert trace.output.final_answer


def test_a_tool_result_of_one_text_document_shows_the_judge_no_marker(exporter: InMemorySpanExporter) -> None:
    """A ``toolResult`` of one ``document`` is that part alone: its ``document`` mark is evaltrace's, not the tool's."""
    document = {"document": {"name": "Policy", "format": "txt", "source": {"text": "Refunds within 30 days."}}}
    with replay(TEXT_DOCUMENT) as (api, calls, _):
        (call,) = calls
        params = copy.deepcopy(call.params)
        params["messages"] = [
            {"role": "user", "content": [{"text": QUESTION}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "policy", "input": {}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [document]}}]},
        ]
        params["toolConfig"] = {"tools": [{"toolSpec": {"name": "policy", "inputSchema": {"json": {}}}}]}
        send(api, replace(call, params=params))
    trace = trace_from_spans([only_span(exporter)])
    (result,) = [m for m in trace.messages if m.role == "tool"]
    assert isinstance(result.content, dict) and "document" not in result.content
    assert "Refunds within 30 days." in str(result.content)
