"""Check authored values against the type hints of the callable they are passed to, before calling it.

A wrong value in a config file (``max_ms: fast``) must stop the run when the file is loaded, naming where and what
was expected, not make every later evaluation fail. The expectation comes from the callable's own annotations, so
every evaluator (built-in or custom) is checked without a hand-kept list of its options.

A value is accepted when pydantic's strict validation of its annotation accepts it as a Python value, or as the
JSON it would be written as (so a YAML list fits a ``tuple[float, float]``, a string a ``Path``, a mapping a
pydantic model). Annotations that cannot be resolved or turned into a validator are not checked: the callable
still judges those values itself. Lazy validators (``Iterable[str]``) are consumed, so their items are checked too.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError

__all__ = ["Mismatch", "coerce_text", "describe_type", "first_mismatch", "format_path", "parameter_hints"]

_ARBITRARY = ConfigDict(arbitrary_types_allowed=True)
_SEQUENCES = frozenset(
    {
        list,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Iterable,
        collections.abc.Collection,
        collections.abc.Set,
        collections.abc.MutableSet,
    }
)
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})
# "collections.abc.Sequence[pathlib.Path]" reads "Sequence[Path]": dotted module prefixes are dropped.
_MODULE_PREFIX = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\.(?=[A-Za-z_])")


@dataclass(frozen=True)
class Mismatch:
    """A value its annotation does not accept.

    Attributes:
        path: Where, below the checked argument (``("a", 0)`` for ``{a: [here]}``); empty for the argument itself.
        expected: The annotation the value had to fit, rendered for people (``float | None``).
        value: The value given there.
    """

    path: tuple[str | int, ...]
    expected: str
    value: Any


def format_path(base: str, path: Sequence[str | int]) -> str:
    """Render ``base`` and a path below it as written in messages: ``evaluators[2].required_keys.a[0]``."""
    text = base
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def describe_type(hint: Any) -> str:
    """Render an annotation for a message: ``float | None``, ``Sequence[str]``, ``Rubric``."""
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    text = repr(hint).replace("typing.Optional[", "Optional[")
    return _MODULE_PREFIX.sub("", text).replace("NoneType", "None")


@functools.lru_cache(maxsize=512)
def _adapter(hint: Any) -> TypeAdapter[Any] | None:
    try:
        return TypeAdapter(hint, config=_ARBITRARY)
    except PydanticUserError:  # models and dataclasses carry their own config
        try:
            return TypeAdapter(hint)
        except Exception:  # an annotation pydantic cannot validate: not checked here
            return None
    except Exception:  # an annotation pydantic cannot validate: not checked here
        return None


def _consumed(validated: Any) -> None:
    # Iterable[...] validates lazily: walk it so a bad item is found now.
    if isinstance(validated, Iterator):
        for _ in validated:
            pass


def _accepts(hint: Any, value: Any, as_json: bool = True) -> bool:
    """Whether ``hint`` accepts ``value`` (True when the hint cannot be checked); ``as_json``: or its JSON form."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    adapter = _adapter(hint) if _hashable(hint) else None
    if adapter is None:
        return True
    try:
        _consumed(adapter.validate_python(value, strict=True))
        return True
    except ValidationError:
        pass
    except Exception:  # e.g. isinstance() on a non-runtime protocol: the callable judges the value itself
        return True
    if not as_json:
        return False
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    try:
        _consumed(adapter.validate_json(text, strict=True))
        return True
    except ValidationError:
        return False
    except Exception:
        return True


def _only_member(hint: Any) -> Any:
    """The annotation without ``None`` when that leaves one type (``X | None`` -> ``X``), else the annotation."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not type(None)]
        if len(members) == 1:
            return members[0]
    return hint


def _items(hint: Any, value: Any) -> list[tuple[str | int, Any, Any]]:
    """The (key, item, item annotation) of a list or mapping value under a container annotation (else none)."""
    hint = _only_member(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _SEQUENCES and isinstance(value, list) and args:
        return [(i, item, args[0]) for i, item in enumerate(value)]
    if origin is tuple and isinstance(value, list) and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return [(i, item, args[0]) for i, item in enumerate(value)]
        if len(args) == len(value):
            return [(i, item, arg) for i, (item, arg) in enumerate(zip(value, args, strict=True))]
    if origin in _MAPPINGS and isinstance(value, dict) and len(args) == 2:
        return [(str(k), v, args[1]) for k, v in value.items()]
    return []


def first_mismatch(hint: Any, value: Any, *, as_json: bool = True) -> Mismatch | None:
    """Return where ``value`` does not fit ``hint`` (the innermost list item or mapping value at fault), or None.

    Args:
        hint: A resolved annotation.
        value: The value as authored (from YAML: None, bool, int, float, str, list, dict).
        as_json: Also accept what the value's JSON form validates to (a list for a tuple, a mapping for a model):
            right for values read from a file, wrong for Python arguments passed on as they are.
    """
    if _accepts(hint, value, as_json):
        return None
    for key, item, item_hint in _items(hint, value):
        inner = first_mismatch(item_hint, item, as_json=as_json)
        if inner is not None:
            return Mismatch((key, *inner.path), inner.expected, inner.value)
    return Mismatch((), describe_type(hint), value)


def coerce_text(hint: Any, text: str) -> tuple[bool, Any]:
    """Read ``text`` as ``hint`` the lenient way (``"500"`` as a float): ``(True, value)``, else ``(False, text)``.

    For a value that came from an environment variable, which can only be text.
    """
    adapter = _adapter(hint) if _hashable(hint) else None
    if adapter is None:
        return True, text
    try:
        value = adapter.validate_python(text)
        _consumed(value)
    except Exception:
        return False, text
    return True, value


def _hashable(hint: Any) -> bool:
    try:
        hash(hint)
    except TypeError:
        return False
    return True


def parameter_hints(factory: Callable[..., Any]) -> dict[str, Any]:
    """The resolved annotations of ``factory``'s parameters (a class: its ``__init__``); unresolvable ones left out."""
    target: Any = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # one unresolvable annotation (e.g. imported under TYPE_CHECKING): resolve them one by one
        hints = {}
        raw: Mapping[str, Any] = getattr(target, "__annotations__", None) or {}
        namespace = getattr(inspect.unwrap(target), "__globals__", {})
        for name, annotation in raw.items():
            holder = type("_Holder", (), {"__annotations__": {name: annotation}})
            try:
                hints[name] = typing.get_type_hints(holder, globalns=namespace)[name]
            except Exception:  # left unchecked
                continue
    hints.pop("return", None)
    return hints
