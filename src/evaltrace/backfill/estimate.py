"""``--dry-run``: how much a backfill would judge, and a rough estimate of what its judges would cost.

The estimate is deliberately simple and says so: tokens are the characters a judge would be sent (the judged
input, final answer, messages and thinking, plus a rubric prompt of :data:`PROMPT_OVERHEAD_CHARS`) divided by
:data:`CHARS_PER_TOKEN`, and :data:`REPLY_TOKENS` per reply, priced with genai-prices
(:mod:`evaltrace.pricing`) at the judge model's rates. Only evaluators that have a judge (``evaluator.judge.model``)
cost anything.

At session scope a session judge's calls are its own: the prompts it would render
(:meth:`~evaltrace.evaluators.ConversationJudge.requests`), e.g. one per answered turn, each with its window, for
``conversation_relevancy``. Another evaluator given a conversation is counted one call over the transcript as the
judges show it (:func:`~evaltrace.evaluators._transcript.render_turns`: each turn's message once, not the history
every turn's messages repeat).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from evaltrace import pricing
from evaltrace.backfill.engine import BackfillReport
from evaltrace.backfill.units import Unit
from evaltrace.evaluation.evaluator import EvaluatorSpec
from evaltrace.evaluators._base import MissingInputError
from evaltrace.evaluators._transcript import render_turns
from evaltrace.schema import Conversation, Trace

__all__ = ["CHARS_PER_TOKEN", "PROMPT_OVERHEAD_CHARS", "REPLY_TOKENS", "estimate", "judge_model"]

CHARS_PER_TOKEN = 4
PROMPT_OVERHEAD_CHARS = 2_000
"""A judge's instructions and rubric around the judged text."""
REPLY_TOKENS = 150
"""A verdict with a short reason."""


def judge_model(evaluator: Any) -> str | None:
    """The model of the evaluator's judge, None for a deterministic evaluator."""
    model = getattr(getattr(evaluator, "judge", None), "model", None)
    return model if isinstance(model, str) and model else None


def _trace_chars(trace: Trace) -> int:
    text = json.dumps(trace.input, ensure_ascii=False, default=str)
    size = len(text) + len(trace.output.final_answer or "") + len(trace.output.thinking or "")
    return size + sum(len(str(message.content or "")) for message in trace.messages)


def judged_chars(judged: Trace | Conversation | None) -> int:
    """Characters of what a judge would be sent about ``judged`` (the rubric not included)."""
    if judged is None:
        return 0
    if isinstance(judged, Conversation):
        return len(render_turns(judged.turns))
    return _trace_chars(judged)


def judge_calls(evaluator: Any, judged: Trace | Conversation | None) -> list[int]:
    """The characters of each judge call ``evaluator`` would make about ``judged`` (rubric included)."""
    if judged is None:
        return []
    if isinstance(judged, Conversation):
        own = _own_calls(evaluator, judged)
        if own is not None:
            return own
    return [judged_chars(judged) + PROMPT_OVERHEAD_CHARS]


def _own_calls(evaluator: Any, conversation: Conversation) -> list[int] | None:
    """A session judge's calls, rendered as it would send them; None for an evaluator that is not one."""
    requests = getattr(evaluator, "requests", None)
    render: Any = getattr(getattr(evaluator, "prompt", None), "render", None)
    if not callable(requests) or not callable(render):
        return None
    try:
        calls: list[Any] = requests(conversation, None)
        return [sum(len(str(m["content"])) for m in render(variables)) for variables in calls]
    except MissingInputError:
        return []  # skipped, not judged: no call
    except Exception:  # an estimate never fails the dry run: the generic count instead
        return None


def estimate(units: Iterable[Unit], specs: Sequence[EvaluatorSpec], scope: str, report: BackfillReport) -> None:
    """Count what ``units`` would judge into ``report``, and estimate the judges' cost."""
    prices: dict[str, pricing.ModelPrice | None] = {}
    total = 0.0
    priced = False
    for unit in units:
        if scope == "session":
            report.sessions += 1 if unit.targets else 0
            report.spans += unit.traces if unit.targets else 0
        else:
            report.spans += len(unit.targets)
        for target in unit.targets:
            for spec in target.specs:
                report.evaluations += 1
                model = judge_model(spec.evaluator)
                if model is None:
                    continue
                calls = judge_calls(spec.evaluator, target.judged)
                input_tokens = sum(chars // CHARS_PER_TOKEN for chars in calls)
                report.estimated_judge_calls += len(calls)
                report.estimated_input_tokens += input_tokens
                if model not in prices:
                    prices[model] = pricing.price_of(model)
                price = prices[model]
                output_tokens = REPLY_TOKENS * len(calls)
                cost = pricing.cost_at(price, input_tokens=input_tokens, output_tokens=output_tokens) if price else None
                if cost is None:
                    continue
                total += cost.total_usd
                priced = True
    report.judge_models = sorted(prices)
    report.unpriced_models = sorted(model for model, price in prices.items() if price is None)
    report.estimated_cost_usd = total if priced or not prices else None
