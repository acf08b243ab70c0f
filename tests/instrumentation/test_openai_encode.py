"""The builders' cheap paths (plain chat messages, ``encode.encoded``) give exactly what the general paths give."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from evaltrace import pricing
from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import TRUNCATED_KEY, capped_json
from evaltrace._internal.openai import build
from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.encode import encoded, joined_messages, text_answer, text_messages, text_size
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import Outcome

PLAIN: list[dict[str, Any]] = [
    {"role": "system", "content": 'Be brief. Ünïcödé "quotes" and \n newlines.'},
    {"role": "user", "content": "What is 2+2?", "name": "ann"},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "And 3+3?"},
]


def test_plain_chat_messages_convert_as_the_general_converter_does() -> None:
    converted = req.plain_chat_messages(PLAIN)
    assert converted is not None
    messages, size = converted
    assert messages == req.input_messages(EndpointKind.CHAT, {"messages": PLAIN})
    assert size == sum(len(m["content"]) + len(m["role"]) + len(m.get("name", "")) for m in PLAIN)


@pytest.mark.parametrize(
    "message",
    [
        {"role": "tool", "content": "42", "tool_call_id": "call_1"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
        {"role": "", "content": "no role: the converter makes it a user"},
        {"role": "user", "content": "a name that is not a string", "name": 7},
    ],
)
def test_other_shapes_take_the_general_converter(message: dict[str, Any]) -> None:
    assert req.plain_chat_messages([*PLAIN, message]) is None


@pytest.mark.parametrize("cap", [0, 40, 200, 32_768])
def test_encoded_is_capped_json(cap: int) -> None:
    messages, size = req.plain_chat_messages(PLAIN) or ([], 0)
    assert encoded(messages, size, cap) == capped_json(messages, cap)
    details = {"input": 1.8e-06, "input_cached_tokens": 0.0, "output": 3e-06, "total": 4.8e-06}
    assert encoded(details, 0, cap) == capped_json(details, cap)


def test_encoded_falls_back_on_what_the_encoder_refuses() -> None:
    assert encoded({"nan": math.nan}, 0, 100) == capped_json({"nan": math.nan}, 100)
    odd = {"set": {3, 1, 2}}
    assert encoded(odd, 0, 100) == capped_json(odd, 100) == '{"set":[1,2,3]}'


def test_a_value_over_the_cap_becomes_the_truncation_marker() -> None:
    content = "x" * 5_000
    messages = [{"role": "user", "parts": [{"type": "text", "content": content}]}]
    value = encoded(messages, text_size(messages), 1_000)
    marker = json.loads(value)
    assert marker[TRUNCATED_KEY] is True and len(value) <= 1_000 and value == capped_json(messages, 1_000)


def test_text_size_refuses_parts_with_arbitrary_values() -> None:
    call = {"type": "tool_call", "id": "c", "name": "f", "arguments": {"x": [1, 2]}}
    assert text_size([{"role": "assistant", "parts": [call], "finish_reason": "tool_call"}]) == -1
    assert text_size([{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}]) == 2


def test_request_attributes_are_the_same_on_both_paths() -> None:
    """A plain history and the same history with one SDK-shaped message (general path) give the same JSON."""

    class Message:  # an object, not a dict: takes the general converter
        role = "user"
        content = "And 3+3?"
        name = None
        tool_calls = None
        function_call = None

    fast = build.request_attributes(EndpointKind.CHAT, {"model": "m", "messages": PLAIN}, True, 32_768)
    general = build.request_attributes(
        EndpointKind.CHAT, {"model": "m", "messages": [*PLAIN[:3], Message()]}, True, 32_768
    )
    assert fast == general
    # A conversation is the input: the whole history, as its gen_ai.input.messages text (issue 24).
    assert fast["input.value"] == fast["gen_ai.input.messages"] and fast["input.mime_type"] == "application/json"


def test_a_conversation_input_is_the_whole_history_on_both_paths() -> None:
    """The plain path's ``input.value`` is ``list_values.input_attributes`` of the converted history: every message.

    It was the last user message's text (issue 24: Langfuse over plain OTLP then showed one line of a conversation).
    """
    history = [*PLAIN, {"role": "user", "content": ""}, {"role": "assistant", "content": "4 and 6."}]
    attrs = build.request_attributes(EndpointKind.CHAT, {"model": "m", "messages": history}, True, 32_768)
    messages = req.input_messages(EndpointKind.CHAT, {"messages": history})
    expected = list_values.input_attributes(messages, capped_json(messages, 32_768), None, None, 32_768)
    assert json.loads(expected["input.value"]) == messages and expected["input.mime_type"] == "application/json"
    assert {k: v for k, v in attrs.items() if k.startswith("input.")} == expected
    # One user text stays plain text: what a list shows best, and all there is.
    one = build.request_attributes(EndpointKind.CHAT, {"model": "m", "messages": PLAIN[3:]}, True, 32_768)
    assert one["input.value"] == "And 3+3?" and "input.mime_type" not in one


@pytest.mark.parametrize("text", ["This is a test.", '"Quoted": could parse as JSON', '{"city": "Paris"}', "x" * 300])
def test_one_text_answer_takes_the_short_path_to_the_same_attributes(text: str) -> None:
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    attrs = build.response_attributes(lambda: Outcome(output_messages=[message]), None, True, 200, None, "openai")
    expected = {
        "gen_ai.output.messages": capped_json([message], 200),
        **list_values.output_attributes([message], capped_json([message], 200), 200),
    }
    assert attrs == expected


@pytest.mark.parametrize("cap", [0, 40, 200, 32_768])
def test_text_messages_is_capped_json(cap: int) -> None:
    """The written-out JSON of plain histories and one-text answers is the encoder's, escapes and cap included."""
    odd = {"role": "user", "content": "lone \ud800 surrogate, \x00 control, \u2028 separator, \\ backslash"}
    messages, size = req.plain_chat_messages([*PLAIN, odd]) or ([], 0)
    assert text_messages(messages, size, cap, "name") == capped_json(messages, cap)
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": 'Say "hi"\n'}], "finish_reason": "stop"}]
    assert text_messages(answer, 10, cap, "finish_reason") == capped_json(answer, cap)


