"""Evaluators attached by decorators, reachable from the spans those decorators create.

A decorator registers its evaluator list once, at decoration time, and stamps the returned key on every span it
creates (attribute ``evaltrace.evaluators.ref``). The evaluation processor resolves the key back to the objects.
Memory is bounded by the number of decorated functions, never by the number of spans.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

_lock = threading.Lock()
_counter = itertools.count(1)
_registry: dict[str, tuple[Any, ...]] = {}
registered: dict[str, tuple[Any, ...]] = _registry
"""Read-only view for hot paths: empty while no decorator has attached an evaluator (never reassigned)."""


def register_evaluators(owner: str, evaluators: Sequence[Any]) -> str:
    """Store ``evaluators`` for the decorated function ``owner``; return the key to stamp on its spans."""
    with _lock:
        key = f"{owner}#{next(_counter)}"
        _registry[key] = tuple(evaluators)
    return key


def resolve_evaluators(key: str) -> tuple[Any, ...]:
    """Return the evaluators registered under ``key`` (empty when unknown, e.g. a span from another process)."""
    return _registry.get(key, ())
