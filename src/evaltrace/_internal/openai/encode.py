"""Serialise what the builders made (messages of parts, usage and cost details) in one C encoder call each.

``capped_json`` must accept any value, so it first walks the value in Python to bound the work by the cap; that
walk costs more than the encoding of a chat message. The builders know what they made: plain dicts, lists and
scalars, and the number of characters in its strings (counted while converting). When those fit the cap the value
goes straight to the C encoder; anything else (a value over the cap, an object the encoder does not know, NaN)
takes ``capped_json``, so the text is always the one ``capped_json`` would give.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any

from evaltrace._internal.jsonutil import _plain_budget, _work_limit, capped_json
from evaltrace.pricing import split_details


def _not_plain(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)  # not plain data: capped_json's own rules decide


# Built once (``json.dumps`` builds an encoder per call): compact, non-ASCII kept, NaN refused, as capped_json.
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Callable[[Any, int], Any] | None = (
    _make_encoder(None, _not_plain, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    if _make_encoder is not None
    else None
)


# Quotes and escapes a string as the C encoder does with ``encode_basestring`` (non-ASCII kept).
_QUOTE: Callable[[str], str] = json.encoder.encode_basestring
quote_json = _QUOTE

# From this many characters on, ``quote_long`` takes orjson: its call and the UTF-8 decode of its bytes cost about
# 1k instructions more than ``encode_basestring``'s call, and its escape saves ~27 instructions per ASCII character
# and ~13 per other character (``encode_basestring`` reads every character twice, through a switch on its width).
LONG = 256


def _orjson_quote(text: str) -> str:
    try:
        return _orjson_dumps(text).decode()
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, which encode_basestring keeps as it is
        return _QUOTE(text)


def _first_quote(text: str) -> str:
    """``quote_long``'s first call: imports orjson (a dependency, but loaded on first use: ``import evaltrace``)."""
    global _orjson_dumps, _quote_long
    try:
        from orjson import dumps
    except ImportError:  # an interpreter orjson does not build for: the C escape, as before
        _quote_long = _QUOTE
    else:
        _orjson_dumps, _quote_long = dumps, _orjson_quote
    return _quote_long(text)


_orjson_dumps: Callable[[str], bytes]
_quote_long: Callable[[str], str] = _first_quote


def quote_long(text: str) -> str:
    r"""``quote_json(text)`` (the same text for every ``str``) at lower cost for a text of ``LONG`` characters or more.

    orjson escapes exactly the characters ``encode_basestring`` escapes (``"``, ``\`` and U+0000 to U+001F),
    in the same forms (``\n``, ``\u001f`` in lower case) and keeps every other character as it is, U+007F,
    U+2028 and non-BMP characters included; ``tests/instrumentation/test_quote_long.py`` holds it to that for
    every code point and for random long texts. It refuses lone surrogates, which take ``encode_basestring``.
    """
    return _quote_long(text)


def encoded(obj: Any, size: int, max_len: int) -> str:
    """``capped_json(obj, max_len)`` of plain data whose strings hold ``size`` characters, at lower cost.

    ``size`` bounds the work: escaping at most multiplies a string by 6, so a value within the cap encodes in
    O(cap) (plus a few characters per container, which the caller has walked already to build it).
    """
    if _ENCODE is None or (max_len > 0 and size > max_len):
        return capped_json(obj, max_len)
    try:
        text = (size >= LONG and type(obj) is list and _messages_json(obj, _ENCODE)) or "".join(_ENCODE(obj, 0))
    except (TypeError, ValueError, RecursionError):
        return capped_json(obj, max_len)
    if max_len > 0 and len(text) > max_len:
        return capped_json(obj, max_len)  # the truncation marker, as capped_json makes it
    return text


# Containers nested deeper than this in a message take the encoder's whole-value path (``capped_json``): near the
# recursion limit, the C encoder called on a part value from here runs a few levels shallower than on the whole
# value, so it could succeed where the whole-value call fails (and capped_json falls back to its depth-capped form).
_NEST_LIMIT = 64


def _too_deep(obj: Any, left: int = _NEST_LIMIT) -> bool:
    """Whether containers nest in ``obj`` more than ``left`` levels deep (the C encoder's own container types)."""
    if isinstance(obj, dict):
        items: Any = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    else:
        return False
    if left <= 0:
        return True
    return any(_too_deep(item, left - 1) for item in items)


def _value_json(value: Any, encode: Callable[[Any, int], Any]) -> str:
    """The encoder's text of a value in a message; ValueError (the whole value's path) when nested too deep."""
    if _too_deep(value):
        raise ValueError("nested past _NEST_LIMIT")
    return "".join(encode(value, 0))


