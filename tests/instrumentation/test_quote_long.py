"""``encode.quote_long`` (orjson) and the writers that use it give exactly the C encoder's text for every string.

The reference is the previous code: ``json.encoder.encode_basestring`` for one string (what ``quote_json`` was and
is), and ``capped_json`` / ``json.dumps(ensure_ascii=False, separators=(",", ":"))`` for messages. hypothesis is not
installed here, so the random texts come from a seeded generator over the whole code-point range, weighted towards
the characters the escapes treat specially.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pytest

from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai import encode
from evaltrace._internal.openai.encode import (
    LONG,
    encoded,
    messages_json,
    quote_long,
    text_answer,
    text_messages,
    text_size,
)

REFERENCE = json.encoder.encode_basestring  # type: ignore[attr-defined]
CAP = 128 * 1024

# The characters the escapes treat specially, and the edges of each string width CPython stores.
SPECIAL = [chr(c) for c in range(0x20)] + ['"', "\\", "/", "\x7f", "\x80", "\xff", "\u0100", "\u2028", "\u2029"]
SPECIAL += ["\ud7ff", "\ue000", "\ufffe", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff", "\u00e9", "\u2026"]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00"]


def _char(rng: random.Random, surrogates: bool) -> str:
    roll = rng.random()
    if roll < 0.25:
        return rng.choice(SPECIAL)
    if roll < 0.6:
        return chr(rng.randrange(0x20, 0x7F))
    if roll < 0.7:
        return chr(rng.randrange(0x80, 0x100))
    if roll < 0.85:
        return chr(rng.randrange(0x100, 0xD800))
    if roll < 0.95:
        return chr(rng.randrange(0x10000, 0x110000))
    if surrogates and roll < 0.96:
        return rng.choice(SURROGATES)
    return chr(rng.randrange(0xE000, 0x10000))


def _text(rng: random.Random) -> str:
    """A random text: mostly ASCII-only, or with one width of character, or mixed; lone surrogates in some."""
    length = rng.choice((0, 1, LONG - 1, LONG, LONG + 1, rng.randrange(2, 64), rng.randrange(64, 4096)))
    kind = rng.random()
    if kind < 0.3:  # ASCII text with its escapes (the common answer)
        alphabet = [chr(c) for c in range(0x20, 0x7F)] * 4 + ["\n", "\t", '"', "\\", "\x00", "\x1f", "\x7f"]
        return "".join(rng.choice(alphabet) for _ in range(length))
    surrogates = kind > 0.85
    return "".join(_char(rng, surrogates) for _ in range(length))


def test_every_code_point_alone_is_escaped_as_encode_basestring_escapes_it() -> None:
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        assert quote_long(char) == REFERENCE(char), hex(point)


@pytest.mark.parametrize("start", range(0, sys.maxunicode + 1, 0x8000))
def test_every_code_point_inside_a_long_text_is_escaped_as_encode_basestring_escapes_it(start: int) -> None:
    # Runs of consecutive code points (past LONG characters each), so that each one meets orjson's long-text path
    # at every alignment; the surrogates make a run of their own, which takes the C escape.
    points = range(start, min(start + 0x8000, sys.maxunicode + 1))
    for begin in range(points.start, points.stop, 1024):
        text = "".join(map(chr, range(begin, min(begin + 1024, points.stop))))
        for shift in (0, 1, 7):
            padded = "a" * shift + text
            assert quote_long(padded) == REFERENCE(padded), (hex(begin), shift)


def test_ten_thousand_random_texts_are_escaped_as_encode_basestring_escapes_them() -> None:
    rng = random.Random(20261129)
    for number in range(10_000):
        text = _text(rng)
        assert quote_long(text) == REFERENCE(text), (number, text[:80])
    assert encode._quote_long is encode._orjson_quote  # orjson (a dependency) did the escaping, not the fallback


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x" * (1 << 20),  # a long answer
        ("é\n" * 300_000) + "\U0001f600",  # one million characters in the widest width, escapes throughout
        '"' * 100_000,
        "\x00" * 50_000,
        "\\" * 70_000 + "\ud800",  # a lone surrogate at the end of a long text: the C escape
        "\u2028\u2029" * 5_000,
    ],
    ids=["empty", "1M ascii", "1M ucs4", "quotes", "nul", "surrogate at the end", "line separators"],
)
def test_very_long_and_degenerate_texts_are_escaped_as_encode_basestring_escapes_them(text: str) -> None:
    assert quote_long(text) == REFERENCE(text)


def test_a_str_subclass_is_escaped_as_its_value() -> None:
    class Text(str):
        pass

    text = Text("subclass " * 100 + '"\n')
    assert quote_long(text) == REFERENCE(text)


def _messages(rng: random.Random) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for _ in range(rng.randrange(0, 4)):
        parts: list[dict[str, Any]] = [
            {"type": rng.choice(("text", "reasoning", "refusal")), "content": _text(rng)}
            for _ in range(rng.randrange(0, 9))
        ]
        message: dict[str, Any] = {"role": rng.choice(("assistant", "user", 'sy"st\nem')), "parts": parts}
        if rng.random() < 0.5:
            message["finish_reason"] = _text(rng) if rng.random() < 0.2 else "stop"
        messages.append(message)
    return messages


def test_random_messages_with_long_texts_encode_as_the_c_encoder_and_capped_json_do() -> None:
    rng = random.Random(11_29)
    for number in range(1_500):
        messages = _messages(rng)
        size = text_size(messages)
        assert size >= 0
        for cap in (0, CAP, 600):
            assert encoded(messages, size, cap) == capped_json(messages, cap), (number, cap)
        expected = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
        assert encoded(messages, max(size, LONG), 0) == expected, number


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG}], "index": 0}],
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG, "n": None}]}],
        [{"role": "assistant", "parts": [["nested"]], "finish_reason": "stop"}],
        [{"role": "assistant", "parts": [{1: "an int key", "content": "x" * LONG}]}],
        [{1.5: "a float key", "parts": []}],
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG, "score": float("nan")}]}],
        ["a bare string" * 40],
        [{}, {"role": "user", "parts": [], "extra": {}}],
        [{"role": "assistant", "parts": [{"content": '"' * LONG, "type": "text"}]}],  # keys in the other order
    ],
    ids=["int", "none", "nested list", "int key", "float key", "nan", "string", "empty", "key order"],
)
def test_other_shapes_of_a_long_value_encode_as_capped_json_does(messages: list[Any]) -> None:
    for cap in (0, CAP):
        assert encoded(messages, CAP // 2, cap) == capped_json(messages, cap)


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A tool call's arguments or another part value: any JSON value, and some that JSON cannot hold exactly."""
    roll = rng.random()
    if depth < 3 and roll < 0.2:
        return {_text(rng)[:20]: _value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}
    if depth < 3 and roll < 0.3:
        items = [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
        return tuple(items) if rng.random() < 0.3 else items
    return rng.choice(
        [
            _text(rng),
            rng.randrange(-(10**30), 10**30),
            rng.randrange(-100, 100),
            rng.uniform(-1e20, 1e20),
            0.1,
            1e16,
            True,
            None,
            float("nan") if rng.random() < 0.1 else "no nan",
            {3: "an int key"} if rng.random() < 0.1 else "no odd key",
        ]
    )


def _answer(rng: random.Random) -> list[Any]:
    messages: list[Any] = _messages(rng)
    for message in messages:
        for _ in range(rng.randrange(0, 3)):
            call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": _value(rng)}
            message["parts"].insert(rng.randrange(0, len(message["parts"]) + 1), call)
        if rng.random() < 0.1:
            message["index"] = _value(rng)
        if rng.random() < 0.05:
            message["parts"].append(_value(rng))
    if rng.random() < 0.05:
        messages.append(_value(rng))
    return messages


def test_random_answers_with_tool_calls_and_long_texts_are_capped_json() -> None:
    rng = random.Random(1_255)
    for number in range(1_500):
        messages = _answer(rng)
        for cap in (0, CAP, 3_000, 300):
            assert messages_json(messages, cap) == capped_json(messages, cap), (number, cap)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG}, {"type": "tool_call", "id": 1}]}],
        [{"role": "assistant", "parts": [{"type": "tool_call", "arguments": {"a": ["é\n" * LONG, 1.5, None]}}]}],
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG}], "usage": {"n": float("inf")}}],
        [{"role": "assistant", "parts": [{"type": "tool_call", "arguments": object()}, {"content": "x" * LONG}]}],
        [{"role": "assistant", "parts": [{"type": "text", "content": "x" * (CAP + 10)}]}],
        "x" * LONG,
    ],
    ids=["int id", "nested arguments", "infinity", "an object", "over the cap", "no list"],
)
def test_answers_of_every_shape_are_capped_json(messages: Any) -> None:
    for cap in (0, CAP):
        assert messages_json(messages, cap) == capped_json(messages, cap)
    cycle: list[Any] = [{"role": "assistant", "parts": [{"type": "text", "content": "x" * LONG}]}]
    cycle[0]["parts"].append(cycle)
    assert messages_json(cycle, CAP) == capped_json(cycle, CAP)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_values_nested_up_to_the_recursion_limit_are_written_as_capped_json_writes_them() -> None:
    """Near the recursion limit the whole-value encoder fails (capped_json then cuts the value at its depth cap).

    The piecewise writer must not succeed where it fails: each part's value encoded from inside the writer starts a
    few levels shallower. Every depth up to past the limit, wherever it sits in a message, reads as capped_json's
    called from the same stack depth.
    """
    limit = sys.getrecursionlimit()
    for depth in (*range(0, 80), *range(limit - 250, limit + 10)):
        nested = _nested(depth)
        shapes = [
            [{"role": "assistant", "parts": [{"type": "tool_call", "arguments": nested}, {"content": "y" * LONG}]}],
            [{"role": "assistant", "parts": [nested, {"type": "text", "content": "y" * LONG}]}],
            [{"role": "assistant", "parts": [{"content": "y" * LONG}], "extra": nested}],
        ]
        for messages in shapes:
            assert messages_json(messages, CAP) == _capped_from_a_frame_below(messages), depth
            if depth < 80:  # encoded's callers pass flat values; its own whole-value encoder is older than this writer
                assert encoded(messages, LONG, CAP) == capped_json(messages, CAP), depth


def _capped_from_a_frame_below(messages: Any) -> str:
    # capped_json's own text depends on the stack depth it is called at (where the encoder meets the limit):
    # messages_json and encoded call it, or the encoder, one frame below their caller, as this does.
    return capped_json(messages, CAP)


def test_long_answers_and_histories_written_out_are_capped_json() -> None:
    rng = random.Random(2028)
    for number in range(2_000):
        text = _text(rng)
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]
        history = [{"role": "user", "parts": [{"type": "text", "content": text}], "name": "n"}]
        for cap in (0, CAP, 2_000):
            assert text_answer(answer, text, cap) == capped_json(answer, cap), (number, cap)
            assert text_messages(history, len(text) + 5, cap, "name") == capped_json(history, cap), (number, cap)


def test_without_orjson_long_texts_take_the_c_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    # An interpreter orjson has no build for: its import fails, and every long text takes encode_basestring.
    monkeypatch.setitem(sys.modules, "orjson", None)
    monkeypatch.setattr(encode, "_quote_long", encode._first_quote)
    text = "é\n" * LONG
    assert quote_long(text) == REFERENCE(text)
    assert encode._quote_long is REFERENCE
