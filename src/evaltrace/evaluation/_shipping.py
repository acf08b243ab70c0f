"""Evaluators by reference, for the evaluation process: a reference out, the object back in.

The child process imports the evaluator instead of receiving a pickled copy: an evaluator usually holds a judge
client (sockets, locks) that cannot be pickled, and importing it runs the same module-level setup as in the
application. Two kinds of reference:

- ``"package.module:name"``: a module-level name of an importable module (not ``__main__``, which the child
  cannot import as the application did). Global evaluators must be shipped this way (checked at configure).
- ``(module, owner, index)``: the ``index``-th evaluator a decorator attached to the function ``owner``
  (``module.qualname``) defined in ``module``. The child imports ``module``, which runs the decorator again and
  registers the same list under the same owner: so inline instances such as
  ``@evaltrace.agent(evaluators=[ToolCalled("get_weather")])`` ship too. Used when the evaluator is not a
  module-level name; not possible for a function in ``__main__``, one defined inside another function, or an
  owner several registrations share (a decorator applied in a loop).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from evaltrace._internal.evaluator_registry import registration_of, registrations
from evaltrace.evaluation.evaluator import as_spec
from evaltrace.exceptions import ConfigError

_SETTING = "evaluation"
_MAIN = ("__main__", "__mp_main__")
_LOCALS = "<locals>"  # in a nested function's qualname: its decorator runs when the outer function does

Reference = str | tuple[str, str, int]
"""``"module:name"`` or ``(module, owner, index)``; see the module docstring."""


class NotShippable(Exception):
    """The child cannot find the evaluator a reference names (raised in the child; the message says why)."""


def _candidate_modules(evaluator: Any) -> list[str]:
    names = []
    func = getattr(evaluator, "func", None)  # FunctionEvaluator: where the decorated function lives
    for owner in (func, evaluator, type(evaluator)):
        module = getattr(owner, "__module__", None)
        if isinstance(module, str) and module not in names:
            names.append(module)
    return names


def evaluator_reference(evaluator: Any) -> str:
    """Return ``"module:name"`` under which the child process can import ``evaluator``.

    Raises:
        ConfigError: ``evaluator`` is not a module-level name of an importable module.
    """
    name = getattr(evaluator, "name", None) or type(evaluator).__name__
    modules = _candidate_modules(evaluator)
    for module_name in modules:
        if module_name in _MAIN:
            continue
        module = sys.modules.get(module_name)
        if module is None:
            continue
        for attr, value in vars(module).items():
            if value is evaluator:
                return f"{module_name}:{attr}"
    where = ", ".join(modules) or "unknown module"
    hint = (
        "the application's main script cannot be imported by the evaluation process; move it to a module"
        if "__main__" in modules
        else "define it as a module-level name (e.g. with @evaluator at the top level of a module)"
    )
    raise ConfigError(
        _SETTING,
        f'evaluator {name!r} (in {where}) cannot be shipped to the evaluation process ("process"): {hint}',
    )


def _attached_reference(evaluator: Any) -> Reference | None:
    """The registration reference of a decorator-attached ``evaluator``; None when no decorator attached it.

    Raises:
        ConfigError: Decorators attached it, but to functions the child cannot find again by owner.
    """
    owners: dict[str, int] = {}
    found: list[tuple[str, str | None, int]] = []
    for owner, module, items in registrations():
        owners[owner] = owners.get(owner, 0) + 1
        for index, item in enumerate(items):
            if item is evaluator or as_spec(item).evaluator is evaluator:
                found.append((owner, module, index))
                break
    if not found:
        return None
    for owner, module, index in found:
        if module is not None and module not in _MAIN and owners[owner] == 1 and _LOCALS not in owner:
            return (module, owner, index)
    name = getattr(evaluator, "name", None) or type(evaluator).__name__
    owner, module, _ = found[0]
    if module in _MAIN:
        why = "the application's main script cannot be imported by the evaluation process; move it to a module"
    elif _LOCALS in owner:
        why = "the function is defined inside another function, so importing its module does not decorate it"
    else:
        why = "several functions registered evaluators under that name"
    why += "; or make the evaluator a module-level name"
    raise ConfigError(
        _SETTING, f"evaluator {name!r} attached to {owner} cannot be shipped to the evaluation process: {why}"
    )


def shipping_reference(evaluator: Any) -> Reference:
    """The reference the child resolves to ``evaluator``: its module-level name, else its decorator registration.

    A module-level name comes first: importing it has the fewest side effects and it works whatever function the
    evaluator is attached to (a nested one too).

    Raises:
        ConfigError: Neither works (the message says why).
    """
    try:
        return evaluator_reference(evaluator)
    except ConfigError as name_error:
        attached = _attached_reference(evaluator)
        if attached is None:
            raise name_error from None
        return attached


def resolve_reference(reference: Reference) -> Any:
    """Import the evaluator a reference names (in the child process).

    Raises:
        NotShippable: A decorator registration that the import did not recreate exactly once.
    """
    if isinstance(reference, str):
        module_name, _, attr = reference.partition(":")
        return getattr(importlib.import_module(module_name), attr)
    module_name, owner, index = reference
    importlib.import_module(module_name)  # runs the decorators: they register their evaluators again
    items = registration_of(owner)
    if items is None or index >= len(items):
        raise NotShippable(
            f"importing {module_name} did not register evaluators for {owner} exactly once "
            "(a function defined inside another function, or decorated conditionally?)"
        )
    return as_spec(items[index]).evaluator
