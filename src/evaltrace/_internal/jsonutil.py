"""Size-capped JSON for attribute values: any object in, valid JSON text out, never an exception.

The fast path is one ``json.dumps`` call with a ``default`` hook (the C encoder handles the common types);
only objects that defeat it (circular references, pathological nesting) take the slow recursive path.
A value longer than the cap is replaced by a marker object that is itself valid JSON and records the original
length, so backends never receive JSON cut in the middle.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import math
import uuid
from collections.abc import Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any

DEFAULT_MAX_LENGTH = 32_768
"""Default cap, in characters, for a captured JSON attribute value."""

TRUNCATED_KEY = "evaltrace.truncated"
_MAX_DEPTH = 12
_MAX_ITEMS = 1_000
_MAX_REPR = 200


def _default(obj: Any) -> Any:
    """``json.dumps`` hook: a bounded, JSON-able stand-in for a value the encoder does not know."""
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump) and not isinstance(obj, type):
        try:
            return model_dump(mode="json")
        except Exception:  # a broken model must not break capture
            return _short_repr(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    if isinstance(obj, set | frozenset):
        items = list(obj)[:_MAX_ITEMS]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        raw = bytes(obj)
        return {"type": "bytes", "length": len(raw), "base64_prefix": base64.b64encode(raw[:48]).decode()}
    if isinstance(obj, dt.datetime | dt.date | dt.time):
        return obj.isoformat()
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, uuid.UUID | Decimal | PurePath | complex):
        return str(obj)
    if isinstance(obj, Mapping):
        return {str(k): v for k, v in list(obj.items())[:_MAX_ITEMS]}
    return _short_repr(obj)


def _short_repr(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__qualname__}>"
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def to_jsonable(obj: Any, _depth: int = 0, _seen: frozenset[int] = frozenset()) -> Any:
    """Return a JSON-able copy of ``obj`` with cycles broken, depth and container sizes bounded."""
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if _depth >= _MAX_DEPTH:
        return _short_repr(obj)
    if id(obj) in _seen:
        return "<circular reference>"
    seen = _seen | {id(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, _depth + 1, seen) for k, v in list(obj.items())[:_MAX_ITEMS]}
    if isinstance(obj, list):
        return [to_jsonable(v, _depth + 1, seen) for v in obj[:_MAX_ITEMS]]
    converted = _default(obj)
    if isinstance(converted, str):
        return converted
    return to_jsonable(converted, _depth + 1, seen)


# One encoder for all calls: json.dumps with non-default options builds a new encoder each time (~2 us).
_ENCODER = json.JSONEncoder(default=_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dumps(obj: Any) -> str:
    try:
        return _ENCODER.encode(obj)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(to_jsonable(obj), ensure_ascii=False, separators=(",", ":"))


def truncation_marker(text: str, max_length: int) -> str:
    """Return a valid-JSON marker standing for ``text``: original length plus the longest preview that fits."""
    preview_len = max(0, max_length - 80)
    while True:
        marker = json.dumps(
            {TRUNCATED_KEY: True, "original_length": len(text), "preview": text[:preview_len]},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        if len(marker) <= max_length or preview_len == 0:
            return marker
        # Escaping can grow the preview; shrink by the overshoot and retry.
        preview_len = max(0, preview_len - (len(marker) - max_length) - 1)


def capped_json(obj: Any, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Serialise ``obj`` to compact JSON of at most ``max_length`` characters; never raises.

    Args:
        obj: Any Python object; unknown types get a bounded representation (models are dumped, other objects
            are shown by a short ``repr``).
        max_length: Cap on the returned text; a longer serialisation is replaced by a truncation marker.

    Returns:
        Valid JSON text.
    """
    try:
        text = _dumps(obj)
    except Exception:
        text = json.dumps(_short_repr(obj))
    if max_length > 0 and len(text) > max_length:
        return truncation_marker(text, max_length)
    return text


def capped_text(text: str, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Return ``text`` unchanged when short enough, else a truncation marker (valid JSON) standing for it."""
    if max_length > 0 and len(text) > max_length:
        return truncation_marker(json.dumps(text, ensure_ascii=False), max_length)
    return text


def loads_or_raw(text: str) -> Any:
    """Parse JSON text; on failure return the text itself (e.g. tool arguments a model got wrong)."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text
