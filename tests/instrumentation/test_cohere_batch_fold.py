"""A Cohere v2 chat stream records the same through ``ChatStreamAccumulator.add_batch`` as through ``add``.

``add_batch`` reads the common event (a ``content-delta`` of a started content, the cohere SDK's own types exactly)
from the instances' ``__dict__``; every other event goes through ``add``. No Cohere ``chat_stream`` is recorded in
any fixture set (tests/instrumentation/cohere_replay.py), so the streams are built from the SDK's event types and
served by the replay server, parsed by the real cohere client: text and thinking contents, a tool plan and a tool
call, deltas without their content-start, for a content that never started, with both or neither of text and
thinking, non-text values and extra fields. Each is folded one ``add`` each and as the stream proxy folds it
(``add`` to the first output, then batches of several sizes): outcome, end reason, summary and failure must be equal.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("cohere")  # an optional extra: not in CI's oldest-versions environment

from cohere_replay import client_of, stream_interaction, text_stream_events, tool_stream_events

from cassettes import ReplayServer
from evaltrace._internal.engine.codec import add_each
from evaltrace.instrumentation.cohere.stream import ChatStreamAccumulator, _sdk_types


def _delta(index: Any, content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "content-delta", "index": index, "delta": {"message": {"content": content}}, **extra}


def _streams() -> dict[str, list[dict[str, Any]]]:
    text = text_stream_events([f"w{i} " for i in range(12)], thinking=[f"t{i} " for i in range(6)])
    end = text[-2:]  # the text's content-end and message-end
    odd = [
        _delta(1, {"text": None}),
        _delta(1, {"text": "both", "thinking": "kept?"}),
        _delta(1, {"thinking": "a thought in a text content"}),
        _delta(1, {}),
        _delta(1, {"text": "with logprobs"}, logprobs={"token_ids": [1], "logprobs": [-0.1]}),
        _delta(7, {"text": "a content that never started"}),
        _delta(None, {"text": "no index"}),
        _delta(1, {"text": "extra field", "extra": 1}),
        {"type": "content-delta", "index": 1, "delta": {"message": {}}},
        {"type": "content-delta", "index": 1, "delta": {}},
        {"type": "content-delta", "index": 1},
        _delta(1, {"text": "after all that"}),
    ]
    return {
        "text and thinking": text,
        "text only": text_stream_events([f"w{i} " for i in range(30)]),
        "tool call": tool_stream_events(),
        "no content-start": [e for e in text if e["type"] != "content-start"],
        "odd deltas": [*text[:-2], *odd, *end],
        "truncated": text[:-1],
    }


STREAMS = _streams()


def _events(events: list[dict[str, Any]]) -> list[Any]:
    with ReplayServer([stream_interaction(events)]) as server, client_of(server.url) as client:
        return list(client.chat_stream(model="command-a", messages=[{"role": "user", "content": "hi"}]))


def _record(acc: ChatStreamAccumulator) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def test_the_cohere_types_are_read_by_the_batch_fold() -> None:
    assert _sdk_types() is not None


@pytest.mark.parametrize("name", list(STREAMS), ids=list(STREAMS))
def test_every_stream_records_the_same_through_the_batch_fold(name: str) -> None:
    events = _events(STREAMS[name])
    assert len(events) == len(STREAMS[name])
    one_by_one = ChatStreamAccumulator()
    add_each(one_by_one.add, events)
    expected = _record(one_by_one)
    for size in (1, 2, 5, 64):
        batched = ChatStreamAccumulator()
        start = 0
        for start, event in enumerate(events, 1):  # noqa: B007
            if batched.add(event):
                break
        for at in range(start, len(events), size):
            batched.add_batch(events[at : at + size])
        assert _record(batched) == expected, size


def test_text_and_thinking_come_out_by_content() -> None:
    """The fast path is taken (most events) and still splits thinking from text."""
    events = _events(STREAMS["text and thinking"])
    acc = ChatStreamAccumulator()
    acc.add_batch(events)
    parts = acc.outcome().output_messages[0]["parts"]
    assert parts == [
        {"type": "reasoning", "content": "".join(f"t{i} " for i in range(6))},
        {"type": "text", "content": "".join(f"w{i} " for i in range(12))},
    ]


def _without(events: list[Any], cut: list[tuple[int, str, str, Any]]) -> list[Any]:
    """``events`` with fields taken out of an instance's ``__dict__`` (at: (event, level, name, extra)).

    ``level`` is ``event``, ``delta``, ``message`` or ``content``; a non-None ``extra`` is put in the pydantic extras
    under the same name (where ``getattr`` finds it once ``__dict__`` has it no more).
    """
    for at, level, name, extra in cut:
        obj = events[at]
        for step in ("delta", "message", "content")[: ("event", "delta", "message", "content").index(level)]:
            obj = obj.__dict__[step]
        del obj.__dict__[name]
        if extra is not None:
            obj.__pydantic_extra__[name] = extra
    return events


def test_fields_missing_from_an_instances_dict_are_read_as_add_reads_them() -> None:
    """A field not in ``__dict__`` (a pydantic extra of that name, or nothing) sends the event to ``add``."""
    events = _events(STREAMS["text and thinking"])
    deltas = [i for i, e in enumerate(events) if e.type == "content-delta"]
    cut = [
        (deltas[1], "event", "index", None),
        (deltas[2], "event", "index", 1),
        (deltas[3], "event", "type", None),
        (deltas[4], "event", "delta", None),
        (deltas[5], "delta", "message", None),
        (deltas[7], "message", "content", None),
        (deltas[8], "content", "text", None),
        (deltas[9], "content", "text", "an extra text"),
        (deltas[10], "content", "thinking", "an extra thought"),
        (deltas[11], "content", "text", 7),
        (deltas[2 + len(deltas) // 2], "content", "thinking", None),
        (deltas[3 + len(deltas) // 2], "content", "text", "a text beside a thought"),
    ]
    expected_events = _without(_events(STREAMS["text and thinking"]), cut)
    one_by_one = ChatStreamAccumulator()
    add_each(one_by_one.add, expected_events)
    batched = ChatStreamAccumulator()
    batched.add_batch(_without(events, cut))
    assert _record(batched) == _record(one_by_one)
    parts = batched.outcome().output_messages[0]["parts"]
    assert "an extra text" in parts[1]["content"] and "an extra thought" not in parts[1]["content"]
