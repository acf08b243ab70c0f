"""Shared by the old-against-new batch fold differentials (Groq, Mistral): fold a stream as the proxy does, snapshot.

``fold`` folds chunks as the stream proxy does (``add`` up to the first chunk with output, then ``add_batch`` in
batches of ``size``) and returns everything the accumulator recorded: its whole state (every slot, recursively:
buffers, parts, tool calls, finish reasons, usage objects as their dumps) and what the span is built from
(``outcome()``, ``end_reason()``, ``summary()``, ``failure()``). An error raised by a fold (``chunk_failed``
re-raises under tests) is part of the record, so two folds that fail alike compare equal, and differently not.
``differential`` and ``random_differential`` compare two accumulator classes over given or seeded random streams
(``random_stream``: a window of a recorded stream edited by ``drawn_edit``: ``common_edit`` or a provider's own).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cassettes import Recorded

_MISSING = "<unset>"


def snapshot(value: Any, depth: int = 0) -> Any:
    """``value`` as plain data: scalars, lists, dicts, slots and dataclass fields, pydantic models as their dumps."""
    if depth > 40:
        return repr(value)
    if value is None or isinstance(value, str | int | float | bool):
        return (type(value).__name__, value)
    if isinstance(value, dict):
        return ("dict", [(snapshot(k, depth + 1), snapshot(v, depth + 1)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [snapshot(item, depth + 1) for item in value])
    if hasattr(value, "model_dump") and hasattr(type(value), "model_fields"):
        return (type(value).__qualname__, snapshot(value.model_dump(), depth + 1))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [(f.name, snapshot(getattr(value, f.name), depth + 1)) for f in dataclasses.fields(value)]
        return (type(value).__qualname__, fields)
    names = [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ()) if name != "__weakref__"]
    if names:
        return (
            type(value).__qualname__,
            [(name, snapshot(getattr(value, name, _MISSING), depth + 1)) for name in sorted(set(names))],
        )
    return (type(value).__qualname__, repr(value))


def _call(method: Callable[[], Any]) -> Any:
    try:
        return snapshot(method())
    except Exception as error:  # the same error both ways is the same record
        return ("raised", type(error).__name__, str(error))


def fold(make: Callable[[], Any], chunks: list[Any], size: int) -> tuple[Any, ...]:
    """Fold ``chunks`` into a new ``make()`` as the stream proxy does; the record of everything it holds."""
    acc = make()
    failed: Any = None
    at = 0
    try:
        for at, chunk in enumerate(chunks, 1):  # noqa: B007  (at: where the batches begin)
            if acc.add(chunk):
                break
        else:
            at = len(chunks)
        for begin in range(at, len(chunks), size):
            acc.add_batch(chunks[begin : begin + size])
    except Exception as error:
        failed = ("raised", type(error).__name__, str(error))
    return (
        failed,
        snapshot(acc)[1],  # its state, not its class's name (the old fold is a subclass)
        _call(acc.outcome),
        _call(acc.end_reason),
        _call(acc.summary),
        _call(acc.failure),
    )


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON events of a recorded SSE chat stream body (not its ``[DONE]``)."""
    lines = [line for line in body.split(b"\n") if line.startswith(b"data: {")]
    return [json.loads(line[len(b"data: ") :]) for line in lines]


def first_delta(event: dict[str, Any]) -> dict[str, Any]:
    """The first choice's delta of a chat chunk event, made a dict (an edit's target) when the event has none."""
    choices = event.get("choices") or [{"index": 0, "delta": {}, "finish_reason": None}]
    event["choices"] = choices
    choice = choices[0]
    if not isinstance(choice.get("delta"), dict):
        choice["delta"] = {}
    delta: dict[str, Any] = choice["delta"]
    return delta


def differential(new: type, old: type, streams: Iterable[tuple[list[Any], int, Any]]) -> tuple[int, int, int]:
    """Fold each ``(chunks, size, label)`` with ``new`` and ``old``, asserting equal records.

    Returns (streams folded without an error, chunks, chunks handed to ``add``): what tells that the streams
    exercised the batch folds themselves rather than errors or ``add``.
    """
    counting = _counting(new)
    clean = total = general = 0
    for chunks, size, label in streams:
        record = fold(new, chunks, size)
        assert record == fold(old, chunks, size), label
        clean += record[0] is None
        counter = counting()
        fold(lambda: counter, chunks, size)  # noqa: B023  (called at once)
        total, general = total + len(chunks), general + counter.adds
    return clean, total, general


def _counting(base: type) -> Callable[[], Any]:
    """A subclass of ``base`` counting the chunks that go through ``add``."""

    def __init__(self: Any) -> None:
        base.__init__(self)
        self.adds = 0

    def add(self: Any, chunk: Any) -> bool:
        self.adds += 1
        return base.add(self, chunk)  # type: ignore[no-any-return]

    made: Callable[[], Any] = type(
        f"Counting{base.__name__}", (base,), {"__slots__": ("adds",), "__init__": __init__, "add": add}
    )
    return made


