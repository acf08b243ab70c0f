"""A Bedrock invoke-stream chunk is read to the value ``json.loads`` gives it, and fails as ``json.loads`` fails.

``invoke_stream._loads`` scans a chunk that is a JSON object in UTF-8 bytes with ``json.loads``' own C scanner,
skipping its Python layers, and hands anything else to ``json.loads``. Every chunk of every recorded invoke stream
and the inputs no recording holds (whitespace around the object, trailing data, other encodings, invalid UTF-8,
surrogates, non-finite numbers, non-objects, truncated JSON) must give the same value, or the same error.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from cassettes import FIXTURES, load_cassette
from evaltrace.instrumentation.bedrock.invoke_stream import _loads


def _recorded_chunks() -> list[bytes]:
    """The model events inside every recorded invoke_model_with_response_stream body."""
    chunks = []
    for path in sorted((FIXTURES / "bedrock-cassettes").rglob("*.yaml")):
        for item in load_cassette(path):
            if not item.uri.endswith("/invoke-with-response-stream") or item.status != 200:
                continue
            body = item.body
            while body:
                size = int.from_bytes(body[:4], "big")
                message, body = body[:size], body[size:]
                if b'{"bytes":"' in message:
                    payload = json.loads(message[message.index(b'{"bytes":"') : -4])
                    chunks.append(base64.b64decode(payload["bytes"]))
    return chunks


EDGES: list[bytes | str] = [
    b'{"a":1}',
    b'{"a":1} ',
    b'{"a":1}\n\n',
    b' {"a":1}',
    b'{"a":1}x',
    b'{"a":1}{"b":2}',
    b'{"a":',
    b"{",
    b"{}",
    b'{"a":NaN,"b":Infinity,"c":-Infinity}',
    b'{"a":"\\ud800","b":"\\u00e9","c":"\xc3\xa9"}',
    b'{"a":"\xff"}',  # invalid UTF-8
    b'{"a":"x\ny"}',  # a raw control character: strict decoding refuses it
    b'{"a":1e400,"b":12345678901234567890123}',
    b'{\x00"\x00a\x00"\x00:\x001\x00}\x00',  # UTF-16-LE without a BOM
    '{"a":1}'.encode("utf-16"),
    b"\xef\xbb\xbf" + b'{"a":1}',  # UTF-8 BOM
    b"[1,2]",
    b'"text"',
    b"",
    '{"a":1}',
    ' {"a": [1, {"b": null}]} ',
    b'{"a":' * 50 + b"1" + b"}" * 50,
    # ``{`` then NUL: ``json.loads`` reads UTF-16-LE / UTF-32-LE; a NUL further on is UTF-8 (and invalid JSON)
    b"{\x00}\x00",
    b"{\x00\x00\x00",
    b"{\x00",
    b'{"\x00a":1}',
    b'{ \x00 "a":1}',
    b'{"a":"\x00"}',
    # surrogates encoded as UTF-8 bytes: strict UTF-8 refuses them, ``json.loads``' ``surrogatepass`` reads them
    b'{"a":"x\xed\xa0\x80y"}',
    b'{"a":"\xed\xa0\xbd\xed\xb8\x80"}',
    b'{"\xed\xb0\x80":1}',
    b'{"a":"\xed\xa0"}',  # a surrogate's first two bytes only
]


def _outcome(fn: Any, data: bytes | str) -> tuple[str, Any]:
    try:
        return "value", fn(data)
    except Exception as error:
        return type(error).__name__, str(error)


def test_every_recorded_chunk_reads_as_json_loads_reads_it() -> None:
    chunks = _recorded_chunks()
    assert len(chunks) >= 20
    for chunk in chunks:
        assert _loads(chunk) == json.loads(chunk)


@pytest.mark.parametrize("data", EDGES, ids=range(len(EDGES)))
def test_any_other_input_gives_the_value_or_the_error_of_json_loads(data: bytes | str) -> None:
    got, expected = _outcome(_loads, data), _outcome(json.loads, data)
    if got[0] == "value" and expected[0] == "value":
        assert json.dumps(got[1]) == json.dumps(expected[1])  # NaN compares unequal to itself: compare the text
    else:
        assert got == expected
