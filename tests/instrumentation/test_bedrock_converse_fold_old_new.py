"""Converse's batch fold (s17-conv) records exactly what the batch fold it replaced recorded (old against new).

s17-conv rewrote ``ConverseStreamAccumulator.add_batch`` to keep the block of the previous delta's index across a run
of deltas, to test the body for None instead of ``dict``, and to read ``type``, ``dict`` and ``str`` as locals. The
fold it replaced is kept below verbatim, as a subclass of today's accumulator, and both fold the same events as the
stream proxy folds them (``add`` up to the first output, then batches of 1, 2, 3, 16 or 64): every recorded
``converse_stream`` in ``tests/fixtures`` whole, as the real boto3 client parses it from the recorded bytes, a few
dozen streams edited at random on the wire (framed and parsed again by the real client: indexes, texts, blocks
opened or replaced mid-run, tool, reasoning and tool result deltas, stop and metadata events mid-stream), and a few
hundred edited after the parse (another type for the event, its body, its delta, its text or its index; a key
deleted; an unhashable index). The whole state of the accumulator (every block and its fragments) and what the span
is built from (``outcome()``, ``end_reason()``, ``summary()``, ``failure()``) must be equal.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("boto3")  # an optional extra: not in CI's oldest-versions environment

from bedrock_replay import client, converse_frame, read_stream, recorded_params, replay, send, synthetic
from fold_differential import differential, fold

from cassettes import ReplayServer
from evaltrace._internal.engine.codec import chunk_failed
from evaltrace.instrumentation.bedrock.converse_stream import ConverseStreamAccumulator

SEED = 20261130
WIRE_STREAMS = 40
PARSED_STREAMS = 400
SIZES = (1, 2, 3, 16, 64)


class _New(ConverseStreamAccumulator):
    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("req")


class _Old(_New):
    """The batch fold before s17-conv, verbatim."""

    __slots__ = ()

    def add_batch(self, events: list[Any]) -> None:
        blocks = self.blocks
        add = self.add
        for event in events:
            try:
                if type(event) is dict:
                    body = event.get("contentBlockDelta")
                    if type(body) is dict:
                        delta = body.get("delta")
                        if type(delta) is dict:
                            text = delta.get("text")
                            if type(text) is str:
                                block = blocks.get(body.get("contentBlockIndex", 0))
                                if block is not None:
                                    block.fragments.append(text)  # ``str(text)`` is ``text`` itself
                                    continue
                add(event)
            except Exception:
                chunk_failed()


RECORDED = recorded_params("converse_stream")


def _recorded_events(path: Path, index: int) -> list[Any]:
    with replay(path) as (api, calls, _):
        for call in calls[:index]:
            result = send(api, call)
            if call.method == "converse_stream":
                read_stream(result)
        return read_stream(send(api, calls[index]))


def test_every_recorded_converse_stream_is_here() -> None:
    assert len(RECORDED) >= 3


@pytest.mark.parametrize(("path", "index"), RECORDED)
def test_a_recorded_stream_folds_the_same_through_the_old_and_the_new_batch_fold(path: Path, index: int) -> None:
    events = _recorded_events(path, index)
    assert any("contentBlockDelta" in event for event in events)
    for size in SIZES:
        new = fold(_New, events, size)
        assert new == fold(_Old, events, size), size
        assert new[0] is None


# --- random edits --------------------------------------------------------------------------------------------------

TEXTS = ("", "a", " word", "é\n", '{"k": 1}', "x" * 40)
WIRE_INDEXES = (0, 1, 2, 3, 300, 301)  # 300 and up: ints the parse makes anew for each event (no shared object)


def _bases() -> list[list[dict[str, Any]]]:
    """The recorded streams' events, as ``(event type, body)`` dicts the parse returns (one key each)."""
    bases = []
    for param in RECORDED:
        path, index = param.values
        bases.append(_recorded_events(path, index))
    return bases


BASES: list[list[dict[str, Any]]] = []


def _base_events() -> list[list[dict[str, Any]]]:
    if not BASES:
        BASES.extend(_bases())
    return BASES


def _text(rng: random.Random, index: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"delta": {"text": rng.choice(TEXTS)}, "contentBlockIndex": index}}


def _wire_edit(rng: random.Random, event: dict[str, Any]) -> list[dict[str, Any]]:
    """Events in the service's shapes, which the real client parses back to the same dicts."""
    index = rng.choice(WIRE_INDEXES)
    what = rng.randrange(10)
    if what == 0:
        return [event, _text(rng, index)]
    if what == 1:  # a run of deltas to one block
        return [event] + [_text(rng, index) for _ in range(rng.randint(2, 6))]
    if what == 2:  # a block opened, or one replaced, mid-run
        start = rng.choice(({"toolUse": {"toolUseId": "t1", "name": "f"}}, {"toolResult": {"toolUseId": "t2"}}))
        return [event, {"contentBlockStart": {"contentBlockIndex": index, "start": start}}, _text(rng, index)]
    if what == 3:
        tool = {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"toolUse": {"input": '{"x": 1'}}}}
        return [tool, event]
    if what == 4:
        reasoning = rng.choice(({"text": "think"}, {"redactedContent": b"x"}, {"signature": "s"}))
        return [event, {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"reasoningContent": reasoning}}}]
    if what == 5:
        result = {"contentBlockDelta": {"contentBlockIndex": index, "delta": {"toolResult": [{"text": "out"}]}}}
        return [result, event]
    if what == 6:
        return [{"messageStop": {"stopReason": rng.choice(("end_turn", "tool_use", "max_tokens"))}}, event]
    if what == 7:
        usage = {"inputTokens": 3, "outputTokens": 5, "totalTokens": 8}
        return [event, {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}]
    if what == 8:
        return [{"contentBlockStop": {"contentBlockIndex": index}}, event]
    body = event.get("contentBlockDelta")
    if isinstance(body, dict):
        body.pop("contentBlockIndex", None)  # no index: block 0
    return [event]