def _messages_json(messages: list[Any], encode: Callable[[Any, int], Any]) -> str:
    """The C encoder's (``encode``'s) text of GenAI messages, their long strings escaped by ``quote_long``.

    For a value holding a long string: its strings of ``LONG`` characters or more take ``quote_long``, the others
    ``encode_basestring`` as the encoder does, and any other value in a message or a part (a tool call's
    arguments, a number) takes the encoder itself, whose text of a value is the same wherever the value sits
    (compact, no indent). The text is written in the encoder's order and separators (keys in insertion order,
    ``{}`` and ``[]`` when empty). The pieces go to one list joined once, as the encoder joins its own: joining at
    each level would copy the long texts once a level (and widen each ASCII piece next to a non-ASCII text), which
    cost more than orjson saved. Raises what the encoder raises, and ValueError for a value nested past
    ``_NEST_LIMIT``; an empty text (never a JSON value) when a message is no dict or a key no string, whose text the
    encoder decides for the whole value.
    """
    quote, comma = _QUOTE, _COMMA
    out = ["["]
    append = out.append
    for message in messages:
        if type(message) is not dict:
            return ""
        append("{")
        for key, value in message.items():
            if type(key) is not str:
                return ""
            if type(value) is str:
                append(f"{quote(key)}:")
                append(quote(value) if len(value) < LONG else _quote_long(value))
            elif type(value) is list:
                append(f"{quote(key)}:[")
                for part in value:
                    if type(part) is not dict:
                        append(_value_json(part, encode))
                        append(comma)
                        continue
                    append("{")
                    for name, text in part.items():
                        if type(name) is not str:
                            return ""
                        append(f"{quote(name)}:")
                        if type(text) is not str:
                            append(_value_json(text, encode))
                        else:
                            append(quote(text) if len(text) < LONG else _quote_long(text))
                        append(comma)
                    _close(out, "}")
                    append(comma)
                _close(out, "]")
            else:
                append(f"{quote(key)}:")
                append(_value_json(value, encode))
            append(comma)
        _close(out, "}")
        append(comma)
    _close(out, "]")
    return "".join(out)


def messages_json(messages: Any, max_len: int) -> str:
    """``capped_json(messages, max_len)`` of GenAI messages whose parts may hold any value, their long texts cheaper.

    The answers ``text_size`` refuses (tool calls with arguments, media): ``capped_json`` walks the value first to
    bound the work by the cap (``_plain_budget``), then, when it is plain data within that bound, writes it with the
    C encoder. Here the same walk decides, and a value holding at least ``LONG`` characters is written by
    ``_messages_json`` instead, its long texts escaped by ``quote_long``; everything else, and any value the walk or
    the writer refuses, is ``capped_json``'s.
    """
    encode = _ENCODE
    if max_len <= 0 or encode is None or type(messages) is not list:
        return capped_json(messages, max_len)
    limit = _work_limit(max_len)
    try:
        left = _plain_budget(messages, limit)
    except RecursionError:
        left = -1
    if left < 0 or limit - left < LONG:
        return capped_json(messages, max_len)
    try:
        text = _messages_json(messages, encode)
    except (TypeError, ValueError, RecursionError):
        return capped_json(messages, max_len)
    if not text or len(text) > max_len:
        return capped_json(messages, max_len)  # the encoder's text, or the truncation marker, as capped_json makes it
    return text


_COMMA = ","  # the separator piece: no other piece is a lone comma (keys end in a colon, strings in a quote)


def _close(out: list[str], bracket: str) -> None:
    """End the container whose items ``out`` ends with: its last separator becomes ``bracket`` (none: empty)."""
    if out[-1] is _COMMA:
        out[-1] = bracket
    else:
        out.append(bracket)


def scalars_json(values: dict[str, Any], max_len: int) -> str:
    """``capped_json(values, max_len)`` of a flat dict of scalars (the model parameters), through ``encoded``."""
    size = 0
    for value in values.values():
        if type(value) is str:
            size += len(value)
    return encoded(values, size, max_len)


_FLOAT = frozenset((float,))


