"""Mistral's batch fold as rewritten by s14-foldgm3 records exactly what the fold it replaced recorded (old against new).

s14-foldgm3 (commit 7ca7d4a) rewrote ``MistralStreamAccumulator.add_batch``: the checks nested so that the common
event takes each test once, the choices unpacked without the ``type(choices) is list`` test. The old ``add_batch``
is kept below verbatim (from commit 86afb17, the parent of 7ca7d4a; nothing else in the module changed since), as a
subclass of today's accumulator, and both fold the same events as the stream proxy folds them (``add`` up to the
first output, then batches): every recorded Mistral stream in ``tests/fixtures`` whole, parsed by the real
``mistralai`` client, and a few hundred streams edited at random from a fixed seed (content None, empty, text or a
list of thinking, text and other pieces, tool call deltas split across events, several choices, usage mid-stream or
only on the last event, finish reasons, extras), parsed by ``unmarshal_json`` as the client parses each event. The
whole state of the accumulator (every buffer, part, tool call, finish reason, usage) and what the span is built from
must be equal.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

pytest.importorskip("mistralai")  # an optional extra: not in CI's oldest-versions environment

from fold_differential import (
    drawn_edit,
    first_delta,
    fold,
    random_differential,
    recorded_streams,
    sse_events,
)
from mistral_replay import fixture_paths, interactions, sdk_events
from mistralai.client.models import CompletionEvent
from mistralai.client.utils import unmarshal_json

from cassettes import FIXTURES, Recorded
from evaltrace._internal.engine.codec import add_each, chunk_failed
from evaltrace.instrumentation.mistral.request import get
from evaltrace.instrumentation.mistral.stream import (
    _NO_INDEX,
    MistralStreamAccumulator,
    _Choice,
    _sdk_types,
)

MISTRAL_DIR = FIXTURES / "mistral-cassettes"
SEED = 20261129
RANDOM_STREAMS = 300


class _OldMistral(MistralStreamAccumulator):
    """Today's accumulator with the batch fold s14-foldgm3 replaced (verbatim from commit 86afb17)."""

    __slots__ = ()

    def add_batch(self, events: list[Any], strict: bool = False) -> None:  # noqa: C901  (one frame per batch)
        """``add`` for each event in order, the common events read in this one frame (the stream proxy's batch fold).

        An event is read here when it is the SDK's own event, chunk, choice and delta (exactly), with one choice,
        no tool call, usage absent or the SDK's ``UsageInfo``, and a finish reason absent or a ``str``: then its
        fields are read from the instances' ``__dict__`` (pydantic's ``__getattr__`` hook keeps CPython 3.11 from
        specialising attribute reads, and ``get`` is two calls per field). Its content, text or a list of pieces,
        is read piece by piece as ``add_content`` reads it: the SDK's ``thinking`` and ``text`` chunks here, any
        other piece through ``add_content``. Every other event (tool calls, several choices, other types, the
        events before the first id) goes through ``add``, so both paths record the same. The checks that can send
        an event to ``add`` all come before its first write: an event is folded by one path, never by both.
        ``strict``: an error is raised, not routed.
        """
        types = _sdk_types()
        if types is None or self.response_id is None:  # ``add`` reads the id and model of the first event
            add_each(self.add, events)
            return
        chunk_type, choice_type, delta_type, think_type, text_type, usage_type, unset_type = types[1:]
        buffers = self.choices
        index: Any = _NO_INDEX  # the choice index of ``buffer``: read again only when an event names another
        buffer = _Choice()
        for event in events:
            try:
                chunk = getattr(event, "data", event)  # as ``add`` reads it
                if type(chunk) is not chunk_type:
                    self.add(event)
                    continue
                fields = chunk.__dict__
                choices = fields["choices"]
                usage = fields["usage"]
                if type(choices) is not list or (usage is not None and type(usage) is not usage_type):
                    self.add(event)
                    continue
                try:
                    [choice] = choices
                except ValueError:  # none or several: ``add``
                    choice = None
                if type(choice) is not choice_type:
                    self.add(event)
                    continue
                entry = choice.__dict__
                delta = entry["delta"]
                reason = entry["finish_reason"]
                if type(delta) is not delta_type or (reason is not None and type(reason) is not str):
                    self.add(event)
                    continue
                said = delta.__dict__
                calls = said["tool_calls"]
                content = said["content"]
                kind = type(content)
                if (calls is not None and type(calls) is not unset_type) or not (
                    kind is str or kind is list or content is None or kind is unset_type
                ):
                    self.add(event)
                    continue
                if entry["index"] is not index:
                    index = entry["index"]
                    key = index or 0
                    buffer = buffers.get(key) or buffers.setdefault(key, _Choice())
                if kind is str:
                    if content:
                        buffer.text.append(content)
                elif kind is list:
                    for piece in content:
                        kind = type(piece)
                        if kind is think_type:
                            own = piece.__dict__
                            if own["type"] == "thinking":
                                for part in own["thinking"] or ():  # ``thinking_text``, one text at a time
                                    text = part.text if type(part) is text_type else get(part, "text")
                                    if isinstance(text, str):
                                        buffer.reasoning.append(text)
                                continue
                        elif kind is text_type:
                            own = piece.__dict__
                            if own["type"] == "text":
                                buffer.text.append(own["text"] or "")
                                continue
                        buffer.add_content((piece,))  # any other piece: read as ``add`` reads it
                if reason is not None:
                    buffer.finish_reason = reason
                if usage is not None:
                    self.usage = usage
            except Exception:
                if strict:
                    raise
                chunk_failed()


