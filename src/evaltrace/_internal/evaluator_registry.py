"""Evaluators attached by decorators, reachable from the spans those decorators create.

A decorator registers its evaluator list once, at decoration time, and stamps the returned key on every span it
creates (attribute ``evaltrace.evaluators.ref``). The evaluation processor resolves the key back to the objects.
Memory is bounded by the number of decorated functions, never by the number of spans.

Keys are ``f"{owner}#{n}"`` with ``owner`` the decorated function's ``module.qualname``. The evaluation process
(``configure(evaluation="process")``) finds an attached evaluator again by owner after importing the decorated
function's module (:func:`registration_of`), which re-runs the decorator there.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

_lock = threading.Lock()
_counter = itertools.count(1)
_registry: dict[str, tuple[Any, ...]] = {}
_modules: dict[str, str | None] = {}  # key -> module of the decorated function (None: unknown)
registered: dict[str, tuple[Any, ...]] = _registry
"""Read-only view for hot paths: empty while no decorator has attached an evaluator (never reassigned)."""


def register_evaluators(owner: str, evaluators: Sequence[Any], module: str | None = None) -> str:
    """Store ``evaluators`` for the decorated function ``owner`` (defined in ``module``); return the span key."""
    with _lock:
        key = f"{owner}#{next(_counter)}"
        _registry[key] = tuple(evaluators)
        _modules[key] = module
    return key


def owner_of(key: str) -> str:
    """The decorated function's ``module.qualname`` in a key of :func:`register_evaluators`."""
    return key.rpartition("#")[0]


def registrations() -> list[tuple[str, str | None, tuple[Any, ...]]]:
    """A snapshot of every registration as ``(owner, module, evaluators)``, in registration order."""
    with _lock:
        return [(owner_of(key), _modules.get(key), items) for key, items in _registry.items()]


def registration_of(owner: str) -> tuple[Any, ...] | None:
    """The one evaluator list registered for ``owner``; None when there is none or several (ambiguous)."""
    with _lock:
        found = [items for key, items in _registry.items() if owner_of(key) == owner]
    return found[0] if len(found) == 1 else None


def resolve_evaluators(key: str) -> tuple[Any, ...]:
    """Return the evaluators registered under ``key`` (empty when unknown, e.g. a span from another process)."""
    return _registry.get(key, ())
