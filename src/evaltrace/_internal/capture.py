"""Turn a decorated call's arguments and results into bounded JSON, fast.

Binding is precomputed per function (parameter names, which leading parameter is ``self``/``cls``) so the hot
path is a zip and a dict update instead of ``inspect.Signature.bind``; functions with ``*args`` or
keyword-only parameters take the general path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaltrace._internal import settings
from evaltrace._internal.jsonutil import capped_json

_SKIPPED_FIRST = frozenset({"self", "cls"})
MAX_GENERATOR_ITEMS = 100
"""At most this many yielded items are kept as a generator span's output (the count is always recorded)."""


@dataclass(frozen=True)
class ArgBinder:
    """Maps a call's positional and keyword arguments to ``{parameter name: value}``."""

    names: tuple[str, ...]
    skip_first: bool
    signature: inspect.Signature | None  # set only when the fast path cannot be used

    @classmethod
    def for_function(cls, func: Callable[..., Any]) -> ArgBinder:
        """Precompute the binding of ``func``."""
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):
            return cls(names=(), skip_first=False, signature=None)
        params = list(sig.parameters.values())
        skip_first = bool(params) and params[0].name in _SKIPPED_FIRST
        simple = all(
            p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params
        )
        names = tuple(p.name for p in params)
        return cls(names=names, skip_first=skip_first, signature=None if simple else sig)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Return the arguments by parameter name, without ``self``/``cls``."""
        if self.signature is None:
            bound = dict(zip(self.names, args, strict=False))
            if len(args) > len(self.names):  # a signature we could not read: keep extras positionally
                bound["args"] = list(args[len(self.names) :])
            if kwargs:
                bound.update(kwargs)
        else:
            try:
                ba = self.signature.bind_partial(*args, **kwargs)
                bound = dict(ba.arguments)
            except TypeError:  # the call itself will fail; record what we can
                bound = {"args": list(args), **kwargs}
        if self.skip_first and self.names:
            bound.pop(self.names[0], None)
        return bound


def capture_arguments(binder: ArgBinder, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """Return the call's arguments as capped JSON."""
    return capped_json(binder.bind(args, kwargs), settings.current.max_attribute_length)


def capture_value(value: Any) -> str:
    """Return a result as capped JSON."""
    return capped_json(value, settings.current.max_attribute_length)


class ItemCollector:
    """Keeps the first ``MAX_GENERATOR_ITEMS`` items a generator yields, and counts all of them (O(1) each)."""

    __slots__ = ("count", "items")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.count = 0

    def add(self, item: Any) -> None:
        """Record one yielded item."""
        self.count += 1
        if self.count <= MAX_GENERATOR_ITEMS:
            self.items.append(item)

    def as_output(self) -> Any:
        """The generator's output: the items when all were kept, else the kept items plus the total count."""
        if self.count <= MAX_GENERATOR_ITEMS:
            return self.items
        return {"items": self.items, "total_items": self.count, "truncated": True}
