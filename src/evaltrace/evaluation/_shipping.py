"""Evaluators by reference, for the evaluation process: ``"package.module:name"`` out, the object back in.

The child process imports the evaluator instead of receiving a pickled copy: an evaluator usually holds a judge
client (sockets, locks) that cannot be pickled, and importing it runs the same module-level setup as in the
application. So an evaluator can be shipped when it is a module-level name of an importable module (not
``__main__``, which the child cannot import as the application did). Decorator-attached evaluators are found
through the span's ``evaltrace.evaluators.ref`` in the parent, then shipped the same way.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from evaltrace.exceptions import ConfigError

_SETTING = "evaluation"


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
        if module_name in ("__main__", "__mp_main__"):
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


def resolve_reference(reference: str) -> Any:
    """Import the evaluator named by :func:`evaluator_reference` (in the child process)."""
    module_name, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module_name), attr)
