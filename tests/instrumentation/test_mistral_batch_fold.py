"""Mistral's batch fold records what ``add`` records, for the recorded streams and for every other event shape.

``MistralStreamAccumulator.add_batch`` reads an event itself when it is the SDK's own event, chunk, choice and delta
(exactly) with one choice and no tool call, including its finish reason and usage; it reads the content's
``thinking`` and ``text`` chunks itself and hands any other piece to ``add_content``. Every other event goes
through ``add``, the general path. Each stream here is parsed by the real ``mistralai`` client from the replay
server (the recorded streams as recorded; the other shapes are the recorded magistral thinking stream with one
event changed or added) and folded both ways: one ``add`` per event, and as the stream proxy folds it (``add`` up to
the first event with output, then batches). Outcome, end reason, summary and failure must be equal.

No recording holds the odd shapes (extra fields, several choices, an empty or unknown finish reason, usage details
mid-stream, other content pieces, empty thinking): they are the recorded events with those JSON fields changed.
Subclasses and values the SDK's parser never makes (a tuple of pieces, a ``str`` subclass) are made in Python.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

pytest.importorskip("mistralai")  # an optional extra: not in CI's oldest-versions environment

from mistral_replay import THINKING_STREAM, fixture_paths, interactions, sdk_events

from cassettes import FIXTURES, Recorded
from evaltrace._internal.openai.response import chat_usage
from evaltrace.instrumentation.mistral.response import usage_of
from evaltrace.instrumentation.mistral.stream import MistralStreamAccumulator, _sdk_types

MISTRAL_DIR = FIXTURES / "mistral-cassettes"


class _Counting(MistralStreamAccumulator):
    """Counts the events that take the general path (``add``)."""

    __slots__ = ("adds",)

    def __init__(self) -> None:
        super().__init__()
        self.adds = 0

    def add(self, event: Any) -> bool:
        self.adds += 1
        return super().add(event)


def _events(item: Recorded) -> list[Any]:
    """The events the real SDK yields for the replayed stream (up to an error it raises inside it)."""
    return sdk_events(item)


def _record(acc: Any) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def _one_by_one(events: list[Any]) -> tuple[Any, ...]:
    acc = MistralStreamAccumulator()
    for event in events:
        acc.add(event)
    return _record(acc)


def _batched(events: list[Any], size: int) -> tuple[tuple[Any, ...], int]:
    """The record as the proxy folds (``add`` to the first output, then batches of ``size``), and the later ``add``s."""
    acc = _Counting()
    start = 0
    for start, event in enumerate(events, 1):  # noqa: B007  (start: where the batches begin)
        if acc.add(event):
            break
    acc.adds = 0
    for begin in range(start, len(events), size):
        acc.add_batch(events[begin : begin + size])
    return _record(acc), acc.adds


def _recorded_streams() -> list[tuple[str, Recorded]]:
    found = []
    for path in fixture_paths():
        for index, item in enumerate(interactions(path.relative_to(MISTRAL_DIR).as_posix())):
            if item.status == 200 and b"chat.completion.chunk" in item.body:
                found.append((f"{path.relative_to(MISTRAL_DIR)}-{index}", item))
    return found


RECORDED = _recorded_streams()


def test_there_are_recorded_text_thinking_and_tool_call_streams() -> None:
    bodies = [item.body for _, item in RECORDED]
    assert len(bodies) >= 3
    assert any(b'"thinking"' in body for body in bodies) and any(b'"tool_calls"' in body for body in bodies)


@pytest.mark.parametrize(("name", "item"), RECORDED, ids=[name for name, _ in RECORDED])
@pytest.mark.parametrize("size", [1, 3, 64])
def test_every_recorded_stream_records_the_same_through_the_batch_fold(name: str, item: Recorded, size: int) -> None:
    events = _events(item)
    assert len(events) >= 2
    record, adds = _batched(events, size)
    assert record == _one_by_one(events)
    if b'"tool_calls"' not in item.body:  # text, thinking, the finish reason and usage: all read by the batch fold
        assert adds == 0, name


# --- every other shape: the recorded thinking stream with one event changed (JSON, parsed by the real SDK) ---


def _thinking_stream() -> tuple[Recorded, list[dict[str, Any]]]:
    [item] = interactions(THINKING_STREAM)
    lines = [line for line in item.body.split(b"\n\n") if line.startswith(b"data: {")]
    return item, [json.loads(line[len(b"data: ") :]) for line in lines]


def _served(item: Recorded, events: list[dict[str, Any]]) -> Recorded:
    body = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events) + b"data: [DONE]\n\n"
    return dataclasses.replace(item, body=body)


def _think(*texts: Any) -> dict[str, Any]:
    return {"type": "thinking", "thinking": [{"type": "text", "text": t} for t in texts]}


def _set(path: tuple[Any, ...], value: Any) -> Any:
    """A change of the template event: ``value`` at ``path`` (keys and list indexes)."""

    def change(event: dict[str, Any]) -> None:
        target: Any = event
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


_DELTA = ("choices", 0, "delta")
_CHOICE = ("choices", 0)

# name -> a change of a copy of a content event of the recorded stream (a text event or a thinking event)
SHAPES: dict[str, tuple[str, Any]] = {
    "extra field on the chunk": ("text", _set(("x_extra",), {"a": 1})),
    "extra field on the choice": ("text", _set((*_CHOICE, "x_extra"), 1)),
    "extra field on the delta": ("think", _set((*_DELTA, "x_extra"), "v")),
    "extra field on the thinking chunk": ("think", _set((*_DELTA, "content", 0, "x_extra"), 2)),
    "extra field on its text chunk": ("think", _set((*_DELTA, "content", 0, "thinking", 0, "x_extra"), 3)),
    "a role": ("text", _set((*_DELTA, "role"), "assistant")),
    "empty tool calls": ("text", _set((*_DELTA, "tool_calls"), [])),
    "a tool call": (
        "text",
        _set((*_DELTA, "tool_calls"), [{"id": "c1", "function": {"name": "f", "arguments": "{}"}, "index": 0}]),
    ),
    "null tool calls": ("text", _set((*_DELTA, "tool_calls"), None)),
    "no choices": ("text", _set(("choices",), [])),
    "two choices": (
        "text",
        _set(
            ("choices",),
            [
                {"index": 0, "delta": {"content": "a"}, "finish_reason": None},
                {"index": 1, "delta": {"content": "b"}, "finish_reason": None},
            ],
        ),
    ),
    "a second choice index": ("text", _set((*_CHOICE, "index"), 1)),
    "an empty finish reason": ("text", _set((*_CHOICE, "finish_reason"), "")),
    "a finish reason mid-stream": ("think", _set((*_CHOICE, "finish_reason"), "length")),
    "an unknown finish reason": ("text", _set((*_CHOICE, "finish_reason"), "not_a_known_reason")),
    "usage with details mid-stream": (
        "text",
        _set(
            ("usage",),
            {
                "prompt_tokens": 5,
                "completion_tokens": 7,
                "total_tokens": 12,
                "prompt_tokens_details": {"cached_tokens": 2},
            },
        ),
    ),
    "null content": ("text", _set((*_DELTA, "content"), None)),
    "no content": ("text", lambda event: event["choices"][0]["delta"].pop("content")),
    "empty content list": ("think", _set((*_DELTA, "content"), [])),
    "text, thinking and image pieces": (
        "think",
        _set(
            (*_DELTA, "content"),
            [
                {"type": "text", "text": "answer "},
                _think("thought ", "more "),
                {"type": "image_url", "image_url": "https://example.com/a.png"},
                {"type": "text", "text": "after"},
            ],
        ),
    ),
    "empty thinking": ("think", _set((*_DELTA, "content"), [_think()])),
    "several thinking texts": ("think", _set((*_DELTA, "content"), [_think("a", "", "b")])),
    "a reference in the thinking": (
        "think",
        _set(
            (*_DELTA, "content"),
            [
                {
                    "type": "thinking",
                    "thinking": [{"type": "text", "text": "x"}, {"type": "reference", "reference_ids": [1]}],
                }
            ],
        ),
    ),
    "a closed, signed thinking chunk": (
        "think",
        _set((*_DELTA, "content"), [{**_think("sig"), "closed": True, "signature": "abc"}]),
    ),
}


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("size", [1, 4, 64])
def test_an_event_of_any_other_shape_records_what_add_records(name: str, size: int) -> None:
    item, recorded = _thinking_stream()
    kind, change = SHAPES[name]
    thinks = [i for i, e in enumerate(recorded) if isinstance(e["choices"][0]["delta"].get("content"), list)]
    texts = [i for i, e in enumerate(recorded) if isinstance(e["choices"][0]["delta"].get("content"), str)]
    template = thinks[len(thinks) // 2] if kind == "think" else texts[len(texts) // 2]
    odd = copy.deepcopy(recorded[template])
    change(odd)
    at = min(template + 5, len(recorded) - 1)  # inside a run of common events, twice (one right after the other)
    events_json = [*recorded[:at], odd, odd, *recorded[at:]]
    events = _events(_served(item, events_json))
    assert len(events) == len(events_json), "the SDK parsed every event"
    record, _ = _batched(events, size)
    assert record == _one_by_one(events)


# --- what the SDK's parser never makes: subclasses of its types and other value types (built in Python) ---


def _parsed_thinking_events() -> list[Any]:
    [item] = interactions(THINKING_STREAM)
    return _events(item)


def _replace(event: Any, **changes: Any) -> Any:
    """``event`` with its chunk's first choice / delta / first content piece changed (copies, the SDK's types)."""
    chunk = event.data
    choice = chunk.choices[0]
    delta = choice.delta
    if "piece" in changes:
        delta = delta.model_copy(update={"content": [changes.pop("piece")]})
    if "content" in changes:
        delta = delta.model_copy(update={"content": changes.pop("content")})
    delta = changes.pop("delta", delta)
    choice = choice.model_copy(update={"delta": delta, **changes.pop("choice_fields", {})})
    choice = changes.pop("choice", choice)
    chunk = chunk.model_copy(update={"choices": [choice], **changes.pop("chunk_fields", {})})
    chunk = changes.pop("chunk", chunk)
    assert not changes
    return event.model_copy(update={"data": chunk})


def _overriding(cls: type, name: str, value: Any) -> type:
    """A subclass of ``cls`` whose attribute ``name`` reads ``value`` (its ``__dict__`` keeps the parsed value)."""

    def __getattribute__(self: Any, item: str) -> Any:
        return value if item == name else cls.__getattribute__(self, item)  # type: ignore[attr-defined]

    return type(f"Own{cls.__name__}", (cls,), {"__getattribute__": __getattribute__})


def _as(cls: type, obj: Any) -> Any:
    return cls.model_construct(**obj.__dict__)  # type: ignore[attr-defined]


def _odd_events() -> dict[str, tuple[Any, str | None]]:
    """name -> (a function of a recorded (text event, thinking event) pair to the odd event, what it must record)."""
    event_t, chunk_t, choice_t, delta_t, think_t, text_t, usage_t, _ = _sdk_types() or ()
    return {
        "an event subclass": (lambda t, k: _as(_overriding(event_t, "data", t.data), k), None),
        "a chunk subclass": (
            lambda t, k: _replace(k, chunk=_as(_overriding(chunk_t, "choices", t.data.choices), k.data)),
            None,
        ),
        "a choice subclass": (
            lambda t, k: _replace(t, choice=_as(_overriding(choice_t, "index", 3), t.data.choices[0])),
            None,
        ),
        "a choice subclass with its own finish reason": (
            lambda t, k: _replace(
                t, choice=_as(_overriding(choice_t, "finish_reason", "own_reason"), t.data.choices[0])
            ),
            "own_reason",
        ),
        "a delta subclass": (
            lambda t, k: _replace(t, delta=_as(_overriding(delta_t, "content", "own text"), t.data.choices[0].delta)),
            "own text",
        ),
        "a thinking chunk subclass": (
            lambda t, k: _replace(
                k,
                piece=_as(
                    _overriding(think_t, "thinking", [text_t(text="own thought")]), k.data.choices[0].delta.content[0]
                ),
            ),
            "own thought",
        ),
        "a text chunk subclass in the thinking": (
            lambda t, k: _replace(
                k, piece=think_t(thinking=[_as(_overriding(text_t, "text", "own part"), text_t(text="parsed"))])
            ),
            "own part",
        ),
        "a text chunk subclass as a piece": (
            lambda t, k: _replace(k, piece=_as(_overriding(text_t, "text", "own piece"), text_t(text="parsed"))),
            "own piece",
        ),
        "a thinking chunk typed text": (
            lambda t, k: _replace(k, piece=think_t.model_construct(thinking=[text_t(text="typed text")], type="text")),
            None,
        ),
        "a text chunk typed thinking": (
            lambda t, k: _replace(k, piece=text_t.model_construct(text="typed thinking", type="thinking")),
            None,
        ),
        "thinking that is not a list": (
            lambda t, k: _replace(
                k, piece=think_t.model_construct(thinking=(text_t(text="in a tuple"),), type="thinking")
            ),
            "in a tuple",
        ),
        "a usage subclass": (
            lambda t, k: _replace(
                t,
                chunk_fields={
                    "usage": _as(
                        _overriding(usage_t, "prompt_tokens", 99),
                        usage_t(prompt_tokens=1, completion_tokens=2, total_tokens=3),
                    )
                },
            ),
            None,
        ),
        "usage as a dict": (
            lambda t, k: _replace(t, chunk_fields={"usage": {"prompt_tokens": 4, "completion_tokens": 5}}),
            None,
        ),
        "content as a tuple": (lambda t, k: _replace(k, content=tuple(k.data.choices[0].delta.content)), None),
        "choices as a tuple": (
            lambda t, k: _replace(t, chunk=t.data.model_copy(update={"choices": tuple(t.data.choices)})),
            None,
        ),
        "a str subclass as the finish reason": (
            lambda t, k: _replace(t, choice_fields={"finish_reason": type("Reason", (str,), {})("own_finish")}),
            "own_finish",
        ),
        "a str subclass as the text": (
            lambda t, k: _replace(t, content=type("Text", (str,), {})("own str")),
            "own str",
        ),
        "tool calls as a tuple": (
            lambda t, k: _replace(t, delta=t.data.choices[0].delta.model_copy(update={"tool_calls": ()})),
            None,
        ),
        "a bare chunk, no event": (lambda t, k: k.data, None),
    }


ODD = _odd_events() if _sdk_types() is not None else {}


@pytest.mark.parametrize("name", list(ODD))
@pytest.mark.parametrize("size", [1, 64])
def test_sdk_subclasses_and_other_value_types_record_what_add_records(name: str, size: int) -> None:
    events = _parsed_thinking_events()
    thinks = [i for i, e in enumerate(events) if isinstance(e.data.choices[0].delta.content, list)]
    texts = [i for i, e in enumerate(events) if isinstance(e.data.choices[0].delta.content, str)]
    make, recorded_value = ODD[name]
    odd = make(events[texts[len(texts) // 2]], events[thinks[len(thinks) // 2]])
    if "finish reason" in name:  # in place of the last event, whose own finish reason would replace it
        stream = [*events[:-1], odd]
    else:  # between the thinking and the answer: in a run of common events
        stream = [*events[: thinks[-1]], odd, *events[thinks[-1] :]]
    expected = _one_by_one(stream)
    record, _ = _batched(stream, size)
    assert record == expected
    if recorded_value is not None:  # the subclass's own reading is what both paths record
        assert recorded_value in repr(expected[0])
        assert recorded_value not in repr(_one_by_one(events)[0])


def test_a_chunk_choice_or_delta_of_another_class_goes_through_add() -> None:
    events = _parsed_thinking_events()
    event_t, chunk_t, choice_t, delta_t, *_ = _sdk_types() or ()
    plain = events[len(events) // 2]
    for odd in (
        _replace(plain, chunk=_as(type("OwnChunk", (chunk_t,), {}), plain.data)),
        _replace(plain, choice=_as(type("OwnChoice", (choice_t,), {}), plain.data.choices[0])),
        _replace(plain, delta=_as(type("OwnDelta", (delta_t,), {}), plain.data.choices[0].delta)),
    ):
        stream = [events[0], plain, odd, plain]
        record, adds = _batched(stream, 64)
        assert adds == 1
        assert record == _one_by_one(stream)


# --- usage: the SDK's UsageInfo read from its fields and extras, as getattr reads it ---


@pytest.mark.parametrize(
    "body",
    [
        {"prompt_tokens": 10, "completion_tokens": 232, "total_tokens": 242},
        {
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "total_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 4},
        },
        {
            "prompt_tokens": 10,
            "completion_tokens": 9,
            "total_tokens": 19,
            "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 1},
            "completion_tokens_details": {"reasoning_tokens": 6},
        },
        {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "prompt_tokens_details": None},
        {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4, "prompt_audio_seconds": 2, "x_extra": "v"},
    ],
)
def test_the_sdks_usage_is_read_as_getattr_reads_it(body: dict[str, Any]) -> None:
    usage_t = (_sdk_types() or ())[6]
    usage = usage_t.model_validate(body)
    assert usage_of(usage) == chat_usage(usage)
    subclass = _as(_overriding(usage_t, "prompt_tokens_details", {"cached_tokens": 77}), usage)
    assert usage_of(subclass) == chat_usage(subclass)
    assert usage_of(subclass).cached_tokens == 77  # type: ignore[union-attr]


# --- the first event: ``add`` reads it through the batch fold once it has an id (``_add_first``) ---


class _GeneralFirst(MistralStreamAccumulator):
    """The reference: every event, the first included, read by ``add``'s general path."""

    __slots__ = ()

    def _add_first(self, event: Any) -> bool | None:
        return None


