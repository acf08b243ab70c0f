"""Choosing part of a dataset for a run: ``--case``, ``--tag``, ``--where``, ``--sample``/``--seed`` and ``--limit``.

Order: the filters first (``--case`` any of the ids or globs, ``--tag`` any of the tags in ``metadata.tags``,
``--where`` all of the conditions; different flags combine with AND), then ``--sample N`` (a seeded random
sample, kept in dataset order), then ``--limit N`` (the first N). The chosen ids are recorded in a
:class:`~evaltrace.schema.runs.CaseSelection`, so a resume narrows the cases by id and never selects again.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import random
from collections.abc import Sequence
from typing import Any

import yaml

from evaltrace.exceptions import EvaltraceError
from evaltrace.runner.config import EvalConfig
from evaltrace.schema import EvalCase
from evaltrace.schema.runs import CaseSelection

__all__ = ["TAGS_KEY", "SelectionError", "apply_selection", "restrict_to_selection", "select_cases"]

TAGS_KEY = "tags"
"""``EvalCase.metadata`` key holding a case's tags: a list of strings (a single string is one tag)."""
_CASE_FIELDS = frozenset(EvalCase.model_fields) - {"schema_version"}
_GLOB_CHARS = frozenset("*?[")
_MISSING = object()


class SelectionError(EvaltraceError, ValueError):
    """The selection flags are malformed, name an unknown case, or match no case."""


def _tags(case: EvalCase) -> set[str]:
    tags = case.metadata.get(TAGS_KEY)
    if isinstance(tags, str):
        return {tags}
    if isinstance(tags, list):
        return {str(t) for t in tags}
    return set()


def _condition(text: str) -> tuple[list[str], str]:
    path, sep, value = text.partition("=")
    parts = path.strip().split(".")
    if not sep or not all(parts):
        raise SelectionError(f"--where expects dotted.path=value (e.g. metadata.topic=weather), got {text!r}")
    if parts[0] not in _CASE_FIELDS:
        raise SelectionError(
            f"--where {text!r}: {parts[0]!r} is not a case field (one of {', '.join(sorted(_CASE_FIELDS))});"
            f" for metadata write metadata.{path.strip()}"
        )
    return parts, value


def _lookup(data: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return _MISSING
    return data


def _equals(actual: Any, wanted: str) -> bool:
    """``wanted`` as typed on the command line: read as YAML (2, true, null) or compared as text."""
    if isinstance(actual, list):
        return any(_equals(item, wanted) for item in actual)
    try:
        parsed = yaml.safe_load(wanted) if wanted.strip() else wanted
    except yaml.YAMLError:
        parsed = wanted
    if isinstance(actual, bool) or isinstance(parsed, bool):
        return actual is parsed
    return actual == parsed or (not isinstance(actual, dict) and str(actual) == wanted)


def _matches(case: EvalCase, selection: CaseSelection, conditions: list[tuple[list[str], str]]) -> bool:
    if selection.cases and not any(fnmatch.fnmatchcase(case.id, p) for p in selection.cases):
        return False
    if selection.tags and not _tags(case) & set(selection.tags):
        return False
    data = case.model_dump(mode="json")
    return all(
        (value := _lookup(data, parts)) is not _MISSING and _equals(value, wanted) for parts, wanted in conditions
    )


def _check_counts(selection: CaseSelection) -> None:
    for flag, value in (("--sample", selection.sample), ("--limit", selection.limit)):
        if value is not None and value < 1:
            raise SelectionError(f"{flag} expects a positive number of cases, got {value}")


def _describe(selection: CaseSelection) -> str:
    flags = [
        *(f"--case {p}" for p in selection.cases),
        *(f"--tag {t}" for t in selection.tags),
        *(f"--where {w}" for w in selection.where),
    ]
    return ", ".join(flags) or "the selection"


def select_cases(cases: Sequence[EvalCase], selection: CaseSelection) -> tuple[list[EvalCase], CaseSelection]:
    """Apply ``selection``'s criteria to ``cases``.

    Args:
        cases: The dataset, in file order.
        selection: The criteria (``selected`` and ``cases_total`` are ignored and filled in).

    Returns:
        The chosen cases in dataset order, and the selection with ``selected`` and ``cases_total`` set.

    Raises:
        SelectionError: A flag is malformed, a ``--case`` id (not a glob) names no case, or nothing matches.
    """
    _check_counts(selection)
    conditions = [_condition(w) for w in selection.where]
    ids = {c.id for c in cases}
    for pattern in selection.cases:
        if not _GLOB_CHARS & set(pattern) and pattern not in ids:
            known = ", ".join(c.id for c in cases[:10]) + (", ..." if len(cases) > 10 else "")
            raise SelectionError(f"--case {pattern!r}: no such case (cases: {known})")
    chosen = [c for c in cases if _matches(c, selection, conditions)]
    if not chosen:
        raise SelectionError(f"{_describe(selection)} matches none of the {len(cases)} cases")
    if selection.sample is not None and selection.sample < len(chosen):
        seed = selection.seed if selection.seed is not None else 0
        picked = set(random.Random(seed).sample(range(len(chosen)), selection.sample))
        chosen = [c for i, c in enumerate(chosen) if i in picked]
        selection = selection.model_copy(update={"seed": seed})
    if selection.limit is not None:
        chosen = chosen[: selection.limit]
    return chosen, selection.model_copy(update={"cases_total": len(cases), "selected": [c.id for c in chosen]})


def apply_selection(config: EvalConfig, selection: CaseSelection | None) -> tuple[EvalConfig, CaseSelection | None]:
    """Narrow ``config.cases`` to the selection (None, or no criterion at all: every case, no record)."""
    if selection is None or selection == CaseSelection(seed=selection.seed):
        return config, None
    cases, recorded = select_cases(config.cases, selection)
    return dataclasses.replace(config, cases=cases), recorded


def restrict_to_selection(config: EvalConfig, selection: CaseSelection | None) -> EvalConfig:
    """Narrow ``config.cases`` to a recorded selection's ids (a resume: the same cases, never a new draw)."""
    if selection is None:
        return config
    wanted = set(selection.selected)
    return dataclasses.replace(config, cases=[c for c in config.cases if c.id in wanted])