RECORDED = recorded_streams(fixture_paths(), lambda path: interactions(path.relative_to(MISTRAL_DIR).as_posix()))


def _parsed(events: list[dict[str, Any]]) -> list[Any]:
    """Each event as the client parses it (``unmarshal_json`` of the SSE event); one the SDK refuses is left out."""
    out = []
    for event in events:
        try:
            out.append(unmarshal_json(json.dumps({"data": event}), CompletionEvent))
        except Exception:  # the SDK would raise here and end the stream: an edit it cannot parse is not a stream
            continue
    return out


def _same(events: list[Any], size: int) -> None:
    new = fold(MistralStreamAccumulator, events, size)
    old = fold(_OldMistral, events, size)
    assert new == old


def test_every_recorded_mistral_stream_is_here() -> None:
    assert len(RECORDED) >= 7  # text, thinking and tool-call streams
    assert any(b'"thinking"' in item.body for _, item in RECORDED)
    assert any(b'"tool_calls"' in item.body for _, item in RECORDED)


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
def test_a_recorded_stream_folds_the_same_through_the_old_and_the_new_batch_fold(name: str, item: Recorded) -> None:
    events = sdk_events(item)
    assert len(events) >= 2, name
    # The parse the random streams below use is the client's own, event for event.
    assert _parsed(sse_events(item.body)[: len(events)]) == events
    for size in (1, 3, 16, 64):
        _same(events, size)


# --- random edits of the recorded streams --------------------------------------------------------------------------

USAGES = (
    {"prompt_tokens": 10, "total_tokens": 12, "completion_tokens": 2},
    {"prompt_tokens": 10, "total_tokens": 12, "completion_tokens": 2, "prompt_audio_seconds": None, "extra": 1},
)
TEXTS = ("", "a", " word", "é\n", "<think>", '{"k": 1}')
REASONS = (None, None, None, "stop", "length", "tool_calls", "error", "model_length")


def _pieces(rng: random.Random) -> list[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 3)):
        pick = rng.randrange(6)
        if pick == 0:
            pieces.append({"type": "text", "text": rng.choice(TEXTS)})
        elif pick == 1:
            thinking = [{"type": "text", "text": rng.choice(TEXTS)} for _ in range(rng.randint(0, 2))]
            pieces.append({"type": "thinking", "thinking": thinking})
        elif pick == 2:
            pieces.append({"type": "image_url", "image_url": "https://example.com/a.png"})
        elif pick == 3:
            pieces.append({"type": "reference", "reference_ids": [1, 2]})
        elif pick == 4:
            pieces.append({"type": "thinking", "thinking": [{"type": "text", "text": "t"}], "closed": True})
        else:
            pieces.append({"type": "text", "text": rng.choice(TEXTS), "future": 1})
    return pieces


def _tool_fragments(rng: random.Random, event: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool call sent across events (Mistral sends whole calls, but a stream may split them): id first."""
    out = []
    for call in range(rng.choice((1, 1, 2))):
        for number, piece in enumerate(('{"a"', ": 1", "}")[: rng.randint(1, 3)]):
            more = copy.deepcopy(event)
            first_delta(more).clear()
            function = {"name": "f" if number == 0 else "", "arguments": piece}
            tool = {"index": call, "function": function}
            if number == 0:
                tool["id"] = f"call_{call}"
            first_delta(more)["tool_calls"] = [tool]
            first_delta(more)["content"] = rng.choice((None, "", "x"))
            out.append(more)
    return out


def _mistral_edit(rng: random.Random, event: dict[str, Any], what: int) -> list[dict[str, Any]]:
    """Mistral's own edit number ``what`` (of 6) of a chat event."""
    if what == 0:
        return _tool_fragments(rng, event)
    if what <= 2:
        first_delta(event)["content"] = _pieces(rng)
    elif what == 3:
        first_delta(event)[rng.choice(("future", "prefix"))] = rng.choice((True, "x"))
    elif what == 4:
        event["choices"] = []
    elif rng.random() < 0.5:
        event["usage"] = rng.choice(USAGES)
    else:
        event.pop("usage", None)
    return [event]


_edit = drawn_edit(6, _mistral_edit, TEXTS, REASONS)


def _usage_last(rng: random.Random, events: list[dict[str, Any]]) -> None:
    """Usage only on the last event."""
    for event in events:
        event.pop("usage", None)
    events[-1]["usage"] = rng.choice(USAGES)


def test_random_edited_streams_fold_the_same_through_the_old_and_the_new_batch_fold() -> None:
    bases = [sse_events(item.body) for _, item in RECORDED]
    random_differential(
        MistralStreamAccumulator, _OldMistral, SEED, RANDOM_STREAMS, bases, _edit, _usage_last, _parsed, 0.4
    )
