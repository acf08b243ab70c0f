"""The OpenAI chat accumulator's batch fold records what ``add`` records, and reads the slots it means to.

``ChatAccumulator.add_batch`` reads openai's own chunk, choice and delta through the pydantic base's ``__dict__`` and
``__pydantic_extra__`` descriptors, called directly (no ``__getattr__`` hook, no type-attribute lookup per read).
The chunks here are built as the SDK builds each streamed event (``construct_type`` over the event's JSON), in the
shapes the recordings and the SDK's types allow: text, reasoning extras, a refusal, tool call fragments, the
deprecated ``function_call``, two interleaved choices, a usage chunk, and a delta with a field missing.
"""

from __future__ import annotations

from typing import Any

import pytest

openai_models = pytest.importorskip("openai._models")
from openai.types.chat import ChatCompletionChunk  # noqa: E402

from evaltrace._internal.openai import accumulate  # noqa: E402
from evaltrace._internal.openai.accumulate import ChatAccumulator  # noqa: E402


def _chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> Any:
    event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o", "choices": choices}
    if usage is not None:
        event["usage"] = usage
    return openai_models.construct_type(type_=ChatCompletionChunk, value=event)


def _choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


def _stream() -> list[Any]:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    return [
        _chunk([_choice(0, {"role": "assistant", "content": ""}), _choice(1, {"role": "assistant", "content": ""})]),
        _chunk([_choice(0, {"reasoning_content": "think "})]),
        _chunk([_choice(0, {"content": "a"}), _choice(1, {"content": "b"})]),
        _chunk([_choice(1, {"refusal": "no"})]),
        _chunk([_choice(0, {"content": "c", "reasoning": "more"})]),
        _chunk([_choice(0, {"tool_calls": [call]})]),
        _chunk([_choice(0, {"tool_calls": [{"index": 0, "function": {"arguments": '{"x":'}}]})]),
        _chunk([_choice(0, {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})]),
        _chunk([_choice(1, {"function_call": {"name": "g", "arguments": "{}"}})]),
        _chunk([_choice(0, {"content": "d"}, "tool_calls"), _choice(1, {"content": "e"}, "stop")]),
        _chunk([], {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}),
    ]


def _record(acc: ChatAccumulator) -> tuple[Any, ...]:
    return acc.outcome(), acc.end_reason(), acc.summary(), acc.failure()


def test_the_slot_readers_return_what_attribute_reads_return() -> None:
    chunk_type, choice_type, delta_type, fields_of, extra_of = accumulate._fast_types()
    assert fields_of is not None and extra_of is not None  # openai's three types share pydantic's two slots
    for chunk in _stream():
        assert type(chunk) is chunk_type
        assert fields_of(chunk) is chunk.__dict__
        for choice in chunk.choices:
            assert type(choice) is choice_type and fields_of(choice) is choice.__dict__
            delta = choice.delta
            assert type(delta) is delta_type and fields_of(delta) is delta.__dict__
            assert extra_of(delta) is delta.__pydantic_extra__


@pytest.mark.parametrize("split", [1, 2, 5])
def test_the_batch_fold_records_what_add_records(split: int) -> None:
    chunks = _stream()
    one_by_one = ChatAccumulator()
    for chunk in chunks:
        one_by_one.add(chunk)
    batched = ChatAccumulator()
    for chunk in chunks[:split]:  # the proxy adds until the first chunk with output, then folds in batches
        batched.add(chunk)
    rest = chunks[split:]
    batched.add_batch(rest[:3])
    batched.add_batch(rest[3:])
    assert _record(batched) == _record(one_by_one)
    text = [m["parts"] for m in _record(batched)[0].output_messages]
    assert text[0][0] == {"type": "reasoning", "content": "think more"}
    assert any(p.get("type") == "tool_call" for p in text[0])