def _window(rng: random.Random, edit: Any) -> list[dict[str, Any]]:
    base = rng.choice(_base_events())
    length = rng.randint(1, 70)
    begin = rng.randrange(1, max(2, len(base) - length)) if len(base) > 2 else 1
    events = copy.deepcopy([base[0], *base[begin : begin + length]])
    if rng.random() < 0.5:
        events += copy.deepcopy(base[-2:])
    out: list[dict[str, Any]] = []
    for position, event in enumerate(events):
        out += edit(rng, event) if position and rng.random() < 0.3 else [event]
    return out


def _frame(kind: str, body: dict[str, Any]) -> bytes:
    """``converse_frame`` with a blob (``redactedContent``) in base64, as the service sends it."""
    return converse_frame(kind, json.loads(json.dumps(body, default=lambda raw: base64.b64encode(raw).decode())))


def _through_the_client(streams: list[list[dict[str, Any]]]) -> list[list[Any]]:
    """Each stream framed as Bedrock sends it, and parsed by the real boto3 client."""
    recorded = []
    for events in streams:
        frames = [_frame(kind, body) for event in events for kind, body in event.items()]
        recorded.append(synthetic("amazon.nova-micro-v1:0/converse-stream", b"".join(frames)))
    with ReplayServer(recorded) as server:
        api = client(server)
        return [read_stream(api.converse_stream(modelId="amazon.nova-micro-v1:0", messages=[])) for _ in streams]


def test_random_streams_edited_on_the_wire_fold_the_same_through_the_old_and_the_new_batch_fold() -> None:
    rng = random.Random(SEED)
    sent = [_window(rng, _wire_edit) for _ in range(WIRE_STREAMS)]
    parsed = _through_the_client(sent)
    assert parsed == sent  # the parse gives back the edited dicts: the edits are in the service's shapes
    streams = [(events, rng.choice(SIZES), number) for number, events in enumerate(parsed)]
    clean, total, general = differential(_New, _Old, streams)
    assert clean == WIRE_STREAMS
    assert total - general >= total // 2, (total, general)  # the batch fold itself read most events


class _Hashed:
    """An index the parse never makes: equal to and hashed as an int (the kept block is only for ``int``)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return other == self.value


def _parsed_edit(rng: random.Random, event: dict[str, Any]) -> list[Any]:
    """An event changed after the parse: another type somewhere, a key deleted (or a wire edit)."""
    body = event.get("contentBlockDelta")
    what = rng.randrange(9)
    if what == 0:
        return [rng.choice((None, [event], "event", {"contentBlockDelta": None}))]
    if what == 1 and isinstance(body, dict):
        event["contentBlockDelta"] = rng.choice(([body], "body", 7))
    elif what == 2 and isinstance(body, dict):
        body["delta"] = rng.choice((None, "d", [body.get("delta")], {}))
    elif what == 3 and isinstance(body, dict) and isinstance(body.get("delta"), dict):
        body["delta"]["text"] = rng.choice((None, 7, ["x"], b"y", {"y": 1}))
    elif what == 4 and isinstance(body, dict):
        body["contentBlockIndex"] = rng.choice((None, "0", 0.0, 1.0, True, False, _Hashed(0), _Hashed(1), 2**70))
    elif what == 5 and isinstance(body, dict):
        body["contentBlockIndex"] = rng.choice(([0], {}))  # unhashable: the lookup raises
    elif what == 6 and isinstance(body, dict):
        body.pop(rng.choice(("delta", "contentBlockIndex")), None)
    elif what == 7 and isinstance(body, dict) and isinstance(body.get("delta"), dict):
        body["delta"].pop("text", None)
    else:
        return _wire_edit(rng, event)
    return [event]


def test_random_streams_edited_after_the_parse_fold_the_same_through_the_old_and_the_new_batch_fold() -> None:
    rng = random.Random(SEED + 1)
    streams = [(_window(rng, _parsed_edit), rng.choice(SIZES), number) for number in range(PARSED_STREAMS)]
    clean, total, general = differential(_New, _Old, streams)
    assert clean > PARSED_STREAMS // 2
    assert total - general >= total // 2, (total, general)


def test_a_block_replaced_mid_run_gets_the_deltas_after_it_not_the_block_before() -> None:
    """The kept block is dropped when ``add`` replaces the block at that index (a ``contentBlockStart``)."""
    events = [
        {"contentBlockDelta": {"delta": {"text": "a"}, "contentBlockIndex": 0}},
        {"contentBlockDelta": {"delta": {"text": "b"}, "contentBlockIndex": 0}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": "f"}}}},
        {"contentBlockDelta": {"delta": {"text": '{"x": 1}'}, "contentBlockIndex": 0}},
    ]
    acc = _New()
    assert acc.add(events[0])
    acc.add_batch(events[1:])
    assert acc.blocks[0].kind == "tool"
    assert acc.blocks[0].fragments == ['{"x": 1}']
    assert fold(_New, events, 64) == fold(_Old, events, 64)
