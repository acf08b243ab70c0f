"""Tool-use evaluators: were the required tools called, how efficiently, and in the expected order.

Each judges a Trace, or a session's Conversation through the tool calls of all its turns in order.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evaltrace.evaluators._base import AnySubjectEvaluator, MissingInputError, Subject, Verdict, case_list
from evaltrace.schema import EvalCase, RubricLevel, ToolCall


def call_key(call: ToolCall) -> str:
    """Return a key equal for calls of the same tool with the same arguments."""
    return call.name + "\x00" + json.dumps(call.arguments, sort_keys=True, default=str)


def _args_match(call: ToolCall, expected: dict[str, Any]) -> bool:
    return all(call.arguments.get(key) == value for key, value in expected.items())


class ToolCalled(AnySubjectEvaluator):
    """Every required tool was called (``expected.must_call_tools`` unless tools are given).

    Score: share of required tools that were called; passes when all were (threshold 1.0, higher is better).

    Example:
        ``ToolCalled("get_weather")`` or ``ToolCalled("search", arguments={"query": "Paris"})``.
    """

    name = "tool_called"

    def __init__(self, *tools: str, arguments: dict[str, Any] | None = None, threshold: float = 1.0) -> None:
        """Configure the check.

        Args:
            *tools: Tools that must be called; when empty, the case's ``expected.must_call_tools``.
            arguments: Arguments (a subset) that a call of each tool must carry to count.
            threshold: Share of required tools that must be called.
        """
        self.tools = tools
        self.arguments = arguments or {}
        self.threshold = threshold

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Compare the required tools with ``trace.tool_calls``."""
        required = case_list(self.tools, case, "must_call_tools")
        if not required:
            raise MissingInputError("no required tools configured or in case.expected.must_call_tools")
        calls = trace.tool_calls
        called = [c.name for c in calls if _args_match(c, self.arguments)]
        missing = [tool for tool in dict.fromkeys(required) if tool not in called]
        score = 1.0 - len(missing) / len(set(required))
        reason = "all required tools called" if not missing else f"missing tool calls: {', '.join(missing)}"
        detail = {"required": required, "called": [c.name for c in calls], "missing": missing}
        return Verdict(score >= self.threshold, score, reason, detail)


def efficiency_level(calls: int, redundant: int, optimal: int, maximum: int, missing: int) -> RubricLevel:
    """Map a tool-call count to a rubric level.

    excellent: at most ``optimal`` calls, none redundant; good: within half-way to ``maximum`` with at most one
    redundant call; acceptable: at most ``maximum`` and under half the calls redundant; poor: at most twice
    ``maximum``; failed: beyond, or no call at all when tools were needed. A required tool never called caps the
    level at poor.
    """
    if calls == 0:
        level = RubricLevel.EXCELLENT if optimal == 0 else RubricLevel.FAILED
    elif calls <= optimal and redundant == 0:
        level = RubricLevel.EXCELLENT
    elif calls <= optimal + math.ceil((maximum - optimal) / 2) and redundant <= 1:
        level = RubricLevel.GOOD
    elif calls <= maximum and redundant * 2 < calls:
        level = RubricLevel.ACCEPTABLE
    elif calls <= 2 * maximum:
        level = RubricLevel.POOR
    else:
        level = RubricLevel.FAILED
    if missing and level.score > RubricLevel.POOR.score:
        level = RubricLevel.POOR
    return level


class ToolEfficiency(AnySubjectEvaluator):
    """Tool-call count against an optimal and a maximum count, with identical repeated calls penalised.

    The count maps to a rubric level (excellent 1.0 … failed 0.0, see :func:`efficiency_level`). ``optimal``
    defaults to the number of distinct required tools (else distinct calls made), ``maximum`` to twice that
    (at least optimal + 2). Threshold 0.6, higher is better.
    """

    name = "tool_efficiency"

    def __init__(self, optimal: int | None = None, maximum: int | None = None, threshold: float = 0.6) -> None:
        """Configure the counts.

        Args:
            optimal: The ideal number of calls.
            maximum: The most calls that are still acceptable.
            threshold: Minimum level score to pass.
        """
        self.optimal = optimal
        self.maximum = maximum
        self.threshold = threshold

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Count calls and redundant repeats, then map to a level."""
        calls = trace.tool_calls
        keys = [call_key(c) for c in calls]
        redundant = len(keys) - len(set(keys))
        required = set(case_list(None, case, "must_call_tools"))
        optimal = self.optimal if self.optimal is not None else (len(required) or len(set(keys)))
        maximum = self.maximum if self.maximum is not None else max(2 * optimal, optimal + 2)
        missing = sorted(required - {c.name for c in calls})
        level = efficiency_level(len(keys), redundant, optimal, maximum, len(missing))
        detail = {
            "calls": len(keys),
            "redundant_calls": redundant,
            "optimal": optimal,
            "maximum": maximum,
            "missing_required": missing,
            "level": level.value,
        }
        reason = (
            f"{len(keys)} tool calls ({redundant} redundant) vs optimal {optimal}, maximum {maximum}: {level.value}"
        )
        return Verdict(level.score >= self.threshold, level.score, reason, detail)


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


class StepAlignment(AnySubjectEvaluator):
    """The agent's steps (tool calls, in order) against the expected steps.

    completeness = expected steps present (as a multiset) / expected steps; alignment = longest common
    subsequence of expected and actual / expected steps (order). Score = their mean; threshold 0.75, higher is
    better. Expected steps: the constructor, else ``case.metadata["expected_steps"]``, else
    ``expected.must_call_tools`` in order.
    """

    name = "step_alignment"

    def __init__(self, steps: Sequence[str] | None = None, threshold: float = 0.75) -> None:
        """Configure the expected steps.

        Args:
            steps: Expected tool names in order.
            threshold: Minimum score to pass.
        """
        self.steps = list(steps) if steps else None
        self.threshold = threshold

    def _expected(self, case: EvalCase | None) -> list[str]:
        if self.steps:
            return self.steps
        if case is not None and isinstance(case.metadata.get("expected_steps"), list):
            return [str(step) for step in case.metadata["expected_steps"]]
        steps = case_list(None, case, "must_call_tools")
        if not steps:
            raise MissingInputError("no expected steps configured or in the case")
        return steps

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Compare the ordered tool names with the expected steps."""
        expected = self._expected(case)
        actual = [c.name for c in trace.tool_calls]
        present = sum((Counter(expected) & Counter(actual)).values())
        completeness = present / len(expected)
        alignment = _lcs_length(expected, actual) / len(expected)
        score = (completeness + alignment) / 2
        extra = sorted((Counter(actual) - Counter(expected)).elements())
        detail = {
            "expected_steps": expected,
            "actual_steps": actual,
            "completeness": completeness,
            "alignment": alignment,
            "extra_steps": extra,
        }
        reason = f"completeness {completeness:.2f}, order alignment {alignment:.2f}"
        return Verdict(score >= self.threshold, score, reason, detail)
