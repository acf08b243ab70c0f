"""Tool-call health across a trace: repeated calls and cycles (``tool_loop``), and the tool error rate.

:class:`~evaltrace.evaluators.looping.LoopingDetection` measures repetition in the answer text; these read the
tool calls and results instead, so an agent stuck calling tools is caught even when its answer looks fine. Over a
session's Conversation they read the calls and results of all turns in order.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaltrace.evaluators._base import (
    AnySubjectEvaluator,
    MissingInputError,
    Subject,
    Verdict,
    checked_threshold,
    subject_noun,
)
from evaltrace.evaluators.tools import call_key
from evaltrace.evaluators.trajectory import no_tool_evidence, require_tool_calls
from evaltrace.schema import Conversation, EvalCase, ToolCall, ToolResult

MAX_CALLS_SCANNED = 2_000
"""Cycle search is quadratic in the number of calls; longer traces are scanned on their first 2,000 calls."""


@dataclass(frozen=True)
class Cycle:
    """A block of calls repeated back to back: ``calls[start : start + period]`` ``repeats`` times."""

    start: int
    period: int
    repeats: int


def find_cycles(keys: Sequence[str], *, max_period: int, min_repeats: int) -> list[Cycle]:
    """Return the back-to-back repeated blocks of 2..``max_period`` distinct-ish keys, earliest first.

    A block made of one key repeated is left to the identical-call count. Regions already covered by a
    shorter cycle are not reported again with a longer period (ABAB is not also an ABABABAB cycle).
    """
    cycles: list[Cycle] = []
    covered: set[int] = set()
    for period in range(2, max_period + 1):
        start = 0
        while start + period * min_repeats <= len(keys):
            block = list(keys[start : start + period])
            repeats = 1
            while list(keys[start + repeats * period : start + (repeats + 1) * period]) == block:
                repeats += 1
            span = range(start, start + repeats * period)
            if repeats >= min_repeats and len(set(block)) > 1 and not covered.intersection(span):
                cycles.append(Cycle(start, period, repeats))
                covered.update(span)
                start += repeats * period
            else:
                start += 1
    return sorted(cycles, key=lambda c: c.start)


def _label(call: ToolCall, with_arguments: bool) -> str:
    if not with_arguments or not call.arguments:
        return call.name
    return f"{call.name}({json.dumps(call.arguments, sort_keys=True, default=str)})"


class ToolLoop(AnySubjectEvaluator):
    """Detect an agent looping over tools: the same call repeated, or a cycle of calls (A, B, A, B, ...).

    Findings: a call (same tool and, by default, same arguments) made more than ``max_repeats`` times in the
    trace; a block of 2..``max_cycle_length`` calls repeated back to back at least ``min_cycle_repeats`` times.
    Score = 1 − excess calls / calls (excess: repeats beyond the allowance, cycle turns beyond the allowed
    ones); passes when it reaches ``threshold`` (1.0 by default: no finding; 0.8 tolerates excess calls up to a
    fifth of the calls). Over a session's Conversation the calls of all turns count, in order,
    so the same call made again in a later turn is a repeat. Skipped when there are no tool calls.
    """

    name = "tool_loop"

    def __init__(
        self,
        max_repeats: int = 2,
        *,
        min_cycle_repeats: int = 3,
        max_cycle_length: int = 4,
        match_arguments: bool = True,
        threshold: float = 1.0,
    ) -> None:
        """Configure the allowances.

        Args:
            max_repeats: Most times one identical call may be made (a retry after an error is normal).
            min_cycle_repeats: Back-to-back repetitions of a block that make a cycle.
            max_cycle_length: Longest block searched for.
            match_arguments: Compare calls by tool and arguments (True) or by tool name only.
            threshold: Lowest passing score, in [0, 1].

        Raises:
            ValueError: A limit below its minimum, or a threshold outside [0, 1].
        """
        self.threshold = checked_threshold(threshold)
        if max_repeats < 1 or min_cycle_repeats < 2 or max_cycle_length < 2:
            raise ValueError("ToolLoop needs max_repeats >= 1, min_cycle_repeats >= 2 and max_cycle_length >= 2")
        self.max_repeats = max_repeats
        self.min_cycle_repeats = min_cycle_repeats
        self.max_cycle_length = max_cycle_length
        self.match_arguments = match_arguments

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Count identical calls and search for cycles."""
        calls = require_tool_calls(trace)[:MAX_CALLS_SCANNED]
        keys = [call_key(c) if self.match_arguments else c.name for c in calls]
        labels = {key: _label(call, self.match_arguments) for key, call in zip(keys, calls, strict=True)}
        counts = Counter(keys)
        repeated = {labels[k]: n for k, n in counts.items() if n > self.max_repeats}
        cycles = find_cycles(keys, max_period=self.max_cycle_length, min_repeats=self.min_cycle_repeats)
        excess = sum(n - self.max_repeats for n in repeated.values())
        excess += sum((c.repeats - self.min_cycle_repeats + 1) * c.period for c in cycles)
        score = max(0.0, 1.0 - excess / len(calls))
        findings = [f"{label} called {n} times (more than {self.max_repeats})" for label, n in repeated.items()]
        for c in cycles:
            names = " → ".join(call.name for call in calls[c.start : c.start + c.period])
            findings.append(f"cycle {names} repeated {c.repeats} times from step {c.start + 1}")
        detail: dict[str, Any] = {
            "calls": len(calls),
            "repeated_calls": repeated,
            "cycles": [{"start_step": c.start + 1, "length": c.period, "repeats": c.repeats} for c in cycles],
            "excess_calls": excess,
        }
        reason = f"no tool loop in {len(calls)} calls" if not findings else "tool loop: " + "; ".join(findings)
        # No finding means score 1.0 (a finding always has excess calls), so the default threshold is "no finding".
        return Verdict(score >= self.threshold, score, reason, detail)