class _FirstTaken(MistralStreamAccumulator):
    """Keeps what ``_add_first`` returned for each event it saw (None: it left the event to the general path)."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[bool | None] = []

    def _add_first(self, event: Any) -> bool | None:
        self.taken.append(super()._add_first(event))
        return self.taken[-1]


FIRST_ONLY: dict[str, tuple[str, Any]] = {
    "as recorded": ("first", lambda event: None),
    "an empty id": ("first", _set(("id",), "")),
    "an empty model": ("first", _set(("model",), "")),
    "no choices and usage": ("first", lambda event: event.update(choices=[], usage={"prompt_tokens": 3})),
}


@pytest.mark.parametrize("name", [*FIRST_ONLY, *SHAPES])
def test_the_first_event_of_any_shape_records_what_the_general_path_records(name: str) -> None:
    """Each shape as the stream's first event: ``add`` (and the proxy's batches after it) against ``add`` alone."""
    item, recorded = _thinking_stream()
    kind, change = {**SHAPES, **FIRST_ONLY}[name]
    thinks = [i for i, e in enumerate(recorded) if isinstance(e["choices"][0]["delta"].get("content"), list)]
    texts = [i for i, e in enumerate(recorded) if isinstance(e["choices"][0]["delta"].get("content"), str)]
    template = {"think": thinks[len(thinks) // 2], "text": texts[len(texts) // 2], "first": 0}[kind]
    first = copy.deepcopy(recorded[template])
    change(first)
    events_json = [first, *recorded[1:]]
    events = _events(_served(item, events_json))
    assert len(events) == len(events_json), "the SDK parsed every event"
    fast, general = _FirstTaken(), _GeneralFirst()
    assert fast.add(events[0]) == general.add(events[0])
    assert _record(fast) == _record(general)
    assert (fast.response_id, fast.model, fast.usage) == (general.response_id, general.model, general.usage)
    start = 1
    if not fast.choices:  # the proxy folds each event with ``add`` until one carries output
        for start, event in enumerate(events[1:], 2):  # noqa: B007
            fast.add(event)
            if fast.choices:
                break
    for begin in range(start, len(events), 64):
        fast.add_batch(events[begin : begin + 64])
    for event in events[1:]:
        general.add(event)
    assert _record(fast) == _record(general)
    if name == "as recorded":
        assert fast.taken == [True], "the recorded first event is read by the batch fold"
    if name in ("an empty id", "no choices and usage"):
        assert fast.taken[0] is not True
