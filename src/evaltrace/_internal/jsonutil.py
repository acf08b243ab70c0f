"""Size-capped JSON for attribute values: any object in, valid JSON text out, never an exception.

The work is bounded by the cap, not by the value: capture runs on the application's thread, where a 100 MB
argument or a dict with a million keys must not cost a second per call. A pre-scan of at most ``_work_limit``
items decides whether a value is small plain data (dicts with string keys, lists, tuples, strings, numbers);
such a value goes to the C encoder in one ``json.dumps`` call. Anything else (a big value, a model, a
dataclass, a set, a custom object) goes to :class:`_BoundedEncoder`, a walker that reproduces the C encoder's
output piece by piece and stops as soon as it has emitted more than the work limit, slicing strings before
escaping them. Objects that defeat the C encoder's rules (circular references, NaN, odd keys, deep nesting)
take the recursive fallback (:func:`to_jsonable` semantics), also bounded.

A value longer than the cap is replaced by a marker object that is itself valid JSON and records the original
length, so backends never receive JSON cut in the middle. When serialisation stopped early the length is a
lower bound and the marker says so (``"original_length_is_minimum": true``).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import itertools
import json
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import PurePath
from typing import Any

DEFAULT_MAX_LENGTH = 32_768
"""Default cap, in characters, for a captured JSON attribute value."""

TRUNCATED_KEY = "evaltrace.truncated"
MINIMUM_KEY = "original_length_is_minimum"
"""Marker key set when serialisation stopped early, so ``original_length`` is a lower bound."""
_MAX_DEPTH = 12
_MAX_ITEMS = 1_000
_MAX_REPR = 200
_WORK_SLACK = 4_096
"""Characters emitted past the cap before serialisation stops (an exact length for values a little over)."""


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
        items = _first(obj)
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(obj, tuple):  # only the fallback gets here (the encoders take tuples as arrays), and it keeps 1000
        return _first(obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        return _bytes_summary(obj)
    if isinstance(obj, dt.datetime | dt.date | dt.time):
        return obj.isoformat()
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, uuid.UUID | Decimal | PurePath | complex):
        return str(obj)
    if isinstance(obj, Mapping):
        return {str(k): v for k, v in _first(obj.items())}
    return _short_repr(obj)


def _first(items: Iterable[Any]) -> list[Any]:
    """The first ``_MAX_ITEMS`` items, without materialising the rest (``list(x)[:n]`` costs O(len(x)))."""
    return list(itertools.islice(items, _MAX_ITEMS))


def _bytes_summary(obj: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Length and a base64 prefix of binary data, without copying all of it."""
    if isinstance(obj, memoryview):
        length = obj.nbytes
        try:
            prefix = obj.cast("B")[:48].tobytes()
        except (TypeError, ValueError):  # not C-contiguous: rare enough to pay for the copy
            prefix = obj.tobytes()[:48]
    else:
        length, prefix = len(obj), bytes(obj[:48])
    return {"type": "bytes", "length": length, "base64_prefix": base64.b64encode(prefix).decode()}


def _short_repr(obj: Any) -> str:
    try:
        text = _repr_prefix(obj, _MAX_REPR, set())
    except Exception:
        text = f"<{type(obj).__qualname__}>"
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _repr_prefix(obj: Any, limit: int, active: set[int]) -> str:
    """``repr(obj)``, or a text whose first ``limit`` characters are those of ``repr(obj)``, in O(limit).

    Built-in containers and strings are rendered piecewise so a huge one is not rendered whole; other objects
    get their own ``repr`` (user code we cannot bound, only cut).
    """
    kind = type(obj)
    if kind is str or kind is bytes or kind is bytearray:
        return repr(obj) if len(obj) <= limit else repr(obj[: limit + 1])
    if kind not in _REPR_SHAPES or len(obj) == 0 or id(obj) in active:
        if kind in _REPR_SHAPES and len(obj) > 0:  # a container inside itself: repr shows it as "[...]"
            return _REPR_SHAPES[kind][0] + "..." + _REPR_SHAPES[kind][1]
        return repr(obj)
    opening, closing = _REPR_SHAPES[kind]
    active.add(id(obj))
    parts, size = [opening], len(opening)
    items: Iterable[Any] = obj.items() if kind is dict else obj
    for index, item in enumerate(items):
        if size > limit:
            break
        if index:
            parts.append(", ")
        if kind is dict:
            piece = _repr_prefix(item[0], limit - size, active) + ": " + _repr_prefix(item[1], limit - size, active)
        else:
            piece = _repr_prefix(item, limit - size, active)
        parts.append(piece)
        size += len(piece) + 2
    active.discard(id(obj))
    if kind is tuple and len(obj) == 1:
        parts.append(",")
    parts.append(closing)
    return "".join(parts)


