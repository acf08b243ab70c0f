"""Groq's batch fold and header read record what ``add`` and the OpenAI header read record, for every chunk shape.

``GroqStreamAccumulator.add_batch`` reads the common chunk (one choice whose delta has text only, an ``x_groq``
with an id, a usage or an error, a finish reason) from the groq SDK's instances' ``__dict__`` and sends every other
chunk through ``add``; ``_read_header`` reads the groq chunk's header from its ``__dict__`` and extras. The chunks are
parsed by the real groq client from the replay server: Groq's recorded DeepSeek R1 stream
(``pydantic-ai/test_groq_model_thinking_part_iter.yaml``), its JSON events edited into the shapes the SDK's types
allow and no recording holds (tool calls, parsed reasoning, built-in tools, several or no choices, usage on the
chunk or in ``x_groq``, an ``x_groq`` error, extras, nulls and empty lists, a late id, a service tier).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette
from evaltrace._internal.openai.accumulate import ChatAccumulator
from evaltrace.instrumentation.groq.stream import GroqStreamAccumulator

groq = pytest.importorskip("groq")  # an optional extra: not in CI's oldest-versions environment

RECORDED = FIXTURES / "groq-cassettes/pydantic-ai/test_groq_model_thinking_part_iter.yaml"


def _recorded() -> tuple[Recorded, list[dict[str, Any]]]:
    item = load_cassette(RECORDED)[0]
    events = [
        json.loads(line[len(b"data: ") :])
        for line in item.body.split(b"\n")
        if line.startswith(b"data: {")  # not ``data: [DONE]``
    ]
    return item, events


def _parsed(events: list[dict[str, Any]]) -> list[Any]:
    """The chunks the real groq client yields for ``events`` served as the recorded stream's SSE body."""
    item, _ = _recorded()
    body = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events) + b"data: [DONE]\n\n"
    served = Recorded(item.method, item.uri, item.request_body, 200, "OK", item.headers, body)
    with ReplayServer([served]) as server:
        kwargs = dict(served.request_json())
        kwargs.pop("stream", None)
        with groq.Groq(api_key="test", base_url=server.url, max_retries=0) as client:
            return list(client.chat.completions.create(**kwargs, stream=True))


def _record(acc: GroqStreamAccumulator) -> tuple[Any, ...]:
    header = (acc.response_id, acc.model, acc.service_tier, acc.fingerprint, acc.header_pending)
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure(), acc.usage, header


def _both_ways(chunks: list[Any], size: int) -> tuple[tuple[Any, ...], tuple[Any, ...], int]:
    """(batched as the proxy folds, one ``add`` each, how many chunks the batches sent through ``add``)."""
    one_by_one = GroqStreamAccumulator()
    for chunk in chunks:
        one_by_one.add(chunk)
    batched = _Counting()
    start = 0
    for start, chunk in enumerate(chunks, 1):  # noqa: B007  (start: where the batches begin)
        if batched.add(chunk):
            break
    batched.general = 0
    for at in range(start, len(chunks), size):
        batched.add_batch(chunks[at : at + size])
    return _record(batched), _record(one_by_one), batched.general


class _Counting(GroqStreamAccumulator):
    """Counts the chunks that go through ``add``."""

    __slots__ = ("general",)

    def __init__(self) -> None:
        super().__init__()
        self.general = 0

    def add(self, chunk: Any) -> bool:
        self.general += 1
        return super().add(chunk)


_CITE = {"type": "document_citation", "document_citation": {"document_id": "d1", "start_index": 0, "end_index": 1}}


def _text(event: dict[str, Any], **delta: Any) -> dict[str, Any]:
    out = copy.deepcopy(event)
    out.pop("x_groq", None)
    out["choices"][0]["delta"] = delta
    return out


