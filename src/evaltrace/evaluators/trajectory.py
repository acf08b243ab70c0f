"""Tool-sequence match: the tool calls of a trace against expected steps, in one of four modes.

Modes (``expected`` = the configured steps, ``calls`` = ``trace.tool_calls`` in order; over a session's
Conversation, the calls of all its turns in order):

* ``exact``: the calls are the expected steps, in order, nothing more;
* ``in_order``: the expected steps occur in order, other calls may come between them;
* ``any_order``: the calls are the expected steps in any order, nothing more;
* ``subset``: every expected step occurs, in any order, other calls allowed.

Steps carry argument matchers (see :mod:`evaltrace.evaluators._tool_match`). A trace without tool calls is
not evaluated (skipped: no evidence), never failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from evaltrace.evaluators._base import (
    AnySubjectEvaluator,
    MissingInputError,
    Subject,
    Verdict,
    checked_threshold,
    subject_noun,
)
from evaltrace.evaluators._tool_match import ExpectedStep, parse_steps
from evaltrace.schema import EvalCase, ToolCall

SequenceMode = Literal["exact", "in_order", "any_order", "subset"]
NO_TOOL_EVIDENCE = "no evidence: the trace has no tool calls (no tool spans or tool messages)"
"""Why a tool evaluator skips a trace without tools: nothing to judge is not a failure."""


def no_tool_evidence(subject: Subject) -> str:
    """Why a subject without tool calls is skipped: :data:`NO_TOOL_EVIDENCE`, worded for a conversation too."""
    if subject_noun(subject) == "trace":
        return NO_TOOL_EVIDENCE
    return "no evidence: no turn of the conversation has tool calls (no tool spans or tool messages)"


def require_tool_calls(trace: Subject) -> list[ToolCall]:
    """Return the tool calls (of every turn, in order, for a conversation), or raise MissingInputError.

    A subject without tool calls is skipped (no evidence), never failed.
    """
    calls = trace.tool_calls
    if not calls:
        raise MissingInputError(no_tool_evidence(trace))
    return calls


def ordered_matches(steps: Sequence[ExpectedStep], calls: Sequence[ToolCall]) -> int:
    """Return the longest common subsequence of steps and calls, a step matching a call by :meth:`matches`."""
    previous = [0] * (len(calls) + 1)
    for step in steps:
        current = [0]
        for j, call in enumerate(calls):
            current.append(previous[j] + 1 if step.matches(call) else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def unordered_matches(steps: Sequence[ExpectedStep], calls: Sequence[ToolCall]) -> dict[int, int]:
    """Return a maximum matching step index -> call index (each call used once), by augmenting paths.

    Greedy assignment is not enough once matchers overlap: ``[search(any), search(q=Paris)]`` against
    ``[search(q=Paris), search(q=Rome)]`` must give Paris to the second step.
    """
    owner: dict[int, int] = {}  # call index -> step index

    def assign(step_index: int, seen: set[int]) -> bool:
        for call_index, call in enumerate(calls):
            if call_index in seen or not steps[step_index].matches(call):
                continue
            seen.add(call_index)
            if call_index not in owner or assign(owner[call_index], seen):
                owner[call_index] = step_index
                return True
        return False

    for index in range(len(steps)):
        assign(index, set())
    return {step: call for call, step in owner.items()}


def _wrong_or_missing(step: ExpectedStep, calls: Sequence[ToolCall], used: set[int]) -> str:
    named = next((c for i, c in enumerate(calls) if c.name == step.name and i not in used), None)
    if named is not None:
        return f"wrong argument: {step.wrong_argument(named)}"
    return f"missing call {step.describe()}"


def _exact_mismatch(steps: Sequence[ExpectedStep], calls: Sequence[ToolCall]) -> str | None:
    for i in range(max(len(steps), len(calls))):
        if i >= len(calls):
            return f"missing call {steps[i].describe()} at step {i + 1} (only {len(calls)} calls)"
        if i >= len(steps):
            return f"extra call {calls[i].name} at step {i + 1}"
        step, call = steps[i], calls[i]
        if step.matches(call):
            continue
        if call.name == step.name:
            return f"wrong argument at step {i + 1}: {step.wrong_argument(call)}"
        if any(step.matches(c) for c in calls[i + 1 :]):
            return f"out of order at step {i + 1}: expected {step.describe()} (called later), got {call.name}"
        return f"unexpected call at step {i + 1}: expected {step.describe()}, got {call.name}"
    return None


def _in_order_mismatch(steps: Sequence[ExpectedStep], calls: Sequence[ToolCall]) -> str | None:
    used: set[int] = set()
    position = 0
    for j, step in enumerate(steps):
        # Earliest match first: for a subsequence test this greedy choice is optimal.
        found = next((k for k in range(position, len(calls)) if step.matches(calls[k])), None)
        if found is not None:
            used.add(found)
            position = found + 1
            continue
        earlier = next((k for k in range(position) if k not in used and step.matches(calls[k])), None)
        if earlier is not None:
            return (
                f"out of order: {step.describe()} was called at step {earlier + 1}, "
                f"before {steps[j - 1].describe()} (step {position})"
            )
        return _wrong_or_missing(step, calls, used)
    return None


def _unordered_mismatch(
    steps: Sequence[ExpectedStep], calls: Sequence[ToolCall], matching: Mapping[int, int], allow_extra: bool
) -> str | None:
    used = set(matching.values())
    for index, step in enumerate(steps):
        if index not in matching:
            return _wrong_or_missing(step, calls, used)
    if not allow_extra:
        extra = next((i for i in range(len(calls)) if i not in used), None)
        if extra is not None:
            return f"extra call {calls[extra].name} at step {extra + 1}"
    return None


class ToolSequence(AnySubjectEvaluator):
    """The trace's (or a conversation's, all turns in order) tool calls against expected steps: ``exact``, ``in_order``, ``any_order`` or ``subset``.

    Expected steps: ``expected`` (names or ``{name, args}`` with argument matchers), else the case's
    ``metadata["expected_tool_sequence"]`` (same syntax), else ``expected.must_call_tools``. ``args`` maps a tool
    to argument matchers applied to every step of that tool. Score: matched steps / expected steps (modes that
    forbid extra calls divide by the larger of expected and actual; ordered modes count the longest in-order
    match). Passes on a full match (``threshold`` 1.0, the default), or, with a lower ``threshold``, when the score
    reaches it; the reason names the first mismatch. Skipped when the trace has no tool calls.

    Example:
        ``ToolSequence(["search", {"name": "book", "args": {"city": {"regex": "^Par"}}}], mode="in_order")``.
    """

    name = "tool_sequence"

    def __init__(
        self,
        expected: Sequence[str | Mapping[str, Any]] | None = None,
        *,
        mode: SequenceMode = "in_order",
        args: Mapping[str, Mapping[str, Any]] | None = None,
        threshold: float = 1.0,
    ) -> None:
        """Configure the expected steps.

        Args:
            expected: Steps in order; None reads them from the case.
            mode: How calls are compared with the steps (see the module docstring).
            args: Tool name -> argument matchers, shared by every step of that tool.
            threshold: Lowest passing score in [0, 1]; 1.0 requires a full match.

        Raises:
            ValueError: Unknown mode, an empty ``expected`` list, a malformed step or matcher, or a threshold
                outside [0, 1].
        """
        self.threshold = checked_threshold(threshold)
        if mode not in get_args(SequenceMode):
            raise ValueError(f"mode must be one of {', '.join(get_args(SequenceMode))}, got {mode!r}")
        if expected is not None and not expected:
            raise ValueError("expected is empty; give at least one tool, or None to read the case")
        self.mode: SequenceMode = mode
        self.args = dict(args or {})
        self.steps = parse_steps(expected, self.args) if expected is not None else None

    def _expected(self, case: EvalCase | None) -> list[ExpectedStep]:
        if self.steps is not None:
            return self.steps
        if case is not None:
            configured = case.metadata.get("expected_tool_sequence")
            if configured:
                return parse_steps(configured, self.args)
            if case.expected.must_call_tools:
                return parse_steps(case.expected.must_call_tools, self.args)
        raise MissingInputError("no expected tools configured or in the case (expected.must_call_tools)")

    def check(self, trace: Subject, case: EvalCase | None) -> Verdict:
        """Match the calls with the steps, score the match and name the first mismatch."""
        calls = require_tool_calls(trace)
        steps = self._expected(case)
        ordered = self.mode in ("exact", "in_order")
        matching = {} if ordered else unordered_matches(steps, calls)
        matched = ordered_matches(steps, calls) if ordered else len(matching)
        strict = self.mode in ("exact", "any_order")
        score = matched / (max(len(steps), len(calls)) if strict else len(steps))
        if self.mode == "exact":
            mismatch = _exact_mismatch(steps, calls)
        elif self.mode == "in_order":
            mismatch = _in_order_mismatch(steps, calls)
        else:
            mismatch = _unordered_mismatch(steps, calls, matching, allow_extra=self.mode == "subset")
        detail = {
            "mode": self.mode,
            "expected": [s.describe() for s in steps],
            "actual": [c.name for c in calls],
            "matched": matched,
            "mismatch": mismatch,
        }
        reason = f"tool calls match ({self.mode})" if mismatch is None else f"{self.mode}: {mismatch}"
        # A full match is judged by the mismatch search (it also checks what the score does not count); a lower
        # threshold accepts a partial match by its score.
        passed = mismatch is None or (self.threshold < 1.0 and score >= self.threshold)
        return Verdict(passed, score, reason, detail)
