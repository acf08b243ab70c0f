"""Adapter from spans to the Trace evaluators see.

``evaltrace.mapping.trace_from_spans``. When it fails (a bug of ours on unusual spans) :class:`MappingFailed` is
raised: the caller records each evaluator as not evaluated (``mapping_failed``). Judging a stand-in Trace
instead (the root alone, without tool calls or messages) would turn our failure into false verdicts.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from types import ModuleType

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.schema import Trace

logger = logging.getLogger("evaltrace.evaluation")
LIVE_RUN_ID = "live"
_MAPPING: list[ModuleType] = []


def _mapping() -> ModuleType:
    """``evaltrace.mapping``, imported on first use (not with this module), then kept."""
    # A ``from`` import of a package runs Python code each time it executes: once per evaluated span here.
    # The module, not its function, is kept: its ``trace_from_spans`` is looked up on each call.
    if not _MAPPING:
        _MAPPING.append(importlib.import_module("evaltrace.mapping"))
    return _MAPPING[0]


class MappingFailed(Exception):
    """Our mapping of spans to a Trace failed; the evaluators of that span are not evaluated."""


def build_trace(spans: Sequence[ReadableSpan], root: ReadableSpan) -> Trace:
    """Return the Trace of ``root``'s subtree (``spans`` includes ``root``), its fields mapped on first read.

    Raises:
        MappingFailed: The mapping raised (logged with its traceback).
    """
    try:
        mapping = _MAPPING[0] if _MAPPING else _mapping()
        # Lazy: each field is mapped when an evaluator first reads it (a cheap check reads one or two).
        trace: Trace = mapping.trace_from_spans(list(spans), root=root, lazy=True)
        return trace
    except Exception as exc:
        logger.warning(
            "evaltrace: mapping spans to a Trace failed; the span is not evaluated (skip reason mapping_failed)",
            exc_info=True,
        )
        raise MappingFailed(f"{type(exc).__name__}: {exc}") from exc