_REPR_SHAPES: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    dict: ("{", "}"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
}


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
        return {str(k): to_jsonable(v, _depth + 1, seen) for k, v in _first(obj.items())}
    if isinstance(obj, list):
        return [to_jsonable(v, _depth + 1, seen) for v in _first(obj)]
    converted = _default(obj)
    if isinstance(converted, str):
        return converted
    return to_jsonable(converted, _depth + 1, seen)


# One encoder for all calls: json.dumps with non-default options builds a new encoder each time (~2 us).
_ENCODER = json.JSONEncoder(default=_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# The C encoder behind _ENCODER, built once: ``JSONEncoder.encode`` builds a new one on every call (two Python
# frames and a markers dict, a tenth of a small capture). Without circular-reference markers: it only serialises
# values _plain_budget accepted, which are acyclic (a cycle exhausts the budget), and it keeps no state between
# calls. None without the C accelerator.
_PLAIN_ENCODER: Callable[[Any, int], Any] | None = (
    c_make_encoder(None, _default, encode_basestring, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else None
)


def _plain_dumps(obj: Any) -> str:
    """:func:`_dumps` of a value :func:`_plain_budget` accepted: the same text, at lower cost."""
    if _PLAIN_ENCODER is None:
        return _dumps(obj)
    try:
        return "".join(_PLAIN_ENCODER(obj, 0))
    except (ValueError, TypeError, RecursionError):  # NaN or deep nesting: the reference path decides
        return _dumps(obj)


def _dumps(obj: Any) -> str:
    """The unbounded reference serialisation: the C encoder, then the ``to_jsonable`` fallback."""
    try:
        return _ENCODER.encode(obj)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(to_jsonable(obj), ensure_ascii=False, separators=(",", ":"))


def _plain_budget(obj: Any, budget: int) -> int:
    """Budget left after ``obj`` if it is plain JSON data small enough for the C encoder, else a negative number.

    Each item costs at least one unit, a string its length and an int a quarter of its bits (>= 0.75 x its
    digits), so the scan itself is O(budget) and a value that passes serialises in O(budget) (escaping at most
    multiplies a string by 6). Scalars in containers are handled inline: this runs on every captured call, and
    a call per item would double its cost.
    """
    kind = type(obj)
    if kind is str:
        return budget - len(obj) - 2
    if kind is int:
        digits: int = obj.bit_length() >> 2
        return budget - 1 - digits
    items: Iterable[Any]
    if kind is dict:
        budget -= 2 * len(obj) + 2
        for key in obj:
            if budget < 0 or type(key) is not str:
                return -1
            budget -= len(key) + 2
        items = obj.values()
    elif kind is list or kind is tuple:
        budget -= len(obj) + 2
        items = obj
    else:
        return budget - 1 if kind in _PLAIN_SCALARS else -1
    for item in items:
        if budget < 0:
            return budget
        item_kind = type(item)
        if item_kind is str:
            budget -= len(item) + 2
        elif item_kind is int:
            budget -= item.bit_length() >> 2
        elif item_kind not in _PLAIN_SCALARS:
            budget = _plain_budget(item, budget)
    return budget


_PLAIN_SCALARS = frozenset({int, float, bool, type(None)})


class _Stop(Exception):
    """The work limit is reached: stop walking."""


class _Fallback(Exception):
    """The C encoder would have failed here (NaN, a cycle, an odd key): use the ``to_jsonable`` rules."""


class _BoundedEncoder:
    """Emit the JSON of a value piece by piece, stopping once more than ``limit`` characters are out.

    :meth:`fast` follows the C encoder with the :func:`_default` hook; :meth:`fallback` follows
    ``json.dumps(to_jsonable(obj))``. Both produce the same text as those for a value that fits, so the cap
    changes only what happens to big values.
    """

    __slots__ = ("limit", "parts", "pending", "size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.pending = 0  # characters known to follow the cut (rest of a sliced string), for the lower bound

    def reset(self) -> None:
        """Forget what was emitted (before the fallback starts over)."""
        self.parts.clear()
        self.size = self.pending = 0

    def text(self) -> str:
        """What was emitted so far."""
        return "".join(self.parts)

    def write(self, piece: str) -> None:
        """Emit ``piece``; raise :class:`_Stop` once the limit is passed."""
        self.parts.append(piece)
        self.size += len(piece)
        if self.size > self.limit:
            raise _Stop

    def string(self, value: str) -> None:
        """Emit ``value`` as a JSON string, escaping only the part that can still be emitted."""
        room = self.limit - self.size
        if len(value) <= room:
            self.write(encode_basestring(value))
            return
        # Every character escapes to at least one: the first ``room`` cannot all fit, so the rest is never read.
        self.pending = len(value) - room + 1
        self.write(encode_basestring(value[:room])[:-1])
        raise _Stop  # pragma: no cover - write() has already raised: ``room`` characters plus a quote overflow

    def scalar(self, obj: Any) -> bool:
        """Emit ``obj`` if it is a JSON scalar (the C encoder's order and rules); return whether it was."""
        if obj is None:
            self.write("null")
        elif obj is True:
            self.write("true")
        elif obj is False:
            self.write("false")
        elif isinstance(obj, str):
            self.string(obj)
        elif isinstance(obj, int):
            self.write(int.__repr__(obj))
        elif isinstance(obj, float):
            if not math.isfinite(obj):
                raise _Fallback
            self.write(float.__repr__(obj))
        else:
            return False
        return True

    def fast(self, obj: Any, active: set[int]) -> None:
        """Emit ``obj`` as the C encoder with the :func:`_default` hook would."""
        if self.scalar(obj):
            return
        marker = id(obj)
        if marker in active:
            raise _Fallback  # the C encoder raises "Circular reference detected"
        active.add(marker)
        if isinstance(obj, list | tuple):
            self.write("[")
            for index, item in enumerate(obj):
                if index:
                    self.write(",")
                self.fast(item, active)
            self.write("]")
        elif isinstance(obj, dict):
            self.write("{")
            for index, (key, value) in enumerate(obj.items()):
                if index:
                    self.write(",")
                self.string(_fast_key(key))
                self.write(":")
                self.fast(value, active)
            self.write("}")
        else:
            self.fast(_default(obj), active)
        active.discard(marker)

    def fallback(self, obj: Any, depth: int, seen: frozenset[int]) -> None:
        """Emit ``json.dumps(to_jsonable(obj))`` without building the copy."""
        if isinstance(obj, float) and not math.isfinite(obj):
            self.string(str(obj))
            return
        if (obj is None or isinstance(obj, bool | int | str | float)) and self.scalar(obj):
            return
        if depth >= _MAX_DEPTH:
            self.string(_short_repr(obj))
            return
        if id(obj) in seen:
            self.string("<circular reference>")
            return
        seen = seen | {id(obj)}
        if isinstance(obj, dict):
            # Keys go through str() and may collide, as in to_jsonable; only the first 1000 items are read.
            self.write("{")
            for index, (key, value) in enumerate({str(k): v for k, v in _first(obj.items())}.items()):
                if index:
                    self.write(",")
                self.string(key)
                self.write(":")
                self.fallback(value, depth + 1, seen)
            self.write("}")
        elif isinstance(obj, list):
            self.write("[")
            for index, item in enumerate(_first(obj)):
                if index:
                    self.write(",")
                self.fallback(item, depth + 1, seen)
            self.write("]")
        else:
            converted = _default(obj)
            if isinstance(converted, str):
                self.string(converted)
            else:
                self.fallback(converted, depth + 1, seen)


def _fast_key(key: Any) -> str:
    """A dict key as the C encoder writes it (non-string keys converted, anything else is its TypeError)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        if not math.isfinite(key):
            raise _Fallback
        return float.__repr__(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise _Fallback


def _bounded_dumps(obj: Any, limit: int) -> tuple[str, int | None]:
    """Serialise ``obj`` emitting at most about ``limit`` characters.

    Returns:
        The text and None when it is complete, or a prefix longer than ``limit`` and a lower bound of the full
        length when the walk stopped.
    """
    encoder = _BoundedEncoder(limit)
    try:
        try:
            encoder.fast(obj, set())
            return encoder.text(), None
        except (_Fallback, ValueError, TypeError, RecursionError):
            encoder.reset()
        encoder.fallback(obj, 0, frozenset())
        return encoder.text(), None
    except _Stop:
        return encoder.text(), encoder.size + encoder.pending


def truncation_marker(text: str, max_length: int, original_length: int | None = None) -> str:
    """Return a valid-JSON marker standing for ``text``: original length plus the longest preview that fits.

    Args:
        text: The serialisation, or (when ``original_length`` is given) a prefix of it at least ``max_length``
            long.
        max_length: Cap on the marker's length.
        original_length: A lower bound of the full length when ``text`` is only a prefix; the marker then says
            the length is a minimum.
    """
    preview_len = max(0, max_length - 80)
    while True:
        fields: dict[str, Any] = {TRUNCATED_KEY: True, "original_length": len(text)}
        if original_length is not None:
            fields.update({"original_length": original_length, MINIMUM_KEY: True})
        fields["preview"] = text[:preview_len]
        marker = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
        if len(marker) <= max_length or preview_len == 0:
            return marker
        # Escaping can grow the preview; shrink by the overshoot and retry.
        preview_len = max(0, preview_len - (len(marker) - max_length) - 1)


def _work_limit(max_length: int) -> int:
    """Characters serialised at most for a value capped at ``max_length``.

    O(cap), and enough for an exact ``original_length`` of values up to 4 KiB over the cap.
    """
    return max_length + _WORK_SLACK


def capped_json(obj: Any, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Serialise ``obj`` to compact JSON of at most ``max_length`` characters; never raises.

    The work done is bounded by ``max_length``, not by the size of ``obj``: strings are sliced before they are
    escaped, containers are walked only until the cap is passed, and ``repr`` output is cut.

    Args:
        obj: Any Python object; unknown types get a bounded representation (models are dumped, other objects
            are shown by a short ``repr``).
        max_length: Cap on the returned text (0 = no cap); a longer serialisation is replaced by a truncation
            marker.

    Returns:
        Valid JSON text.
    """
    try:
        if max_length <= 0:
            return _dumps(obj)
        limit = _work_limit(max_length)
        try:
            plain = _plain_budget(obj, limit) >= 0
        except RecursionError:
            plain = False
        if plain:
            text, minimum = _plain_dumps(obj), None
        else:
            text, minimum = _bounded_dumps(obj, limit)
    except Exception:
        return json.dumps(_short_repr(obj))
    if minimum is not None or len(text) > max_length:
        return truncation_marker(text, max_length, minimum)
    return text


def capped_text(text: str, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Return ``text`` unchanged when short enough, else a truncation marker (valid JSON) standing for it.

    Bounded like :func:`capped_json`: only the first characters of a long text are escaped.
    """
    if max_length > 0 and len(text) > max_length:
        return capped_json(text, max_length)
    return text


def loads_or_raw(text: str) -> Any:
    """Parse JSON text; on failure return the text itself (e.g. tool arguments a model got wrong)."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text
