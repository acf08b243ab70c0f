"""Wording of authored-file errors: unknown keys with the nearest known one, and pydantic errors as ``entry: problem``.

The authoring models (:mod:`evaltrace.runner.config_models`) raise :func:`key_error` for problems they find
themselves; it carries the offending key (or a path below the model) in its context, so :func:`first_problem` can
name ``systems[1].config.timout_s`` rather than ``systems[1].config``.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

__all__ = [
    "KEY_ERROR",
    "UNKNOWN_KEY",
    "Problem",
    "first_problem",
    "format_loc",
    "key_error",
    "shown_value",
    "unknown_key_problem",
]

UNKNOWN_KEY = "unknown_key"
"""Error type of an unknown key (reported before any other error: a typo often causes a missing key too)."""
KEY_ERROR = "evaltrace_key"
"""Error type of any other problem found by an authoring model itself."""
_MAX_SHOWN = 60


def unknown_key_problem(key: str, known: Collection[str], what: str = "key") -> str:
    """Return ``unknown key; did you mean X?`` (nearest known key), else ``unknown key; expected one of ...``."""
    close = difflib.get_close_matches(key, sorted(known), n=1)
    if close:
        return f"unknown {what}; did you mean {close[0]}?"
    return f"unknown {what}; expected one of {', '.join(sorted(known))}"


def key_error(where: str, problem: str, *, unknown: bool = False) -> PydanticCustomError:
    """Return a validation error about ``where`` (a key, or a dotted path below the validated model).

    Args:
        where: Key or relative path (``"name"``, ``"config.timout_s"``); empty for the model itself.
        problem: What is wrong.
        unknown: It is an unknown key (reported first, see :data:`UNKNOWN_KEY`).
    """
    # The problem goes through the context, not the template: a literal "{" in it must not be formatted.
    return PydanticCustomError(UNKNOWN_KEY if unknown else KEY_ERROR, "{problem}", {"where": where, "problem": problem})


def format_loc(loc: Sequence[int | str]) -> str:
    """Render a pydantic location as the path written in messages: ``systems[1].config.timout_s``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _join(base: str, where: str) -> str:
    if not where:
        return base
    if not base:
        return where
    return f"{base}{where}" if where.startswith("[") else f"{base}.{where}"


def shown_value(value: Any) -> str:
    """The value as shown in a message: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _problem(error: Any) -> str:
    kind, message = error["type"], str(error["msg"])
    if kind in (UNKNOWN_KEY, KEY_ERROR):
        return message
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping, got {shown_value(error.get('input'))}"
    if kind in ("greater_than", "greater_than_equal"):
        bound = "greater than" if kind == "greater_than" else "at least"
        context = error.get("ctx") or {}
        limit = context.get("gt", context.get("ge"))
        shown = f"{limit:g}" if isinstance(limit, int | float) else str(limit)
        return f"expected a number {bound} {shown}, got {shown_value(error.get('input'))}"
    if kind == "value_error" and message.startswith("Value error, "):
        return message[len("Value error, ") :]
    if message.startswith("Input should be "):
        return f"expected {message[len('Input should be ') :]}, got {shown_value(error.get('input'))}"
    return message


class Problem(NamedTuple):
    """One error of an authored file, worded for the user."""

    entry: str
    """Where in the file (``systems[1].config.timout_s``)."""
    problem: str
    """What is wrong."""
    unknown_key: bool
    """The problem is an unknown key."""


def first_problem(exc: ValidationError, prefix: str = "") -> Problem:
    """Return the error to show: the first unknown key if any, else the first error.

    Args:
        exc: The validation error of an authoring model.
        prefix: Path of the validated value in the file (``cases[3]``); empty for the whole file.
    """
    errors = exc.errors(include_url=False)
    error = next((e for e in errors if e["type"] == UNKNOWN_KEY), errors[0])
    where = _join(prefix, format_loc(error["loc"]))
    context = error.get("ctx") or {}
    if error["type"] in (UNKNOWN_KEY, KEY_ERROR):
        where = _join(where, str(context.get("where", "")))
    return Problem(where, _problem(error), error["type"] == UNKNOWN_KEY)
