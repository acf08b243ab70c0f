"""Budgets: latency, first-token latency, cost and tokens under limits (lower is better)."""

from __future__ import annotations

import abc
from typing import Any

from evaltrace.evaluators._base import DeterministicEvaluator, MissingInputError, Verdict, checked_threshold
from evaltrace.schema import EvalCase, Trace, TraceMessage


def _utilisation(measured: dict[str, float | None], limits: dict[str, float | None], threshold: float = 1.0) -> Verdict:
    """Score = the highest measured/limit ratio; passes when it is at most ``threshold`` (1.0: within every limit).

    Raises:
        MissingInputError: None of the limited figures is measured.
    """
    checked = {k: v for k, v in measured.items() if limits.get(k) is not None and v is not None}
    if not checked:
        wanted = [k for k, v in limits.items() if v is not None]
        raise MissingInputError(f"the trace reports none of {wanted}")
    # A zero limit (e.g. "no tool calls") is met by zero; anything more scores 1 + the amount (finite, over 1).
    usage = {k: v / float(limits[k] or 1.0) if limits[k] else (1.0 + v if v else 0.0) for k, v in checked.items()}
    over = sorted(k for k, u in usage.items() if u > 1.0)
    score = max(usage.values())
    unmeasured = sorted(k for k, v in limits.items() if v is not None and measured.get(k) is None)
    detail: dict[str, Any] = {
        "measured": checked,
        "limits": {k: limits[k] for k in checked},
        "utilisation": usage,
        "over_limit": over,
        "not_reported": unmeasured,
    }
    if over:
        reason = "over budget: " + ", ".join(f"{k} {checked[k]:g} > {limits[k]:g}" for k in over)
    elif score > threshold:
        worst = max(usage, key=lambda k: usage[k])
        reason = f"within budget, but {worst} uses {score:.0%} of its limit (threshold {threshold:.0%})"
    else:
        reason = "within budget"
    return Verdict(score <= threshold, score, reason, detail)


class _Budget(DeterministicEvaluator):
    """Figures under limits; ``threshold`` is the highest share of a limit that passes (1.0: the limit itself)."""

    threshold = 1.0
    direction = "lower"

    def _set_threshold(self, threshold: float) -> None:
        self.threshold = checked_threshold(threshold)

    @abc.abstractmethod
    def _limits(self) -> dict[str, float | None]:
        """The limits by metric name (None = no limit)."""

    @abc.abstractmethod
    def _measured(self, trace: Trace) -> dict[str, float | None]:
        """The measured figures by metric name (None = not reported)."""

    def check(self, trace: Trace, case: EvalCase | None) -> Verdict:
        """Compare the measured figures with the limits; score = the highest measured/limit ratio."""
        return _utilisation(self._measured(trace), self._limits(), self.threshold)


class Latency(_Budget):
    """Latency under limits: total ``latency_ms`` and/or time to first token.

    Score = highest measured/limit ratio (lower is better); passes when every reported figure is within its
    limit. Figures the trace does not report are listed in ``detail.not_reported``; if none is reported the
    result is skipped.
    """

    name = "latency"

    def __init__(
        self, max_ms: float | None = None, *, max_first_token_ms: float | None = None, threshold: float = 1.0
    ) -> None:
        """Configure the limits.

        Args:
            max_ms: Limit on the whole trace's latency.
            max_first_token_ms: Limit on time to first token.
            threshold: Highest passing share of a limit, in [0, 1] (0.8: fail beyond 80% of a limit).

        Raises:
            ValueError: No limit given, or a threshold outside [0, 1].
        """
        self._set_threshold(threshold)
        if max_ms is None and max_first_token_ms is None:
            raise ValueError("Latency needs max_ms and/or max_first_token_ms")
        self.max_ms = max_ms
        self.max_first_token_ms = max_first_token_ms

    def _limits(self) -> dict[str, float | None]:
        return {"latency_ms": self.max_ms, "latency_first_token_ms": self.max_first_token_ms}

    def _measured(self, trace: Trace) -> dict[str, float | None]:
        first = trace.metrics.latency_first_token_ms
        return {
            "latency_ms": float(trace.latency_ms),
            "latency_first_token_ms": None if first is None else float(first),
        }


class Cost(_Budget):
    """Cost (``metrics.cost_usd``) under a limit in USD; skipped when the trace has no cost."""

    name = "cost"

    def __init__(self, max_usd: float, *, threshold: float = 1.0) -> None:
        """Configure the limit.

        Args:
            max_usd: Highest acceptable cost of one trace.
            threshold: Highest passing share of the limit, in [0, 1].

        Raises:
            ValueError: A threshold outside [0, 1].
        """
        self._set_threshold(threshold)
        self.max_usd = max_usd

    def _limits(self) -> dict[str, float | None]:
        return {"cost_usd": self.max_usd}

    def _measured(self, trace: Trace) -> dict[str, float | None]:
        return {"cost_usd": trace.metrics.cost_usd}


