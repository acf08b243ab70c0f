"""Adapter from spans to the Trace evaluators see.

``evaltrace.mapping.trace_from_spans``. When it fails (a bug of ours on unusual spans) :class:`MappingFailed` is
raised: the caller records each evaluator as not evaluated (``mapping_failed``). Judging a stand-in Trace
instead (the root alone, without tool calls or messages) would turn our failure into false verdicts.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace.schema import Trace, TraceOutput

logger = logging.getLogger("evaltrace.evaluation")
LIVE_RUN_ID = "live"
_MAPPING: list[ModuleType] = []
# (trace_from_spans as imported, the lone span's lazy Trace from its fields (given the output mapping, or None), the
# general mapping, the source class of a lone decorated span (no longer read here: _lazy_single maps the output of
# that class only; kept for the tests that unpack this tuple), its one-step output mapping): kept with _MAPPING.
_LONE: list[
    tuple[
        Callable[..., Trace],
        Callable[[ReadableSpan, Callable[[Any], TraceOutput | None] | None], Trace | None],
        Callable[[Sequence[ReadableSpan], ReadableSpan, bool, bool], Trace],
        Any,
        Callable[[Any], TraceOutput | None],
    ]
] = []


def _mapping() -> ModuleType:
    """``evaltrace.mapping``, imported on first use (not with this module), then kept."""
    # A ``from`` import of a package runs Python code each time it executes: once per evaluated span here.
    # The module, not its function, is kept: its ``trace_from_spans`` is looked up on each call.
    if not _MAPPING:
        module = importlib.import_module("evaltrace.mapping")
        build = importlib.import_module("evaltrace.mapping._build")
        _LONE.append((module.trace_from_spans, build._lazy_single, build.mapped_trace, build._Lone, build.lone_output))
        _MAPPING.append(module)
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
        if len(spans) == 1 and spans[0] is root and type(root) is ReadableSpan:
            # The evaluated span without descendants (usually): the lazy Trace trace_from_spans() would build, one
            # call (and a copy of the list) fewer. Not when trace_from_spans was replaced (tests put a broken one).
            original, lone, general, _, lone_output = _LONE[0]
            if mapping.trace_from_spans is original:
                # A decorated span's output is mapped now when it takes one step (lone_output), as its first read
                # maps and publishes it (with its notes): every judgement reads it (the monitor's answer), and its
                # read through the lazy field was two Python frames. Anything else stays lazy.
                single = lone(root, lone_output)
                if single is not None:
                    return single
                # A foreign kind to derive (OpenInference or OpenLLMetry attributes only), or a span ending before
                # its start: what trace_from_spans() would do next, without trying _lazy_single() a second time.
                return general(list(spans), root, True, True)
        # Lazy: each field is mapped when an evaluator first reads it (a cheap check reads one or two).
        trace: Trace = mapping.trace_from_spans(list(spans), root=root, lazy=True)
        return trace
    except Exception as exc:
        logger.warning(
            "evaltrace: mapping spans to a Trace failed; the span is not evaluated (skip reason mapping_failed)",
            exc_info=True,
        )
        raise MappingFailed(f"{type(exc).__name__}: {exc}") from exc