@pytest.mark.parametrize("cap", [0, 40, 200, 32_768])
def test_a_plain_history_written_while_converted_is_capped_json(cap: int) -> None:
    """The request's one-pass path (convert, measure and write each message) gives the encoder's text, capped."""
    odd = {"role": "user", "content": "lone \ud800 surrogate, \x00 control, \u2028 separator, \\ backslash"}
    named = {"role": "user", "content": 'quote " and ünïcode', "name": 'a "name"\n'}
    history = req.plain_chat_history([*PLAIN, odd, named])
    assert history is not None
    messages, size, pieces = history
    assert (messages, size) == req.plain_chat_messages([*PLAIN, odd, named])
    assert joined_messages(pieces, messages, size, cap) == capped_json(messages, cap)
    assert req.plain_chat_history([*PLAIN, {"role": "tool", "content": "42", "tool_call_id": "c"}]) is None


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}, {"type": "text", "content": "b"}]},
        {"role": "assistant", "parts": [{"type": "reasoning", "content": "hmm"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": 7}]},
        {"role": "assistant", "parts": [], "finish_reason": "error"},
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}], "finish_reason": None},
        {"role": "user", "parts": [{"type": "text", "content": "a"}], "name": "n", "extra": 1},
    ],
)
def test_text_messages_hands_other_shapes_to_the_encoder(message: dict[str, Any]) -> None:
    assert text_messages([message], 1, 200, "finish_reason") == capped_json([message], 200)


@pytest.mark.parametrize("cap", [0, 30, 200])
@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "parts": [{"type": "text", "content": 'Say "hi" \u00e9\n'}], "finish_reason": "stop"},
        {"role": "assistant", "parts": [{"type": "text", "content": "x" * 100}], "finish_reason": "length"},
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}], "finish_reason": 3},
        {"role": "user", "parts": [{"type": "text", "content": "a"}], "finish_reason": "stop"},
        {"role": "assistant", "parts": [{"type": "text", "content": "a"}]},
    ],
)
def test_text_answer_is_capped_json(message: dict[str, Any], cap: int) -> None:
    text = message["parts"][0]["content"]
    assert text_answer([message], text, cap) == capped_json([message], cap)


@pytest.mark.parametrize("content", ["Say this is a test", "", '  {"a": 1}', "[1, 2]", "42", "{not json", "x" * 60])
@pytest.mark.parametrize("role", ["user", "system", "assistant"])
@pytest.mark.parametrize("cap", [0, 30])
def test_one_plain_turn_gets_the_input_value_of_the_general_rule(content: str, role: str, cap: int) -> None:
    """A one-message request's ``input.value`` / mime type, taken from the turn it converted, are the general rule's."""
    message = {"role": role, "content": content}
    attrs = build.request_attributes(EndpointKind.CHAT, {"model": "m", "messages": [message]}, True, cap)
    messages = req.input_messages(EndpointKind.CHAT, {"messages": [message]})
    text = capped_json(messages, cap)
    assert attrs[sc.GEN_AI_INPUT_MESSAGES] == text
    expected = {sc.GEN_AI_INPUT_MESSAGES: text, **list_values.input_attributes(messages, text, None, None, cap)}
    assert attrs == expected
    assert list(attrs) == list(expected)


