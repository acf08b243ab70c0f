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

from anthropic_replay import MODEL, attrs_json, events_client, inline_client  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

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


def test_the_message_is_one_the_sdk_accepts() -> None:
    from anthropic.types.beta import BetaMessage

    assert BetaMessage.model_validate(MESSAGE).content[0].type == "compaction"


ASK = [{"role": "user", "content": "Where were we?"}]


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_compaction_is_recorded_with_its_summary_streamed_or_not(exporter: InMemorySpanExporter) -> None:
    ask = ASK
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


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_compaction_sent_back_in_the_history_keeps_its_summary(exporter: InMemorySpanExporter) -> None:
    history = [
        {"role": "user", "content": "Where were we?"},
        {"role": "assistant", "content": MESSAGE["content"]},
        {"role": "user", "content": "Yes, please."},
    ]
    inline_client(MESSAGE, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=history)
    (span,) = exporter.get_finished_spans()
    assert attrs_json(span, "gen_ai.input.messages")[1]["parts"][0] == {"type": "compaction", "content": SUMMARY}


def _events(*deltas: dict[str, Any]) -> list[dict[str, Any]]:
    start = {**MESSAGE, "content": [], "stop_reason": None, "usage": {"input_tokens": 5200, "output_tokens": 1}}
    block = {"type": "compaction", "content": None, "encrypted_content": None}
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 380}},
        {"type": "message_stop"},
    ]


@pytest.mark.usefixtures("anthropic_instrumented")
def test_each_compaction_delta_replaces_the_summary_as_the_sdk_folds_it(exporter: InMemorySpanExporter) -> None:
    # anthropic's own stream fold sets the block's content to each delta's: the last one is the summary.
    cases: list[tuple[tuple[str | None, ...], dict[str, Any]]] = [
        (("The user", None, SUMMARY), {"type": "compaction", "content": SUMMARY}),
        (("The user", SUMMARY, None), {"type": "compaction"}),  # the last is encrypted only: no summary, as the SDK
        (("",), {"type": "compaction", "content": ""}),  # an empty summary is one, as a whole block records it
    ]
    for contents, part in cases:
        exporter.clear()
        deltas = [{"type": "compaction_delta", "content": c, "encrypted_content": "RW5j"} for c in contents]
        stream = events_client(_events(*deltas)).beta.messages.stream(model=MODEL, max_tokens=1024, messages=ASK)
        with stream as events:
            final = events.get_final_message()
        assert final.content[0].content == part.get("content"), contents  # what the SDK itself folded
        (span,) = exporter.get_finished_spans()
        assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [part], contents
        whole = {**MESSAGE, "content": [{**MESSAGE["content"][0], "content": part.get("content")}]}
        exporter.clear()
        inline_client(whole, stream=False).beta.messages.create(model=MODEL, max_tokens=1024, messages=ASK)
        (span,) = exporter.get_finished_spans()
        assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [part], contents  # the same, whole


@pytest.mark.usefixtures("anthropic_instrumented")
def test_a_compaction_delta_in_a_non_beta_stream_is_folded_without_an_error(exporter: InMemorySpanExporter) -> None:
    # The non-beta event types do not know compaction_delta: the SDK parses it as another delta class, and one
    # sent without its content field has no such attribute (before: an AttributeError in the fold, re-raised here).
    deltas = ({"type": "compaction_delta", "encrypted_content": "RW5j"},)
    for _ in events_client(_events(*deltas)).messages.create(model=MODEL, max_tokens=1024, messages=ASK, stream=True):
        pass
    (span,) = exporter.get_finished_spans()
    assert attrs_json(span, "gen_ai.output.messages")[0]["parts"] == [{"type": "compaction"}]
