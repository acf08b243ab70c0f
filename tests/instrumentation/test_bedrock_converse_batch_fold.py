"""Bedrock Converse's batch fold (``ConverseStreamAccumulator.add_batch``) records what ``add`` records.

The stream proxy folds the events after the first one with output through ``add_batch``, which appends the text of
a common text delta itself and sends every other event through ``add``. The events are the ones the real boto3
client parses from a real HTTP response (``ReplayServer``): every recorded ``converse_stream`` of the copied
cassettes, and event shapes no recording holds (synthetic AWS event-stream frames, ``bedrock_replay.converse_frame``):
a text delta before its block is open, text to a tool block, a text that is not a string, deltas with no index or
no delta, reasoning and tool result deltas. Folded one by one and in batches, the outcome, the end reason, the
summary and the failure must be equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("boto3")  # an optional extra: not in CI's oldest-versions environment

from bedrock_replay import (
    client,
    converse_frame,
    read_stream,
    recorded_params,
    replay,
    send,
    synthetic,
)

from cassettes import ReplayServer
from evaltrace.instrumentation.bedrock.converse_stream import ConverseStreamAccumulator


def _recorded_events(path: Path, index: int) -> list[Any]:
    with replay(path) as (api, calls, _):
        for call in calls[:index]:
            result = send(api, call)
            if call.method == "converse_stream":
                read_stream(result)
        return read_stream(send(api, calls[index]))


def _record(acc: ConverseStreamAccumulator) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def _folded_both_ways(events: list[Any], size: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(``add`` per event, ``add`` until output then ``add_batch`` in batches of ``size``), as the proxy folds."""
    one_by_one = ConverseStreamAccumulator("req")
    for event in events:
        one_by_one.add(event)
    batched = ConverseStreamAccumulator("req")
    start = 0
    for start, event in enumerate(events, 1):  # noqa: B007  (start: where the batches begin)
        if batched.add(event):
            break
    for at in range(start, len(events), size):
        batched.add_batch(events[at : at + size])
    return _record(batched), _record(one_by_one)


def test_there_are_recorded_converse_streams() -> None:
    assert len(recorded_params("converse_stream")) >= 3


@pytest.mark.parametrize(("path", "index"), recorded_params("converse_stream"))
@pytest.mark.parametrize("size", [1, 3, 64])
def test_every_recorded_stream_folds_in_batches_as_one_by_one(path: Path, index: int, size: int) -> None:
    events = _recorded_events(path, index)
    assert any("contentBlockDelta" in event for event in events)
    batched, one_by_one = _folded_both_ways(events, size)
    assert batched == one_by_one


def _text(text: Any, index: Any = 0) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"delta": {"text": text}}
    if index is not None:
        body["contentBlockIndex"] = index
    return "contentBlockDelta", body


# Event shapes no recording holds (no recorded stream has them): each stream opens with a text delta of block 0,
# so that the rest are folded by ``add_batch``.
SHAPES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "text before its block is open": [_text("a"), _text("b", 1), _text("c", 1), _text("d", 2)],
    "text to a tool block": [
        _text("a"),
        ("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "f"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"x"'}}}),
        _text(": 1}", 1),
        _text("more"),
    ],
    "a text that is not a string": [_text("a"), _text(7), _text(["x"]), _text({"y": 1}), _text("b")],
    "no block index": [_text("a", None), _text("b", None), _text("c"), _text("d", None)],
    "empty and other deltas": [
        _text("a"),
        ("contentBlockDelta", {"contentBlockIndex": 0}),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {"text": "think"}}}),
        _text(" again", 1),
        ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {"redactedContent": "eA=="}}}),
        ("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolResult": {"toolUseId": "t1"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolResult": [{"text": "out"}]}}),
        _text("!", 2),
    ],
    "blocks interleaved": [_text("a"), _text("x", 3), _text("b"), _text("y", 3), _text("", 0), _text("c")],
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("size", [1, 2, 64])
def test_an_event_off_the_fast_path_records_what_add_records(shape: str, size: int) -> None:
    frames = [converse_frame("messageStart", {"role": "assistant"})]
    frames += [converse_frame(kind, body) for kind, body in SHAPES[shape]]
    frames += [
        converse_frame("contentBlockStop", {"contentBlockIndex": 0}),
        converse_frame("messageStop", {"stopReason": "end_turn"}),
        converse_frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 5, "totalTokens": 8}}),
    ]
    recorded = synthetic("amazon.nova-micro-v1:0/converse-stream", b"".join(frames))
    with ReplayServer([recorded]) as server:
        events = read_stream(client(server).converse_stream(modelId="amazon.nova-micro-v1:0", messages=[]))
    assert len(events) == len(frames)
    batched, one_by_one = _folded_both_ways(events, size)
    assert batched == one_by_one
    assert batched[0].output_messages[0]["parts"], "the stream's answer is recorded"
