"""The mapping's JSON parse of captured values: the scanner fast path answers exactly as the full decoder."""

from __future__ import annotations

import json
import random

import pytest

from evaltrace.mapping._spans import _DECODER, _MAX_DEPTH, _SHORT_JSON, _shallow, loads


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


def _walked(text: str) -> object:
    """What loads() answers without its shortcuts: the full decoder, then the depth walk on every value."""
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return text
    return value if _shallow(value) else text


def test_short_and_long_texts_near_the_depth_limit_answer_as_the_full_walk() -> None:
    # Texts shorter than twice the limit skip the bracket count (they cannot hold that many openers): every mix of
    # nesting, brackets inside strings and lengths around that bound answers as the walk over the parsed value.
    rng = random.Random(28)
    texts = [_nested(depth) for depth in range(_MAX_DEPTH - 3, _MAX_DEPTH + 3)]
    texts += ["[" * depth + "]" * depth for depth in range(_MAX_DEPTH - 3, _MAX_DEPTH + 3)]
    texts += ['{"a":' * depth + "1" + "}" * depth for depth in range(_MAX_DEPTH - 3, _MAX_DEPTH + 3)]
    for _ in range(3000):
        depth = rng.randrange(0, _MAX_DEPTH + 4)
        inner = json.dumps("[{" * rng.randrange(0, 40) + "x" * rng.randrange(0, 30))
        text = inner
        for _ in range(depth):
            text = rng.choice(("[{}]", '{{"k":{}}}', "[1,{}]", " [ {} ] ")).format(text)
        texts.append(text)
        texts.append(text[: rng.randrange(0, len(text) + 1)])  # cut: not JSON, mostly
    lengths = {len(t) for t in texts}
    assert min(lengths) < _SHORT_JSON < max(lengths)
    for text in texts:
        assert loads(text) == _walked(text), text