_COST_VALUES = [
    0.0,
    -0.0,
    1.8e-06,
    3e-06,
    4.8e-06,
    0.1 + 0.2,
    1e-300,
    1.7976931348623157e308,
    12345.678,
    math.nan,
    math.inf,
]


@pytest.mark.parametrize("writes", [False, True])
@pytest.mark.parametrize("cap", [0, 60, 32_768])
def test_cost_details_written_out_are_capped_json(writes: bool, cap: int) -> None:
    """The cost details' one-f-string path gives the encoder's text of pricing's details dict (or capped_json's
    refusal of NaN/infinity); ``input_cache_creation`` is written exactly when the dict has it."""
    from evaltrace._internal.openai.encode import cost_split_json

    for shift in range(len(_COST_VALUES)):
        values = [_COST_VALUES[(shift + i * 3) % len(_COST_VALUES)] for i in range(6)]
        if not writes:
            values[4] = 0.0
        split = tuple(values)
        details = pricing.split_details(split)  # type: ignore[arg-type]
        assert ("input_cache_creation" in details) is bool(values[4])
        assert cost_split_json(split, cap) == capped_json(details, cap), details  # type: ignore[arg-type]
    # Other value types take the encoder: ints, a float subclass.
    odd: list[tuple[Any, ...]] = [
        (1, 1, 1, 1, 1 if writes else 0, 1),
        tuple(type("F", (float,), {"__repr__": lambda self: "x"})(1.5) for _ in range(6)),
    ]
    for split in odd:
        assert cost_split_json(split, cap) == capped_json(pricing.split_details(split), cap)  # type: ignore[arg-type]


def test_cost_split_written_out_is_the_text_of_the_details_of_real_prices() -> None:
    """The span's cost details text from ``cost_split_at`` is the text the details dict of ``cost_details_at`` gave
    before (``capped_json`` of it), for every token shape, with cache writes and tiers."""
    from evaltrace._internal.openai.encode import cost_split_json

    price = pricing.ModelPrice(2.0, 8.0, 0.5, tiers=((272_000, 4.0, 1.0, 16.0),), cache_write=2.5)
    shapes = [
        (12, 5, 0, 0, None),
        (1270, 155, 1000, 64, 200),
        (300_000, 10, None, None, None),
        (5, None, None, None, 0),
    ]
    for tokens in shapes:
        split = pricing.cost_split_at(price, *tokens)
        details = pricing.cost_details_at(price, *tokens)
        assert split is not None and details is not None
        assert pricing.split_details(split) == details and list(pricing.split_details(split)) == list(details)
        assert cost_split_json(split, 32_768) == capped_json(details, 32_768)
    assert pricing.cost_split_at(None, 12, 5, 0, 0, None) is None
    assert pricing.cost_split_at(price, None, 5, 0, 0, None) is None


_VALUE_TEXTS = ["Paris", "", " x", "\u3000x", "\x1cx", "{x", "[1]", "-1", "7 days", "true", "null", "NaN", "Infinity",
                "x" * 40, "héllo", "\n", "ok\n", '"quoted"']  # fmt: skip


@pytest.mark.parametrize("cap", [0, 5, 30])
def test_a_bare_text_value_is_what_text_attributes_gives_it(cap: int) -> None:
    """``is_bare_text`` (the builders' shortcut for ``input.value`` / ``output.value``) holds only for a text whose
    ``text_attributes`` is that text alone, with no mime type: the recorded attributes stay the general rule's."""
    bare = 0
    for text in _VALUE_TEXTS:
        if list_values.is_bare_text(text, cap):
            bare += 1
            assert list_values.is_plain(text), text
            assert list_values.text_attributes(sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE, text, cap) == {
                sc.OUTPUT_VALUE: text
            }
    assert bare >= 3  # "Paris", "7 days"... take the shortcut at every cap


@pytest.mark.parametrize("text", _VALUE_TEXTS)
@pytest.mark.parametrize("cap", [0, 5, 30])
def test_a_one_text_answer_gets_the_output_value_of_the_general_rule(text: str, cap: int) -> None:
    """A one-text answer's ``output.value`` / mime type are ``output_attributes``' (the general rule's)."""
    from evaltrace._internal.engine.build import outcome_attributes_of

    message = {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    attrs = outcome_attributes_of(Outcome(output_messages=[message]), None, True, cap, "m", "openai")
    answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES]
    general = list_values.output_attributes([message], answer, cap) if text else {}
    if text and not list_values.is_plain(text):
        general = list_values.json_output_attributes(answer)
    values = {k: v for k, v in attrs.items() if k in (sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE)}
    assert values == general