COMMON_EDITS = 9
"""How many edits ``common_edit`` knows: an ``_edit`` of a provider draws from these and its own."""


def common_edit(
    rng: random.Random, event: dict[str, Any], what: int, texts: Sequence[Any], reasons: Sequence[Any]
) -> list[dict[str, Any]]:
    """Edit number ``what`` (below ``COMMON_EDITS``) of a chat chunk event, one every OpenAI-shaped stream allows."""
    delta = first_delta(event)
    choice = event["choices"][0]
    if what == 0:
        delta["content"] = None
    elif what == 1:
        delta["content"] = ""
    elif what == 2:
        delta.pop("content", None)
    elif what == 3:
        delta["tool_calls"] = rng.choice(([], None))
    elif what == 4:  # a second choice, with or without the first
        other = copy.deepcopy(choice)
        other["index"] = 1
        first_delta({"choices": [other]})["content"] = rng.choice(texts)
        event["choices"] = [choice, other] if rng.random() < 0.5 else [other]
    elif what == 5:
        choice["finish_reason"] = rng.choice(reasons)
    elif what == 6:
        choice["index"] = rng.choice((0, 1, 2))
    elif what == 7:
        delta["role"] = "assistant"
        delta["content"] = rng.choice(texts)
    else:
        delta["content"] = rng.choice(texts)
    return [event]


Edit = Callable[[random.Random, dict[str, Any]], list[dict[str, Any]]]
"""An edit of one event for ``random_stream``: the events that replace it."""


def drawn_edit(
    own: int,
    own_edit: Callable[[random.Random, dict[str, Any], int], list[dict[str, Any]]],
    texts: Sequence[Any],
    reasons: Sequence[Any],
) -> Edit:
    """A provider's ``Edit``: one of the ``COMMON_EDITS`` or of its ``own`` edits, drawn evenly (one draw).

    Args:
        own: How many edits the provider adds to the common ones.
        own_edit: ``own_edit(rng, event, what)`` makes the provider's edit number ``what`` (below ``own``).
        texts: The text deltas ``common_edit`` draws from.
        reasons: The finish reasons ``common_edit`` draws from.
    """

    def edit(rng: random.Random, event: dict[str, Any]) -> list[dict[str, Any]]:
        what = rng.randrange(COMMON_EDITS + own)
        if what < COMMON_EDITS:
            return common_edit(rng, event, what, texts, reasons)
        return own_edit(rng, event, what - COMMON_EDITS)

    return edit


def random_stream(
    rng: random.Random,
    bases: list[list[dict[str, Any]]],
    edit: Edit,
    usage_last: Callable[[random.Random, list[dict[str, Any]]], None],
) -> list[dict[str, Any]]:
    """A window of a recorded stream (its first event kept: the header), edited in a few places.

    Half the time the recorded closing event follows (finish reason, usage); ``usage_last`` (three times in ten)
    moves the usage to the last event only.
    """
    base = rng.choice(bases)
    length = rng.randint(1, 60)
    begin = rng.randrange(1, max(2, len(base) - length)) if len(base) > 2 else 1
    events = copy.deepcopy([base[0], *base[begin : begin + length]])
    if rng.random() < 0.5 and len(base) > 1:
        events.append(copy.deepcopy(base[-1]))
    out: list[dict[str, Any]] = []
    for position, event in enumerate(events):
        out += edit(rng, event) if position and rng.random() < 0.35 else [event]
    if rng.random() < 0.3:
        usage_last(rng, out)
    return out


def random_differential(
    new: type,
    old: type,
    seed: int,
    count: int,
    bases: list[list[dict[str, Any]]],
    edit: Edit,
    usage_last: Callable[[random.Random, list[dict[str, Any]]], None],
    parse: Callable[[list[dict[str, Any]]], list[Any]],
    fast: float,
) -> None:
    """``count`` streams from ``random_stream`` (seeded), parsed, each in a random batch size: ``differential``.

    Most must fold without an error (the edits stay in the SDK's shapes), and at least the share ``fast`` of the
    chunks must be read by the batch folds themselves, not handed to ``add``: else the streams would not exercise
    what changed (a recorded stream of reasoning or tool deltas goes through ``add`` chunk by chunk).
    """
    rng = random.Random(seed)

    def streams() -> Iterable[tuple[list[Any], int, Any]]:
        for number in range(count):
            events = random_stream(rng, bases, edit, usage_last)
            yield parse(events), rng.choice((1, 2, 3, 16, 64)), (number, events)

    clean, total, general = differential(new, old, streams())
    assert clean > count // 2
    assert total - general >= total * fast, (total, general)


def recorded_streams(paths: Iterable[Path], load: Callable[[Path], list[Recorded]]) -> list[tuple[str, Recorded]]:
    """Every recorded chat stream (a 200 whose body holds chunk events) of the cassettes at ``paths``, named."""
    found = []
    for path in paths:
        for index, item in enumerate(load(path)):
            if item.status == 200 and b"chat.completion.chunk" in item.body:
                found.append((f"{path.name}-{index}", item))
    return found
