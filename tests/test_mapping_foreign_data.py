"""Foreign data no instrumentation here can produce, as each peer's spec or test suite records it (issue 26).

The Vercel AI SDK is TypeScript: its spans are built with the attributes its telemetry documents and emits
(``ai.operationId``, ``ai.prompt.messages``, ``ai.response.{msToFirstChunk,msToFinish,avgOutputTokensPerSecond,
finishReason,model}``; SDK 4 ``avgCompletionTokensPerSecond`` / ``mimeType``, SDK 3 ``ai.stream.msToFirstChunk`` /
``ai.finishReason``). OpenLLMetry 0.4x content arrays, OpenInference audio contents and its Responses request
body, and GenAI ``blob``/``uri``/``file`` parts take the shapes those projects' tests and specs assert. Real
peers' spans are checked in ``tests/instrumentation/test_peer_foreign_data.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event

from evaltrace.evaluators import Latency
from evaltrace.evaluators._base import question_text
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Conversation, TraceMessage
from test_mapping_conventions import span

# A 1x1 PNG and a silent WAV header: inline media payloads that must never reach a judge.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="


def vercel_do_stream(sdk: int) -> dict[str, Any]:
    """A ``ai.streamText.doStream`` span as AI SDK ``sdk`` writes it (stream-text.ts / LanguageModelV1/V2 prompt)."""
    image = (
        {"type": "image", "image": PNG, "mimeType": "image/png"}
        if sdk < 5
        else {"type": "file", "data": PNG, "mediaType": "image/png"}
    )
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is in this image?"}, image]},
    ]
    attributes: dict[str, Any] = {
        "ai.operationId": "ai.streamText.doStream",
        "ai.model.id": "gpt-4o-mini",
        "ai.model.provider": "openai.chat",
        "ai.prompt.messages": json.dumps(prompt),
        "ai.response.text": "A single pixel.",
    }
    if sdk == 3:
        attributes |= {"ai.stream.msToFirstChunk": 412.5, "ai.finishReason": "stop", "ai.usage.completionTokens": 5}
        return attributes
    attributes |= {
        "ai.response.msToFirstChunk": 412.5,
        "ai.response.msToFinish": 1250.0,
        "ai.response.finishReason": "stop",
        "ai.response.model": "gpt-4o-mini-2024-07-18",
    }
    if sdk == 4:
        return attributes | {"ai.response.avgCompletionTokensPerSecond": 4.0, "ai.usage.completionTokens": 5}
    return attributes | {"ai.response.avgOutputTokensPerSecond": 4.0, "ai.usage.outputTokens": 5}


VERCEL_EVENTS = [Event("ai.stream.firstChunk", {"ai.response.msToFirstChunk": 412.5}), Event("ai.stream.finish")]


@pytest.mark.parametrize("sdk", [4, 5])
def test_vercel_stream_timings_model_finish_reason_and_image_part(sdk: int) -> None:
    trace = trace_from_spans([span("ai.streamText.doStream", vercel_do_stream(sdk), events=VERCEL_EVENTS)])

    assert trace.metrics.latency_first_token_ms in (412, 413)
    assert trace.metrics.latency_last_token_ms == 1250
    assert trace.metrics.tokens_per_second == 4.0
    assert not Latency(max_first_token_ms=100).evaluate(trace).passed  # a first-token limit fires on Vercel spans
    assert [(s.model, s.request_model, s.finish_reasons) for s in trace.llm_steps] == [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini", ["stop"])
    ]
    user = trace.messages[1]
    assert user.content == {
        "parts": [
            {"type": "text", "content": "What is in this image?"},
            {"type": "blob", "modality": "image", "content": f"<{len(PNG)} base64 characters>",
             "mime_type": "image/png"},
        ]
    }  # fmt: skip
    assert question_text(trace) == "What is in this image?"
    assert PNG not in trace.model_dump_json()


def test_vercel_sdk3_first_chunk_and_finish_reason() -> None:
    trace = trace_from_spans([span("ai.streamText.doStream", vercel_do_stream(3))])
    assert trace.metrics.latency_first_token_ms in (412, 413)
    assert trace.metrics.latency_last_token_ms is None  # SDK 3 recorded no finish time
    assert [(s.model, s.finish_reasons) for s in trace.llm_steps] == [("gpt-4o-mini", ["stop"])]


def test_openllmetry_content_arrays_give_typed_image_parts_and_its_model_and_finish_reason() -> None:
    """OpenLLMetry 0.4x: ``gen_ai.prompt.N.content`` is the JSON content array (its OpenAI ``test_vision``
    asserts ``[{"type": "text", ...}, {"type": "image_url", "image_url": {"url": ...}}]``; its Anthropic tests
    record Anthropic blocks, ``source`` with base64 data)."""
    content = [
        {"type": "text", "text": "Compare these."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}},
    ]
    attributes = {
        "llm.request.type": "chat",
        "llm.request.model": "gpt-4o",
        "llm.response.model": "gpt-4o-2024-08-06",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": json.dumps(content),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Two pixels.",
        "gen_ai.completion.0.finish_reason": "length",
    }
    trace = trace_from_spans([span("openai.chat", attributes)])

    assert trace.messages[0].content == {
        "parts": [
            {"type": "text", "content": "Compare these."},
            {"type": "uri", "modality": "image", "uri": f"data:image/png;base64,<omitted {len(PNG)} bytes>",
             "mime_type": "image/png"},
            {"type": "blob", "modality": "image", "content": f"<{len(PNG)} base64 characters>",
             "mime_type": "image/png"},
            {"type": "blob", "modality": "audio", "content": f"<{len(WAV)} base64 characters>",
             "mime_type": "audio/wav"},
            {"type": "uri", "modality": "image", "uri": "https://example.invalid/cat.png"},
        ]
    }  # fmt: skip
    assert question_text(trace) == "Compare these."
    assert PNG not in trace.model_dump_json() and WAV not in trace.model_dump_json()
    assert [(s.model, s.request_model, s.finish_reasons) for s in trace.llm_steps] == [
        ("gpt-4o-2024-08-06", "gpt-4o", ["length"])
    ]


def test_openinference_audio_and_image_contents_are_typed_parts() -> None:
    """OpenInference semconv: ``message_content.type`` ``audio`` with ``audio.{url,mime_type,transcript}`` and
    ``image`` with ``image.url``, each nested under its type (``message_content.audio.audio.url``)."""
    prefix = "llm.input_messages.0.message"
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-audio-preview",
        "llm.finish_reason": "stop",
        f"{prefix}.role": "user",
        f"{prefix}.contents.0.message_content.type": "audio",
        f"{prefix}.contents.0.message_content.audio.audio.url": f"data:audio/wav;base64,{WAV}",
        f"{prefix}.contents.0.message_content.audio.audio.mime_type": "audio/wav",
        f"{prefix}.contents.0.message_content.audio.audio.transcript": "hello",
        f"{prefix}.contents.1.message_content.type": "text",
        f"{prefix}.contents.1.message_content.text": "Transcribe and describe.",
        f"{prefix}.contents.2.message_content.type": "image",
        f"{prefix}.contents.2.message_content.image.image.url": "https://example.invalid/cat.png",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Someone says hello.",
    }
    trace = trace_from_spans([span("ChatCompletion", attributes)])

    assert trace.messages[0].content == {
        "parts": [
            {"type": "uri", "modality": "audio", "uri": f"data:audio/wav;base64,<omitted {len(WAV)} bytes>",
             "mime_type": "audio/wav", "transcript": "hello"},
            {"type": "text", "content": "Transcribe and describe."},
            {"type": "uri", "modality": "image", "uri": "https://example.invalid/cat.png"},
        ]
    }  # fmt: skip
    assert question_text(trace) == "Transcribe and describe."
    assert [(s.model, s.finish_reasons) for s in trace.llm_steps] == [("gpt-4o-audio-preview", ["stop"])]


def test_genai_blob_uri_and_file_parts_keep_no_payload_and_a_session_turn_reads_the_text() -> None:
    """GenAI parts (conventions.md 1.5): ``blob`` (base64 ``content``), ``uri``, ``file``."""
    parts = [
        {"type": "text", "content": "What do these show?"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG},
        {"type": "uri", "modality": "image", "uri": f"data:image/png;base64,{PNG}"},
        {"type": "file", "modality": "document", "file_id": "file-abc"},
    ]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": parts}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Pixels."}], "finish_reason": "stop"}]
        ),
    }
    trace = trace_from_spans([span("chat gemini-2.5-flash", attributes)])

    assert PNG not in trace.model_dump_json()
    assert question_text(trace) == "What do these show?"
    turn = Conversation.from_traces("s-1", [trace]).turns[0]
    assert turn.user_input == "What do these show?"
    # No gen_ai.response.* attribute: the request's model, and the output message's finish_reason.
    assert [(s.model, s.request_model, s.finish_reasons) for s in trace.llm_steps] == [
        ("gemini-2.5-flash", "gemini-2.5-flash", ["stop"])
    ]


RESPONSES_BODY = {
    "model": "gpt-4o",
    "instructions": "Use the tool.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Call the tool."}]},
        {"type": "function_call", "call_id": "call_1", "name": "tool", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Ouch."},
    ],
}


def test_an_openinference_responses_request_body_alone_gives_the_input_messages() -> None:
    """OpenInference versions before their Responses support record the request body only, in input.value."""
    attributes = {
        "openinference.span.kind": "LLM",
        "input.value": json.dumps(RESPONSES_BODY),
        "input.mime_type": "application/json",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "The tool failed.",
    }
    trace = trace_from_spans([span("Response", attributes)])

    assert [(m.role, m.content, m.tool_call and m.tool_call.name, m.tool_call_id) for m in trace.messages] == [
        ("system", "Use the tool.", None, None),
        ("user", "Call the tool.", None, None),
        ("assistant", None, "tool", None),
        ("tool", "Ouch.", None, "call_1"),
        ("assistant", "The tool failed.", None, None),
    ]
    assert trace.input == {"input": "Call the tool."}
    call = trace.messages[2].tool_call
    assert call is not None and call.id == "call_1"
    # The call and its output came in as the request's history: this call made neither.
    assert trace.tool_calls == [] and trace.tool_results == []


def test_a_responses_list_in_the_older_genai_prompt_event_gives_messages() -> None:
    """GenAI 1.26-era ``gen_ai.content.prompt`` event, its ``gen_ai.prompt`` holding the Responses ``input`` list."""
    events = [
        Event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(RESPONSES_BODY["input"])}),
        Event(
            "gen_ai.content.completion", {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "No."}])}
        ),
    ]
    trace = trace_from_spans([span("chat gpt-4o", {"gen_ai.operation.name": "chat"}, events=events)])

    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
    assert trace.messages[0].content == "Call the tool."
    assert trace.messages[2].content == "Ouch."


def test_older_openllmetry_chunk_events_give_the_stream_timings() -> None:
    """Older OpenLLMetry (``llm.content.completion.chunk``) chunk events on a span of its flattened messages."""
    start = 1_700_000_000_000_000_000
    events = [Event("llm.content.completion.chunk", timestamp=start + ms * 1_000_000) for ms in (200, 260, 300)]
    attributes = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
        "gen_ai.completion.0.content": "hello",
        "gen_ai.usage.completion_tokens": 10,
    }
    trace = trace_from_spans([span("openai.chat", attributes, events=events)])
    assert trace.metrics.latency_first_token_ms == 200
    assert trace.metrics.latency_last_token_ms == 300
    assert trace.metrics.stream_chunks == 3
    assert trace.metrics.tokens_per_second == pytest.approx(10 / 0.1)


def test_openllmetry_responses_reasoning_summary_is_thinking() -> None:
    """OpenLLMetry's Responses wrapper writes the reasoning summary to ``gen_ai.completion.0.reasoning`` (JSON of
    the summary parts) beside the answer text."""
    summary = [{"type": "summary_text", "text": "The user wants a number."}]
    attributes = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Pick a number.",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "7",
        "gen_ai.completion.0.reasoning": json.dumps(summary),
    }
    trace = trace_from_spans([span("openai.response", attributes)])
    assert trace.output.final_answer == "7"
    assert trace.output.thinking == "The user wants a number."


@pytest.mark.parametrize(
    "attributes",
    [
        # a part type that is a list (unhashable), media blocks without a payload
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
            {"type": ["x"]}, {"type": "image", "image": 5}, {"type": "input_audio", "input_audio": 5}]}])},
        # Responses items of shapes the API never sends, in input.value
        {"openinference.span.kind": "LLM", "input.value": json.dumps({"input": [
            {"type": ["x"]}, {"type": "reasoning", "summary": 5}, {"type": "function_call", "arguments": 5}]})},
        {"openinference.span.kind": "LLM", "llm.input_messages.0.message.function_call_name": 5,
         "llm.finish_reason": ["stop"], "llm.model_name": 3},
        {"ai.operationId": "ai.streamText.doStream", "ai.response.msToFirstChunk": "412",
         "ai.response.msToFinish": float("nan"), "ai.response.finishReason": 1},
        {"llm.request.type": "chat", "gen_ai.completion.0.reasoning": '[1, {"text": 2}]',
         "gen_ai.response.finish_reasons": 7},
    ],
)  # fmt: skip
def test_malformed_foreign_data_is_skipped_never_raised(attributes: dict[str, Any]) -> None:
    events = [
        Event("First Token Stream Event", timestamp=1),
        Event("gen_ai.content.prompt", {"gen_ai.prompt": '[{"type": 1}]'}),
    ]
    trace = trace_from_spans([span("llm", attributes, events=events)])
    assert trace.model_dump_json()
    assert all(isinstance(r, str) for s in trace.llm_steps for r in s.finish_reasons)


@pytest.mark.parametrize("stamp", ["2023-11-14T22:13:20.250000Z", '"2023-11-14T22:13:20.250000Z"'])
def test_langfuse_completion_start_time_and_model_name(stamp: str) -> None:
    """Langfuse SDK generations: ``completion_start_time`` (ISO; older SDKs JSON-encode it twice) and the model."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "langfuse.observation.type": "generation",
        "langfuse.observation.model.name": "gpt-4o-2024-08-06",
        "langfuse.observation.completion_start_time": stamp,
    }
    trace = trace_from_spans([span("generation", attributes)])  # starts at 1_700_000_000 s (22:13:20 UTC)
    assert trace.metrics.latency_first_token_ms == 250
    assert [s.model for s in trace.llm_steps] == ["gpt-4o-2024-08-06"]


def test_message_text_is_the_text_parts_of_media_and_the_json_of_other_objects() -> None:
    media = TraceMessage(role="user", content={"parts": [{"type": "text", "content": "a"}, "b", {"type": "uri"}]})
    assert media.text() == "a\nb"
    assert (
        TraceMessage(role="user", content={"parts": [{"type": "blob", "content": "<9 base64 characters>"}]}).text()
        is None
    )
    assert TraceMessage(role="tool", content={"sky": "rain", "c": 1}).text() == '{"c": 1, "sky": "rain"}'
    assert TraceMessage(role="user", content="plain").text() == "plain"