def cost_split_json(split: tuple[float, float, float, float, float, float], max_len: int) -> str:
    """``encoded(pricing.split_details(split), 0, max_len)``: the cost details' JSON, written out in one f-string.

    ``split`` is ``pricing.cost_split_at``'s tuple; ``input_cache_creation`` is written only when its value is
    non-zero, as ``split_details`` keeps it. No dict is built: the encoder spends ~21k instructions on these five
    floats (its per-call setup, a list of pieces, a join), and a dict of them first was ~4k more. Each float is the
    same ``float.__repr__`` the encoder uses for a finite float. A value that is not an exact float, a non-finite
    value (the encoder refuses NaN and infinities) or a text over the cap takes ``encoded`` of the details.
    """
    a, b, c, d, e, t = split
    if _FLOAT.issuperset(map(type, split)):
        if e:
            text = (
                f'{{"input":{a!r},"input_cached_tokens":{b!r},"output":{c!r},'
                f'"output_reasoning_tokens":{d!r},"input_cache_creation":{e!r},"total":{t!r}}}'
            )
        else:
            text = (
                f'{{"input":{a!r},"input_cached_tokens":{b!r},"output":{c!r},'
                f'"output_reasoning_tokens":{d!r},"total":{t!r}}}'
            )
        finite = a + b + c + d + e + t  # NaN or infinite when any value is (or when the sum overflows: encoded)
        if finite - finite == 0.0 and (max_len <= 0 or len(text) <= max_len):
            return text
    return encoded(split_details(split), 0, max_len)


def joined_messages(pieces: list[str], messages: list[dict[str, Any]], size: int, max_len: int) -> str:
    """``text_messages(messages, size, max_len, "name")`` of a history ``request.plain_chat_history`` converted.

    ``pieces`` are the JSON texts of ``messages`` that it wrote while converting them: joined, and capped as
    ``capped_json`` caps (the truncation marker past the cap).
    """
    if max_len > 0 and size > max_len:
        return capped_json(messages, max_len)
    text = f"[{','.join(pieces)}]"
    if max_len > 0 and len(text) > max_len:
        return capped_json(messages, max_len)  # the truncation marker, as capped_json makes it
    return text


def text_messages(messages: list[dict[str, Any]], size: int, max_len: int, extra_key: str) -> str:
    """``encoded(messages, size, max_len)`` of messages of one text part each, written out without the encoder.

    Each message must be ``{"role": str, "parts": [{"type": "text", "content": str}]}``, optionally followed by a
    string under ``extra_key`` (``name`` for a chat request, ``finish_reason`` for an answer): the shapes of a plain
    chat history (``request.plain_chat_messages``) and of a one-text answer. The text is the same (same key order,
    same escaping, compact separators) at about half the encoder's cost (~7k instead of ~14k instructions for one
    message: the encoder's per-call setup dominates small values); any other shape takes ``encoded``.
    """
    if max_len > 0 and size > max_len:
        return capped_json(messages, max_len)
    quote = _QUOTE
    pieces: list[str] = []
    for message in messages:
        role = message["role"]
        parts = message["parts"]
        part = parts[0] if len(parts) == 1 else None
        if (
            part is None
            or len(part) != 2
            or part["type"] != "text"
            or type(content := part["content"]) is not str
            or type(role) is not str
        ):
            return encoded(messages, size, max_len)
        if len(message) == 2:
            tail = ""
        elif len(message) == 3 and type(extra := message.get(extra_key)) is str:
            tail = f',"{extra_key}":{quote(extra)}'
        else:
            return encoded(messages, size, max_len)
        quoted = quote(content) if len(content) < LONG else _quote_long(content)
        pieces.append(f'{{"role":{quote(role)},"parts":[{{"type":"text","content":{quoted}}}]{tail}}}')
    text = f"[{','.join(pieces)}]"
    if max_len > 0 and len(text) > max_len:
        return capped_json(messages, max_len)  # the truncation marker, as capped_json makes it
    return text


def text_answer(output: list[dict[str, Any]], text: str, max_len: int) -> str:
    """``text_messages(output, len(text), max_len, "finish_reason")`` of a one-text answer, with fewer checks.

    ``output`` is one message from ``parts.output_message`` (role, parts, finish_reason, in that order) whose only
    part is a text part holding ``text`` (the caller checked the part). Anything else takes ``text_messages``.
    """
    message = output[0]
    reason = message.get("finish_reason")
    if len(message) != 3 or message["role"] != "assistant" or type(reason) is not str or len(message["parts"][0]) != 2:
        return text_messages(output, len(text), max_len, "finish_reason")
    if max_len > 0 and len(text) > max_len:
        return capped_json(output, max_len)
    content, finish = _QUOTE(text) if len(text) < LONG else _quote_long(text), _QUOTE(reason)
    json_text = f'[{{"role":"assistant","parts":[{{"type":"text","content":{content}}}],"finish_reason":{finish}}}]'
    if max_len > 0 and len(json_text) > max_len:
        return capped_json(output, max_len)
    return json_text


def text_size(messages: list[dict[str, Any]]) -> int:
    """Characters in the strings of GenAI messages whose parts are all plain (text, reasoning, refusal); else -1.

    Any other part (tool calls with arbitrary arguments, media) makes the caller take ``capped_json``.
    """
    size = 0
    for message in messages:
        for part in message["parts"]:
            content = part.get("content")
            if type(content) is not str or len(part) != 2:
                return -1
            size += len(content)
    return size