def _tool_call(index: int, **fields: Any) -> dict[str, Any]:
    return {"index": index, **fields}


Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _middle(edit: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Edit:
    """Replace the stream's 20th..22nd events by ``edit`` of each (the first events open it, the last close it)."""

    def apply(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = events[:20]
        for event in events[20:23]:
            out += edit(copy.deepcopy(event))
        return out + events[23:]

    return apply


def _choices(event: dict[str, Any], choices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    event["choices"] = choices
    return [event]


def _with(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    def edit(event: dict[str, Any]) -> list[dict[str, Any]]:
        target: Any = event
        for key in path[:-1]:
            target = target[key] if not isinstance(target, list) else target[int(key)]
        target[path[-1]] = value
        return [event]

    return edit


USAGE = {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24}

SHAPES: dict[str, Edit] = {
    "as recorded": lambda events: events,
    "tool call fragments": _middle(
        lambda e: [
            _text(e, tool_calls=[_tool_call(0, id="call_1", type="function", function={"name": "f", "arguments": ""})]),
            _text(e, tool_calls=[_tool_call(0, function={"arguments": '{"a": 1}'})]),
            _text(e, content="after", tool_calls=[_tool_call(1, id="call_2", function={"name": "g"})]),
        ]
    ),
    "empty and null fields": _middle(
        lambda e: [
            _text(e, content=None),
            _text(e, content="x", tool_calls=[]),
            _text(e, content="y", executed_tools=[]),
            _text(e, content="z", reasoning=""),
            _text(e, content="w", function_call=None, tool_calls=None, reasoning=None),
            _text(e),
        ]
    ),
    "parsed reasoning": _middle(lambda e: [_text(e, reasoning="thinking "), _text(e, content="a", reasoning="b")]),
    "legacy function call": _middle(lambda e: [_text(e, function_call={"name": "f", "arguments": "{}"})]),
    "built-in tools": _middle(
        lambda e: [
            _text(e, executed_tools=[{"index": 0, "type": "search", "arguments": '{"q": "x"}'}]),
            _text(e, content="found", executed_tools=[{"index": 0, "type": "search", "output": "r"}]),
        ]
    ),
    "extras on the delta": _middle(lambda e: [_text(e, content="a", reasoning_content="r"), _text(e, future=1)]),
    "a role and annotations mid-stream": _middle(
        lambda e: [_text(e, content="a", role="assistant"), _text(e, content="b", annotations=[])]
    ),
    "document and function citations": _middle(
        lambda e: [
            _text(e, content="a", annotations=[_CITE]),
            _text(
                e,
                content="b",
                annotations=[
                    _CITE,
                    {
                        "type": "function_citation",
                        "function_citation": {"tool_call_id": "call_1", "start_index": 1, "end_index": 2},
                    },
                ],
            ),  # fmt: skip
        ]
    ),
    "a usage breakdown and a service tier in x_groq on the last chunk": lambda events: [
        *events[:-1],
        {
            **events[-1],
            "x_groq": {
                "id": "req_1",
                "usage": USAGE,
                "service_tier": "flex",
                "usage_breakdown": {"models": [{"model": "m", "usage": USAGE}]},
            },
        },  # fmt: skip
    ],
    "a service tier on the last chunk only": lambda events: [*events[:-1], {**events[-1], "service_tier": "flex"}],
    "several choices": _middle(
        lambda e: (
            _choices(
                e,
                [
                    {"index": 0, "delta": {"content": "zero"}, "finish_reason": None},
                    {"index": 1, "delta": {"content": "one"}, "finish_reason": None},
                ],
            )
            + _choices(copy.deepcopy(e), [{"index": 1, "delta": {"content": " more"}, "finish_reason": "length"}])
        )
    ),
    "no choices": _middle(lambda e: _choices(e, [])),
    "a choice of index 2 alone": _middle(
        lambda e: _choices(e, [{"index": 2, "delta": {"content": "two"}, "finish_reason": None}])
    ),
    "finish reasons mid-stream": _middle(
        lambda e: [_with(("choices", "0", "finish_reason"), "tool_calls")(e)[0], _text(e, content="then")]
    ),
    "usage on the chunk": _middle(_with(("usage",), USAGE)),
    "usage in x_groq mid-stream": _middle(_with(("x_groq",), {"id": "req_1", "usage": USAGE})),
    "x_groq with an id only": _middle(_with(("x_groq",), {"id": "req_1"})),
    "x_groq with an extra": _middle(_with(("x_groq",), {"id": "req_1", "future": {"a": 1}})),
    "an error in x_groq": lambda events: [
        *events[:30],
        {**events[30], "x_groq": {"id": "req_1", "error": "the model failed"}},
        *events[31:],
    ],
    "an empty error in x_groq": _middle(_with(("x_groq",), {"id": "req_1", "error": ""})),
    "extras on the chunk and the choice": _middle(
        lambda e: [_with(("future",), [1])(e)[0], _with(("choices", "0", "extra"), True)(copy.deepcopy(e))[0]]
    ),
    "no x_groq usage on the last chunk": lambda events: [*events[:-1], {**events[-1], "x_groq": {"id": "req_1"}}],
    # A server may send the closing chunk's usage with ``"choices": null`` (the SDK keeps it as None): the batch must
    # record that usage as ``add`` does, never lose the chunk to a ``len(None)``.
    "null choices on the last chunk": lambda events: [*events[:-1], {**events[-1], "choices": None}],
    "a service tier and no fingerprint": lambda events: [
        {**event, "service_tier": "on_demand", "system_fingerprint": None} for event in events
    ],
    "a late id and model": lambda events: [
        {**events[0], "id": "", "model": ""},
        {**events[1], "id": ""},
        *events[2:],
    ],
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("size", [1, 3, 16, 64])
def test_a_chunk_of_any_shape_records_what_add_records(shape: str, size: int) -> None:
    _, events = _recorded()
    chunks = _parsed(SHAPES[shape](events))
    batched, one_by_one, _ = _both_ways(chunks, size)
    assert batched == one_by_one


def test_the_recorded_streams_chunks_take_the_fast_path_to_the_last() -> None:
    """Every chunk after the first, the last one with its finish reason and ``x_groq`` usage included."""
    _, events = _recorded()
    chunks = _parsed(events)
    batched, one_by_one, general = _both_ways(chunks, 16)
    assert batched == one_by_one
    assert general == 0
    outcome, _, summary, *_ = batched
    assert outcome.finish_reasons == ["stop"]
    assert summary.output_tokens == events[-1]["x_groq"]["usage"]["completion_tokens"]


def test_the_off_path_shapes_go_through_add() -> None:
    _, events = _recorded()
    for shape in ("tool call fragments", "parsed reasoning", "usage on the chunk", "several choices"):
        _, _, general = _both_ways(_parsed(SHAPES[shape](events)), 16)
        assert general > 0, shape


@pytest.mark.parametrize("shape", ["as recorded", "a service tier and no fingerprint", "a late id and model"])
def test_the_groq_header_read_is_the_openai_one(shape: str) -> None:
    _, events = _recorded()
    chunks = _parsed(SHAPES[shape](events))
    ours, theirs = GroqStreamAccumulator(), GroqStreamAccumulator()
    for chunk in chunks[:3]:
        ours._read_header(chunk)
        ChatAccumulator._read_header(theirs, chunk)
        assert _record(ours)[-1] == _record(theirs)[-1]
    if shape == "a service tier and no fingerprint":
        assert ours.service_tier == "on_demand" and ours.fingerprint is None


def test_an_x_groq_of_another_type_goes_through_add() -> None:
    """An ``x_groq`` the SDK did not build (set on the chunk by hand) is read by ``getattr``, as ``add`` reads it."""
    from types import SimpleNamespace

    _, events = _recorded()
    chunks = _parsed(events)
    usage = chunks[-1].x_groq.usage
    chunks[-1].x_groq = SimpleNamespace(usage=usage, error="failed late")
    batched, one_by_one, general = _both_ways(chunks, 16)
    assert batched == one_by_one
    assert general == 1
    assert batched[3] == ("_OTHER", "failed late") and batched[4] is usage


# --- the first chunk: ``add`` reads it through the batch fold once its header has an id and model ---


class _GeneralFirst(GroqStreamAccumulator):
    """The reference: every chunk, the first included, read by ``add``'s general path."""

    __slots__ = ()

    def _add_first(self, chunk: Any) -> bool | None:
        return None


class _FirstTaken(GroqStreamAccumulator):
    """Keeps what ``_add_first`` returned for each chunk it saw (None: it left the chunk to the general path)."""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[bool | None] = []

    def _add_first(self, chunk: Any) -> bool | None:
        self.taken.append(super()._add_first(chunk))
        return self.taken[-1]


def _first(edit: Callable[[dict[str, Any]], Any]) -> Edit:
    """``edit`` of the stream's first chunk (the one that names the response); the rest as recorded."""

    def apply(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        head = copy.deepcopy(events[0])
        edited = edit(head)
        return [*(edited if isinstance(edited, list) else [head]), *events[1:]]

    return apply


FIRST_SHAPES: dict[str, Edit] = {
    "as recorded": lambda events: events,
    "text and no x_groq": _first(lambda e: [_text(e, role="assistant", content="hi")]),
    "a tool call": _first(
        lambda e: [_text(e, tool_calls=[_tool_call(0, id="c", type="function", function={"name": "f"})])]
    ),
    "parsed reasoning": _first(lambda e: [_text(e, reasoning="r")]),
    "extras on the delta": _first(lambda e: [_text(e, content="a", reasoning_content="r")]),
    "built-in tools": _first(lambda e: [_text(e, executed_tools=[{"index": 0, "type": "search"}])]),
    "several choices": _first(
        lambda e: _choices(
            e,
            [
                {"index": 0, "delta": {"content": "zero"}, "finish_reason": None},
                {"index": 1, "delta": {"content": "one"}, "finish_reason": None},
            ],
        )
    ),
    "no choices": _first(lambda e: _choices(e, [])),
    "null choices and usage in x_groq": _first(
        lambda e: [{**e, "choices": None, "x_groq": {"id": "req_1", "usage": USAGE}}]
    ),
    "usage on the chunk": _first(_with(("usage",), USAGE)),
    "an error in x_groq": _first(_with(("x_groq",), {"id": "req_1", "error": "failed at once"})),
    "x_groq with an extra": _first(_with(("x_groq",), {"id": "req_1", "future": 1})),
    "a finish reason": _first(_with(("choices", "0", "finish_reason"), "length")),
    "extras on the chunk": _first(_with(("future",), [1])),
    "a service tier": _first(lambda e: [{**e, "service_tier": "on_demand", "system_fingerprint": None}]),
    "an empty id": _first(lambda e: [{**e, "id": ""}]),
    "an empty model": _first(lambda e: [{**e, "model": ""}]),
    "a late id and model": SHAPES["a late id and model"],
}


@pytest.mark.parametrize("shape", [*(f"first: {name}" for name in FIRST_SHAPES), *SHAPES])
def test_the_first_chunk_of_any_shape_records_what_the_general_path_records(shape: str) -> None:
    """``add`` of the first chunks (and the proxy's batches after them) against ``add``'s general path alone."""
    _, events = _recorded()
    chunks = _parsed((FIRST_SHAPES[shape[7:]] if shape.startswith("first: ") else SHAPES[shape])(events))
    fast, general = _FirstTaken(), _GeneralFirst()
    start = 0
    for start, chunk in enumerate(chunks, 1):  # noqa: B007  (start: where the batches begin)
        carried = fast.add(chunk)
        assert carried == general.add(chunk)
        assert _record(fast) == _record(general)
        if carried:
            break
    for at in range(start, len(chunks), 16):
        fast.add_batch(chunks[at : at + 16])
    for chunk in chunks[start:]:
        general.add(chunk)
    assert _record(fast) == _record(general)
    if shape in ("as recorded", "first: as recorded"):
        assert fast.taken == [True], "the recorded first chunk is read by the batch fold"
    if shape in ("first: an empty id", "first: an empty model", "a late id and model"):
        assert fast.taken[0] is None