class TokenBudget(_Budget):
    """Token counts under limits: input, output, thinking and/or total (input + output)."""

    name = "token_budget"

    def __init__(
        self,
        *,
        max_input: int | None = None,
        max_output: int | None = None,
        max_thinking: int | None = None,
        max_total: int | None = None,
        threshold: float = 1.0,
    ) -> None:
        """Configure the limits.

        Args:
            max_input: Limit on input tokens.
            max_output: Limit on output tokens (thinking included, as providers count it).
            max_thinking: Limit on reasoning tokens.
            max_total: Limit on input + output tokens.
            threshold: Highest passing share of a limit, in [0, 1].

        Raises:
            ValueError: No limit given, or a threshold outside [0, 1].
        """
        self._set_threshold(threshold)
        self.limits: dict[str, float | None] = {
            "token_input": max_input,
            "token_output": max_output,
            "token_thinking": max_thinking,
            "token_total": max_total,
        }
        if all(v is None for v in self.limits.values()):
            raise ValueError("TokenBudget needs at least one limit")

    def _limits(self) -> dict[str, float | None]:
        return self.limits

    def _measured(self, trace: Trace) -> dict[str, float | None]:
        m = trace.metrics
        total = None if m.token_input is None or m.token_output is None else m.token_input + m.token_output
        values = {"token_input": m.token_input, "token_output": m.token_output, "token_thinking": m.token_thinking}
        measured: dict[str, float | None] = {k: None if v is None else float(v) for k, v in values.items()}
        measured["token_total"] = None if total is None else float(total)
        return measured


def _is_model_output(message: TraceMessage) -> bool:
    """An assistant message the model wrote: text, reasoning, or a tool call with the provider's call id.

    Tool calls without an id come from tool spans the application ran itself, not from a model response.
    """
    call = message.tool_call
    return bool(message.content or message.thinking or (call is not None and call.id))


def count_model_calls(trace: Trace) -> int | None:
    """Return the number of model calls, or None when the trace cannot tell.

    ``metrics.custom["model_calls"]`` when an adapter reports it, else the assistant turns in the messages (runs
    of consecutive assistant messages with model output).
    """
    reported = trace.metrics.custom.get("model_calls")
    if isinstance(reported, int) and not isinstance(reported, bool):
        return reported
    if not trace.messages:
        return None
    turns, in_turn = 0, False
    for message in trace.messages:
        model_made = message.role == "assistant" and _is_model_output(message)
        if model_made and not in_turn:
            turns += 1
        in_turn = message.role == "assistant" and (model_made or in_turn)
    return turns


class StepBudget(_Budget):
    """An agent's steps under limits: model calls, tool calls, tokens (input + output) and wall time.

    Model calls are counted as :func:`count_model_calls` says; tool calls are ``trace.tool_calls`` (zero when
    none: a step budget needs no tool evidence); wall time is ``latency_ms``. Score = highest measured/limit
    ratio (lower is better); passes when every reported figure is within its limit; skipped when none of the
    limited figures is reported.
    """

    name = "step_budget"

    def __init__(
        self,
        *,
        max_model_calls: int | None = None,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        max_wall_ms: float | None = None,
        threshold: float = 1.0,
    ) -> None:
        """Configure the limits.

        Args:
            max_model_calls: Limit on LLM calls (assistant turns).
            max_tool_calls: Limit on tool calls.
            max_tokens: Limit on input + output tokens.
            max_wall_ms: Limit on the trace's duration in milliseconds.
            threshold: Highest passing share of a limit, in [0, 1].

        Raises:
            ValueError: No limit given, a negative one, or a threshold outside [0, 1].
        """
        self._set_threshold(threshold)
        self.limits: dict[str, float | None] = {
            "model_calls": max_model_calls,
            "tool_calls": max_tool_calls,
            "tokens": max_tokens,
            "wall_ms": max_wall_ms,
        }
        if all(v is None for v in self.limits.values()):
            raise ValueError("StepBudget needs at least one limit")
        negative = sorted(k for k, v in self.limits.items() if v is not None and v < 0)
        if negative:
            raise ValueError(f"StepBudget limits must be >= 0: {', '.join('max_' + k for k in negative)}")

    def _limits(self) -> dict[str, float | None]:
        return self.limits

    def _measured(self, trace: Trace) -> dict[str, float | None]:
        m = trace.metrics
        tokens = None if m.token_input is None or m.token_output is None else m.token_input + m.token_output
        model_calls = count_model_calls(trace)
        return {
            "model_calls": None if model_calls is None else float(model_calls),
            "tool_calls": float(len(trace.tool_calls)),
            "tokens": None if tokens is None else float(tokens),
            "wall_ms": float(trace.latency_ms),
        }