def is_error_result(result: ToolResult, pattern: re.Pattern[str] | None = None) -> bool:
    """Return whether a tool result reports an error.

    Object results: a truthy ``error`` key (what evaltrace records for a tool span that ended in error),
    ``is_error``/``isError`` true (MCP), or ``status`` ``"error"``/``"failed"``. Text results count only when
    ``pattern`` is given and found in them (plain text has no reliable error marker).
    """
    content = result.content
    if isinstance(content, str):
        return pattern is not None and pattern.search(content) is not None
    if content.get("error") or content.get("is_error") is True or content.get("isError") is True:
        return True
    status = content.get("status")
    return isinstance(status, str) and status.lower() in ("error", "failed")


class ToolErrorRate(AnySubjectEvaluator):
    """Share of tool results that are errors (see :func:`is_error_result`), at most ``threshold``.

    Score = errors / results (lower is better; threshold 0.25 by default, 0.0 to allow none). Over a session's
    Conversation: the results of all turns, with ``detail.errors_by_turn``. Skipped when there are no tool calls
    or no tool results.
    """

    name = "tool_error_rate"
    direction = "lower"

    def __init__(self, threshold: float = 0.25, *, error_pattern: str | None = None) -> None:
        """Configure the limit.

        Args:
            threshold: Highest acceptable share of failed tool results.
            error_pattern: Regex marking a text result as an error (e.g. ``"^Error:"``).

        Raises:
            ValueError: A threshold outside [0, 1] or a bad pattern.
        """
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        try:
            self.pattern = re.compile(error_pattern) if error_pattern is not None else None
        except re.error as exc:
            raise ValueError(f"error_pattern {error_pattern!r} is not a valid regex: {exc}") from None
        self.threshold = threshold

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Count failed results among all tool results (of every turn, for a conversation)."""
        results = trace.tool_results
        if not results and not trace.tool_calls:
            raise MissingInputError(no_tool_evidence(trace))
        if not results:
            raise MissingInputError(f"no evidence: the {subject_noun(trace)}'s tool calls recorded no results")
        failed = [r.name for r in results if is_error_result(r, self.pattern)]
        rate = len(failed) / len(results)
        detail: dict[str, Any] = {"results": len(results), "errors": len(failed), "failed_tools": failed}
        if isinstance(trace, Conversation):  # which turns went wrong, numbered from 1 as the reports show turns
            detail["errors_by_turn"] = {
                str(turn.index + 1): errors
                for turn in trace.turns
                if (errors := sum(is_error_result(r, self.pattern) for r in turn.tool_results))
            }
        reason = f"{len(failed)} of {len(results)} tool results are errors"
        if failed:
            reason += f" ({', '.join(dict.fromkeys(failed))})"
        return Verdict(rate <= self.threshold, rate, reason, detail)
