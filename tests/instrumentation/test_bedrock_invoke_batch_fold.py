"""Claude's stream over ``invoke_model_with_response_stream`` records the same through ``add_batch`` as through ``add``.

``InvokeStreamAccumulator.add_batch`` reads a compact Anthropic content delta (``{"type":"content_block_delta",
"index":N,"delta":{"type":"text_delta","text":"..."}}``, the shape Bedrock sends) without parsing it into dicts:
once ``add`` has folded one, the next chunks that are the same head, one JSON string and ``}}`` have that string
decoded by ``json``'s own string scanner and appended. For every recorded invoke stream (botocore parsing the
replayed event stream) and for chunk shapes no recording holds (escapes, surrogates, raw UTF-8, a string followed by
more keys, duplicate keys, whitespace, other indexes, thinking and tool-input runs, non-strings, invalid JSON and
UTF-8), folding through ``add_batch`` in batches of any size must give the same outcome, end reason, summary and
failure as ``add`` on each chunk, so no recorded attribute changes. Only one Claude invoke stream is recorded
(``TestInvokeModelWithStreamResponse.test_invoke``); the thinking and tool-input runs are built in its format.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("boto3")  # an optional extra: not in CI's oldest-versions environment

from bedrock_replay import (
    OPENINFERENCE,
    chunk_frame,
    client,
    read_stream,
    recorded_params,
    replay,
    send,
    synthetic,
)

from cassettes import ReplayServer, load_cassette
from evaltrace._internal.engine.codec import add_each
from evaltrace.instrumentation.bedrock.invoke_stream import InvokeStreamAccumulator

CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"
RECORDED = OPENINFERENCE / "TestInvokeModelWithStreamResponse.test_invoke.yaml"


def _record(acc: InvokeStreamAccumulator) -> tuple[Any, ...]:
    """What the span is built from; an error building it is part of the record (both paths must fail alike)."""
    out: list[Any] = []
    for read in (acc.outcome, acc.end_reason, acc.summary, acc.failure):
        try:
            out.append(read())
        except Exception as error:
            out.append((type(error).__name__, str(error)))
    return tuple(out)


def _assert_batches_record_what_add_records(events: list[Any]) -> tuple[Any, ...]:
    """Fold ``events`` one by one, and as the proxy does (``add`` to the first output, then batches) for sizes."""
    one_by_one = InvokeStreamAccumulator("req")
    add_each(one_by_one.add, events)
    expected = _record(one_by_one)
    for size in (1, 2, 3, 64):
        batched = InvokeStreamAccumulator("req")
        start = 0
        for start, event in enumerate(events, 1):  # noqa: B007
            if batched.add(event):
                break
        for at in range(start, len(events), size):
            batched.add_batch(events[at : at + size])
        assert _record(batched) == expected, size
    return expected


@pytest.mark.parametrize(("path", "index"), recorded_params("invoke_model_with_response_stream"))
def test_every_recorded_invoke_stream_records_the_same_through_the_batch_fold(path: Path, index: int) -> None:
    with replay(path) as (api, calls, _):
        for call in calls[:index]:
            result = send(api, call)
            if call.method == "invoke_model_with_response_stream":
                read_stream(result)
        events = read_stream(send(api, calls[index]))
    assert len(events) > 10
    outcome = _assert_batches_record_what_add_records(events)[0]
    assert outcome.output_messages[0]["parts"]


def _recorded_chunks() -> list[bytes]:
    """The model events of the recorded Claude stream, as Bedrock sent them (compact JSON)."""
    body = load_cassette(RECORDED)[0].body
    chunks = []
    while body:
        size = int.from_bytes(body[:4], "big")
        message, body = body[:size], body[size:]
        if b'{"bytes":"' in message:
            chunks.append(base64.b64decode(json.loads(message[message.index(b'{"bytes":"') : -4])["bytes"]))
    return chunks


def _served(chunks: list[bytes]) -> list[Any]:
    """``chunks`` sent as a Bedrock event stream and read back by boto3 (botocore's own parsing)."""
    body = b"".join(chunk_frame(chunk) for chunk in chunks)
    with ReplayServer([synthetic(f"{CLAUDE}/invoke-with-response-stream", body)]) as server:
        result = client(server).invoke_model_with_response_stream(modelId=CLAUDE, body=b"{}")
        return read_stream(result)


TEXT = b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
EDGES: dict[str, bytes] = {
    "escapes": TEXT + b'"a\\"b\\\\c\\n\\t\\u00e9\\ud83d\\ude00\\/"}}',
    "lone surrogate": TEXT + b'"x\\ud800y"}}',
    "raw utf-8": TEXT + b'"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}}',
    "empty": TEXT + b'""}}',
    "closing bytes inside the string": TEXT + b'"x\\"}}"}}',
    "a key after the string": TEXT + b'"a","extra":1}}',
    "a duplicate key": TEXT + b'"a","text":"b"}}',
    "the type again": TEXT + b'"a","type":"thinking_delta"}}',
    "an outer key after the delta": TEXT + b'"a"},"x":{"y":"b"}}',
    "metrics after the delta": TEXT
    + b'"a"},"amazon-bedrock-invocationMetrics":{"inputTokenCount":3,"outputTokenCount":4,"x":"y"}}',
    "whitespace": b'{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "w"}}',
    "trailing newline": TEXT + b'"a"}}\n',
    "another block": b'{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"b1"}}',
    "index as a string": b'{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"s"}}',
    "a thinking delta in a text block": (
        b'{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}'
    ),
    "a signature delta": b'{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}',
    "null text": TEXT + b"null}}",
    "a number": TEXT + b"1}}",
    "a number before the closing bytes": TEXT + b'1"}}',
    "a letter before a string's text": TEXT + b'xabc"}}',
    "invalid utf-8": TEXT + b'"\xff"}}',
    # a surrogate encoded as UTF-8 bytes: strict UTF-8 (the batch fold's decode) refuses it, ``json.loads``'
    # ``surrogatepass`` reads it as the lone surrogate, so ``add`` must read this chunk
    "an encoded surrogate": TEXT + b'"x\xed\xa0\x80y"}}',
    "an encoded surrogate pair": TEXT + b'"\xed\xa0\xbd\xed\xb8\x80"}}',
    "a quote-less head": TEXT + b"'a'}}",
    "a raw control character": TEXT + b'"a\nb"}}',
    "an invalid escape": TEXT + b'"\\x"}}',
    "an unterminated string": TEXT + b'"}}',
    "a string cut short": TEXT + b'"abc',
    # after the string's closing quote the batch fold wants exactly ``}}`` (one slice after the scan): each of these
    # differs from it by one byte or by its place
    "a third closing brace": TEXT + b'"a"}}}',
    "one closing brace": TEXT + b'"a"}',
    "a space before the closing braces": TEXT + b'"a" }}',
    "a space between the closing braces": TEXT + b'"a"} }',
    "a space after the closing braces": TEXT + b'"a"}} ',
    "a bracket for a brace": TEXT + b'"a"}]',
    "nothing after the string": TEXT + b'"a"',
    "an escaped quote before the closing braces": TEXT + b'"a\\"}}',  # the string does not end there
    "an escaped backslash before the closing quote": TEXT + b'"a\\\\"}}',
    "closing braces then a letter": TEXT + b'"a"}}x',
    # a block's stop: the compact one is read by the batch fold without ``add`` (``add`` keeps nothing of it)
    "a block stop": b'{"type":"content_block_stop","index":0}',
    "a stop of another block": b'{"type":"content_block_stop","index":17}',
    "a stop of a block that never started": b'{"type":"content_block_stop","index":9}',
    "a stop with a leading zero": b'{"type":"content_block_stop","index":00}',
    "a stop with a negative index": b'{"type":"content_block_stop","index":-1}',
    "a stop with a string index": b'{"type":"content_block_stop","index":"0"}',
    "a stop with no index": b'{"type":"content_block_stop","index":}',
    "a stop with a fraction": b'{"type":"content_block_stop","index":0.5}',
    "a stop with whitespace": b'{"type":"content_block_stop","index":0 }',
    "a stop with a newline after it": b'{"type":"content_block_stop","index":0}\n',
    "a stop with another key": b'{"type":"content_block_stop","index":0,"x":1}',
    "a stop with non-ASCII digits": '{"type":"content_block_stop","index":\u0661}'.encode(),
    "a stop with metrics": (
        b'{"type":"content_block_stop","index":0,"amazon-bedrock-invocationMetrics":{"inputTokenCount":3}}'
    ),
}


@pytest.mark.parametrize("edge", list(EDGES), ids=list(EDGES))
def test_a_chunk_of_any_other_shape_in_a_run_records_what_add_records(
    edge: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge chunk lands inside a run of recorded text deltas, then the run goes on, then the recorded close."""
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")  # a chunk that fails is logged, as in production
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    at = deltas[2]
    events = _served([*chunks[:at], EDGES[edge], *chunks[at : deltas[-1] + 1], EDGES[edge], *chunks[deltas[-1] + 1 :]])
    _assert_batches_record_what_add_records(events)


def _start(index: int, block: str) -> bytes:
    return b'{"type":"content_block_start","index":%d,"content_block":%s}' % (index, block.encode())


def _delta(index: int, kind: str, name: str, value: str) -> bytes:
    raw = json.dumps(value, separators=(",", ":")).encode()
    return b'{"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":%s}}' % (
        index,
        kind.encode(),
        name.encode(),
        raw,
    )


def test_thinking_text_and_tool_input_runs_over_many_blocks_record_what_add_records() -> None:
    """No recording holds thinking or a block index past 2: the stream is built in the recorded stream's format."""
    chunks = _recorded_chunks()
    stop = [c for c in chunks if c.startswith(b'{"type":"message_delta"')]
    body = [
        chunks[0],  # the recorded message_start
        _start(0, '{"type":"thinking","thinking":"","signature":""}'),
        *(_delta(0, "thinking_delta", "thinking", f'step {i}, é "{i}"\n') for i in range(5)),
        b'{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}',
        b'{"type":"content_block_stop","index":0}',
        *(
            piece
            for n in range(1, 12)  # indexes past 9: two digits in the head
            for piece in (
                _start(n, '{"type":"text","text":""}'),
                *(_delta(n, "text_delta", "text", f"{n}.{i} ") for i in range(4)),
                b'{"type":"content_block_stop","index":%d}' % n,
            )
        ),
        _start(12, '{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}'),
        *(_delta(12, "input_json_delta", "partial_json", p) for p in ['{"city"', ': "San', ' Francisco"}']),
        b'{"type":"content_block_stop","index":12}',
        *stop,
        chunks[-1],  # the recorded message_stop with Bedrock's invocation metrics
    ]
    outcome = _assert_batches_record_what_add_records(_served(body))[0]
    parts = outcome.output_messages[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", *["text"] * 11, "tool_call"]
    assert parts[0]["content"] == "".join(f'step {i}, é "{i}"\n' for i in range(5))
    assert parts[11]["content"] == "11.0 11.1 11.2 11.3 "
    assert parts[12]["arguments"] == {"city": "San Francisco"}


@pytest.mark.parametrize(
    "edge", ["another block", "a thinking delta in a text block", "invalid utf-8", "an encoded surrogate", "empty"]
)
def test_a_run_goes_on_across_batches_and_single_adds_in_any_order(edge: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run starts from the delta the last ``add`` folded, whether that ``add`` came from a batch or not.

    The batches and single ``add`` calls alternate in several patterns (the proxy folds ``add`` until the first
    output, then batches; a batch may end or start anywhere in a run, or right after an edge chunk).
    """
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    at = deltas[4]
    events = _served([*chunks[:at], EDGES[edge], *chunks[at:]])
    one_by_one = InvokeStreamAccumulator("req")
    add_each(one_by_one.add, events)
    expected = _record(one_by_one)
    for pattern in ((1, 0), (2, 1), (3, 2), (5, 1), (1, 1, 4, 0), (7, 3)):  # batch size, then single adds, ...
        mixed = InvokeStreamAccumulator("req")
        at, step = 0, 0
        while at < len(events):
            size = pattern[step % len(pattern)]
            if step % 2 == 0:
                mixed.add_batch(events[at : at + size])
            else:
                add_each(mixed.add, events[at : at + size])
            at, step = at + size, step + 1
        assert _record(mixed) == expected, pattern


@pytest.mark.parametrize(
    "edge",
    [
        "escapes",
        "raw utf-8",
        "empty",
        "closing bytes inside the string",
        "an escaped backslash before the closing quote",
    ],
)
def test_a_delta_of_the_compact_shape_is_read_by_the_batch_fold_alone(
    edge: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text deltas with escapes and multi-byte UTF-8 stay on the batch fold's path (no ``add``), read as ``add`` reads.

    Guards the fast path itself: a check that sent every such chunk to ``add`` would still record the same.
    """
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    at = deltas[2]
    events = _served([*chunks[:at], EDGES[edge], *chunks[at:]])
    expected = _assert_batches_record_what_add_records(events)
    added: list[Any] = []
    add = InvokeStreamAccumulator.add
    monkeypatch.setattr(InvokeStreamAccumulator, "add", lambda self, event: added.append(event) or add(self, event))
    batched = InvokeStreamAccumulator("req")
    batched.add_batch(events[:at])  # up to the first deltas of the run, through ``add`` or not
    added.clear()
    batched.add_batch(events[at : deltas[-1] + 2])  # the edge, then the rest of the run
    assert added == []
    batched.add_batch(events[deltas[-1] + 2 :])
    assert _record(batched) == expected


def test_compact_block_stops_and_run_starts_are_read_by_the_batch_fold_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a batch, every block's stop and every content delta (the first of a run too) skip ``add``; nothing else.

    ``add`` keeps nothing of a ``content_block_stop`` (``MessagesAccumulator.add`` reads no field of it), and
    appends a compact delta's string to its block: the batch fold records what ``add`` records
    (``_assert_batches_record_what_add_records``, and the other shapes of a stop or delta in ``EDGES``), and if
    ``add`` came to keep something more of either, those comparisons would fail. The recorded stream, and the same
    with one more text block.
    """
    chunks = _recorded_chunks()
    many = [*chunks[:-2], _start(3, '{"type":"text","text":""}'), _delta(3, "text_delta", "text", "x"), *chunks[-3:]]
    many[-3] = b'{"type":"content_block_stop","index":3}'
    for body in (chunks, many):
        events = _served(body)
        expected = _assert_batches_record_what_add_records(events)
        added: list[bytes] = []
        add = InvokeStreamAccumulator.add
        monkeypatch.setattr(
            InvokeStreamAccumulator,
            "add",
            lambda self, event, seen=added, fold=add: seen.append(event["chunk"]["bytes"]) or fold(self, event),
        )
        batched = InvokeStreamAccumulator("req")
        batched.add_batch(events)
        monkeypatch.undo()
        stops = [c for c in body if c.startswith(b'{"type":"content_block_stop"')]
        assert len(stops) >= 3
        assert not set(stops) & set(added)
        deltas = [c for c in body if c.startswith(b'{"type":"content_block_delta"')]
        assert len(deltas) > 10
        assert added == [c for c in body if c not in stops and c not in deltas]
        assert _record(batched) == expected


@pytest.mark.parametrize("edge", [name for name in EDGES if "stop" in name])
def test_only_a_compact_stop_skips_add(edge: str) -> None:
    """``_block_stop`` takes only bytes that parse to a stop's two keys (any other stop-like chunk goes to ``add``)."""
    from evaltrace.instrumentation.bedrock.invoke_stream import _block_stop

    data = EDGES[edge]
    taken = _block_stop(data)
    assert taken == (edge in ("a block stop", "a stop of another block", "a stop of a block that never started"))
    if taken:
        body = json.loads(data)
        assert body == {"type": "content_block_stop", "index": body["index"]}
        assert type(body["index"]) is int


def _head_by_format(data: bytes) -> tuple[bytes, int] | None:
    """``_delta_head`` as first written: each kind's whole head formatted, then ``startswith`` (the reference)."""
    opening = b'{"type":"content_block_delta","index":'
    comma = data.find(b",", len(opening))
    digits = data[len(opening) : comma]
    if not data.startswith(opening) or not digits.isdigit() or (digits[:1] == b"0" and len(digits) > 1):
        return None
    for kind, name in (("text_delta", "text"), ("input_json_delta", "partial_json"), ("thinking_delta", "thinking")):
        head = b'%s,"delta":{"type":"%s","%s":' % (data[:comma], kind.encode(), name.encode())
        if data.startswith(head):
            return head, int(digits)
    return None


def test_the_head_of_a_run_is_the_one_formatting_it_finds() -> None:
    """``_delta_head`` compares slices of the chunk with each kind's tail; it finds what formatting each head finds.

    Chunks are random joins of the pieces a head is made of (indexes with and without leading zeros, each kind and
    one ``add`` keeps nothing of, stray commas, quotes, braces, invalid bytes), half of them opening as a delta.
    """
    from evaltrace.instrumentation.bedrock.invoke_stream import _delta_head

    pieces = [
        b"0",
        b"12",
        b"01",
        b"x",
        b"-1",
        b" ",
        b",",
        b'"',
        b"}",
        b"\xff",
        b'"a"}}',
        b',"delta":{"type":"text_delta","text":',
        b',"delta":{"type":"input_json_delta","partial_json":',
        b',"delta":{"type":"thinking_delta","thinking":',
        b',"delta":{"type":"signature_delta","signature":',
        b',"delta":{"type":"text_delta","text" :',
        b'{"type":"content_block_start","index":',
        TEXT[:-20],
    ]
    rng = random.Random(28)
    found = 0
    for _ in range(20_000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        if rng.random() < 0.5:
            data = b'{"type":"content_block_delta","index":' + data
        assert _delta_head(data) == _head_by_format(data), data
        found += _head_by_format(data) is not None
    assert found > 100  # the heads themselves were among them, not only refusals


# --- chunk pairs and odd events in a run (s14-foldinvlite) ----------------------------------------------------------

# Two chunks whose pieces after the head join into JSON strings across the chunks' boundary (a read of a run's
# strings together, as one JSON array, must not take them so), containers opened in one chunk and closed in the
# next, whitespace after a string: each pair is two chunks of a run, whichever way the batch fold reads a run.
PAIRS: dict[str, tuple[bytes, bytes]] = {
    "a string reaching into the next chunk": (TEXT + b'"a","b}}', TEXT + b'"}}'),
    "an object opened in one chunk, closed in the next": (TEXT + b'"a",{"x":1}}', TEXT + b'"k":"v"}}}'),
    "a list opened in one chunk, closed in the next": (TEXT + b'"a",["c"}}', TEXT + b'"d"]}}'),
    "two strings, then a piece with none": (TEXT + b'"a","b"}}', TEXT + b'"}}'),
    "an array closed early": (TEXT + b'"a"],["b"}}', TEXT + b'"c"}}'),
    "trailing whitespace": (TEXT + b'"a" }}', TEXT + b'"b"\n\t}}'),
    "a nested list of strings": (TEXT + b'"a",[["b"]]}}', TEXT + b'"c"}}'),
    "deep nesting": (TEXT + b'"a",' + b"[" * 5000 + b"}}", TEXT + b'"b"' + b"]" * 5000 + b"}}"),
    "a raw newline in one string": (TEXT + b'"a\nb"}}', TEXT + b'"c"}}'),
    "a character split over two chunks": (TEXT + b'"\xc3}}', TEXT + b'\xa9"}}'),
    "a string of brackets and separators": (TEXT + b'"],\\n["}}', TEXT + b'",\\n"}}'),
}


def _events(chunks: list[bytes]) -> list[Any]:
    """``chunks`` as botocore hands them over: ``{"chunk": {"bytes": ...}}``, each a dict."""
    return [{"chunk": {"bytes": chunk}} for chunk in chunks]


@pytest.mark.parametrize("pair", list(PAIRS), ids=list(PAIRS))
def test_pieces_that_scan_only_across_chunks_record_what_add_records(
    pair: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's strings are scanned as one array: two chunks whose pieces join into strings must not be read so."""
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    at = deltas[3]
    first, second = PAIRS[pair]
    _assert_batches_record_what_add_records(_events([*chunks[:at], first, second, *chunks[at:]]))
    _assert_batches_record_what_add_records(_served([*chunks[:at], first, second, *chunks[at:]]))


class _View(dict):  # type: ignore[type-arg]
    """A dict subclass: not botocore's event, read by ``add`` (which takes any mapping)."""


ODD_EVENTS: dict[str, Any] = {
    "a dict subclass event": _View(chunk={"bytes": TEXT + b'"v"}}'}),
    "a dict subclass chunk": {"chunk": _View(bytes=TEXT + b'"v"}}')},
    "a mapping proxy event": __import__("types").MappingProxyType({"chunk": {"bytes": TEXT + b'"m"}}'}}),
    "bytearray bytes": {"chunk": {"bytes": bytearray(TEXT + b'"b"}}')}},
    "str bytes": {"chunk": {"bytes": (TEXT + b'"s"}}').decode()}},
    "memoryview bytes": {"chunk": {"bytes": memoryview(TEXT + b'"m"}}')}},
    "no chunk": {"other": {"bytes": TEXT + b'"n"}}'}},
    "no bytes": {"chunk": {"other": TEXT + b'"n"}}'}},
    "None bytes": {"chunk": {"bytes": None}},
    "an int event": 7,
    "a None chunk": {"chunk": None},
    "a list event": [TEXT + b'"l"}}'],
}


@pytest.mark.parametrize("odd", list(ODD_EVENTS), ids=list(ODD_EVENTS))
def test_events_of_other_types_in_a_run_record_what_add_records(odd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only dicts of dicts of ``bytes`` are a run's chunks; any other event in a run is read as ``add`` reads it."""
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    events = _events(chunks)
    for at in (deltas[1], deltas[5], deltas[-1] + 1):
        _assert_batches_record_what_add_records([*events[:at], ODD_EVENTS[odd], *events[at:]])


def test_random_streams_of_edges_record_what_add_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded text deltas with edge chunks, pairs and odd events at random places, folded in random batches."""
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    extras: list[list[Any]] = [
        *([{"chunk": {"bytes": edge}}] for edge in EDGES.values()),
        *(_events(list(pair)) for pair in PAIRS.values()),
        *([odd] for odd in ODD_EVENTS.values()),
    ]
    rng = random.Random(1428)
    for _ in range(150):
        events = _events(chunks)
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(deltas[0] + 1, len(events) - 1)
            events[at:at] = rng.choice(extras)
        one_by_one = InvokeStreamAccumulator("req")
        add_each(one_by_one.add, events)
        batched = InvokeStreamAccumulator("req")
        start = 0
        for start, event in enumerate(events, 1):  # noqa: B007
            if batched.add(event):
                break
        while start < len(events):
            size = rng.choice((1, 2, 5, 16, 64))
            batched.add_batch(events[start : start + size])
            start += size
        assert _record(batched) == _record(one_by_one), events


def test_random_strings_in_a_run_record_what_add_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's strings are read as ``json``'s string scanner reads them, whatever a faster read would skip.

    Random strings over quotes, backslashes, control and non-printable characters, non-ASCII and astral ones, put
    in a run both raw (as bytes between the quotes, valid JSON or not) and as ``json.dumps`` writes them (escaped
    or not): the batch fold records what ``add`` records for each.
    """
    monkeypatch.setenv("EVALTRACE_RAISE_INTERNAL_ERRORS", "0")
    chunks = _recorded_chunks()
    deltas = [i for i, c in enumerate(chunks) if c.startswith(TEXT)]
    alphabet = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "\x85", "\xa0", "\u2028", "\u200b", "é", "€", "😀", "a", " ",
                "}", "/", "u"]  # fmt: skip
    rng = random.Random(2814)
    for _ in range(60):
        pieces = []
        for _ in range(8):
            raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
            pieces.append(TEXT + b'"' + raw.encode() + b'"}}')
            pieces.append(TEXT + json.dumps(raw, ensure_ascii=rng.random() < 0.5).encode() + b"}}")
        at = deltas[2]
        _assert_batches_record_what_add_records(_events([*chunks[:at], *pieces, *chunks[at:]]))
