"""A compaction block (beta context management) is a ``compaction`` part with its summary, streamed or not.

Before, the part was a bare ``{"type": "compaction"}``: the summary the conversation goes on from was dropped, and
a stream's ``compaction_delta`` was ignored. conventions.md 1.5 gives the ``compaction`` part an optional
``content``. No recording holds a compaction: the message is written in the shape of the SDK's own
``BetaMessage`` (validated before use), and its stream is cut by ``anthropic_replay.message_events``.
"""

from __future__ import annotations

from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import MODEL, attrs_json, inline_client  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from evaltrace.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402

SUMMARY = "The user is planning a trip to Lisbon in May; flights are booked, hotels are still open."
MESSAGE: dict[str, Any] = {
    "id": "msg_01Compaction000000001",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [
        {"type": "compaction", "content": SUMMARY, "encrypted_content": None, "signature": None},
        {"type": "text", "text": "Shall I look for hotels near Alfama?"},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5200, "output_tokens": 380},
}


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Any:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


def test_the_message_is_one_the_sdk_accepts() -> None:
    from anthropic.types.beta import BetaMessage

    assert BetaMessage.model_validate(MESSAGE).content[0].type == "compaction"


@pytest.mark.usefixtures("instrumented")
def test_a_compaction_is_recorded_with_its_summary_streamed_or_not(exporter: InMemorySpanExporter) -> None:
    ask = [{"role": "user", "content": "Where were we?"}]
    inline_client(MESSAGE, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=ask)
    stream = inline_client(MESSAGE, stream=True).beta.messages.create(
        model=MODEL, max_tokens=1024, messages=ask, stream=True
    )
    for _ in stream:
        pass
    whole, streamed = exporter.get_finished_spans()
    (message,) = attrs_json(whole, "gen_ai.output.messages")
    assert message["parts"] == [
        {"type": "compaction", "content": SUMMARY},
        {"type": "text", "content": "Shall I look for hotels near Alfama?"},
    ]
    assert attrs_json(streamed, "gen_ai.output.messages") == [message]


@pytest.mark.usefixtures("instrumented")
def test_a_compaction_sent_back_in_the_history_keeps_its_summary(exporter: InMemorySpanExporter) -> None:
    history = [
        {"role": "user", "content": "Where were we?"},
        {"role": "assistant", "content": MESSAGE["content"]},
        {"role": "user", "content": "Yes, please."},
    ]
    inline_client(MESSAGE, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=history)
    (span,) = exporter.get_finished_spans()
    assert attrs_json(span, "gen_ai.input.messages")[1]["parts"][0] == {"type": "compaction", "content": SUMMARY}
