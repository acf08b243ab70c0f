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

from evaltrace._internal.jsonutil import capped_json


def _not_plain(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)  # not plain data: capped_json's own rules decide


# Built once (``json.dumps`` builds an encoder per call): compact, non-ASCII kept, NaN refused, as capped_json.
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Callable[[Any, int], Any] | None = (
    _make_encoder(None, _not_plain, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    if _make_encoder is not None
    else None
)


def encoded(obj: Any, size: int, max_len: int) -> str:
    """``capped_json(obj, max_len)`` of plain data whose strings hold ``size`` characters, at lower cost.

    ``size`` bounds the work: escaping at most multiplies a string by 6, so a value within the cap encodes in
    O(cap) (plus a few characters per container, which the caller has walked already to build it).
    """
    if _ENCODE is None or (max_len > 0 and size > max_len):
        return capped_json(obj, max_len)
    try:
        text = "".join(_ENCODE(obj, 0))
    except (TypeError, ValueError, RecursionError):
        return capped_json(obj, max_len)
    if max_len > 0 and len(text) > max_len:
        return capped_json(obj, max_len)  # the truncation marker, as capped_json makes it
    return text


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
