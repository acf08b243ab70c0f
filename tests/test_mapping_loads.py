"""The mapping's JSON parse of captured values: the scanner fast path answers exactly as the full decoder."""

from __future__ import annotations

import json

import pytest

from evaltrace.mapping._spans import _MAX_DEPTH, loads


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"q":"Paris","c":{"a":[1,2.5,null]}}', {"q": "Paris", "c": {"a": [1, 2.5, None]}}),
        (' {"a": 1} ', {"a": 1}),  # surrounding whitespace: still JSON
        ('"text"', "text"),
        ("12", 12),
        ('{"a":1} trailing', '{"a":1} trailing'),  # not JSON: the text itself
        ("1 2", "1 2"),
        ("[1,", "[1,"),
        ("", ""),
        ("plain words", "plain words"),
        ("[1e999]", ["1e999"]),  # a non-finite number stays text
        ("NaN", "NaN"),
    ],
)
def test_loads_parses_json_and_keeps_other_text(text: str, expected: object) -> None:
    assert loads(text) == expected


def test_values_nested_past_the_limit_stay_text_and_those_within_it_parse() -> None:
    # Pydantic refuses to serialise values nested deeper than the limit; the bracket-count shortcut must not
    # let one through, nor turn a value just within the limit into text.
    assert loads(_nested(_MAX_DEPTH - 1)) == json.loads(_nested(_MAX_DEPTH - 1))
    assert loads(_nested(_MAX_DEPTH)) == _nested(_MAX_DEPTH)
    assert loads(_nested(_MAX_DEPTH + 5)) == _nested(_MAX_DEPTH + 5)
    # Brackets inside strings are counted too (the walk then decides): still parsed when shallow.
    many = json.dumps({"text": "[" * (2 * _MAX_DEPTH)})
    assert loads(many) == {"text": "[" * (2 * _MAX_DEPTH)}
