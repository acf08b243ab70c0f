"""Multi-turn sessions for the session-evaluator tests: real decorated functions under the real OTel SDK.

Each turn is one call of a decorated support agent (an ``llm_call`` span, then its tool spans) inside
``evaltrace.context(session_id=...)``; the finished spans are mapped with :func:`evaltrace.mapping.trace_from_spans`
and ordered into a :class:`~evaltrace.schema.Conversation` as the session engine does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Conversation

SYSTEM = "You are Penny, the support assistant of ACME Shoes. Only discuss ACME orders, politely."


@evaltrace.tool
def lookup_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped"}


@evaltrace.tool
def issue_refund(order_id: str) -> str:
    raise RuntimeError(f"refund service unavailable for {order_id}")


TOOLS = {"lookup_order": lookup_order, "issue_refund": issue_refund}


@dataclass(frozen=True)
class Step:
    """One turn: what the user says, what the assistant answers, the tools it calls, what the model call cost."""

    message: str
    reply: str
    tools: Sequence[str] = field(default_factory=tuple)
    cost_usd: float | None = 0.01
    tokens: tuple[int, int] | None = (100, 20)


@evaltrace.agent
def support_agent(message: str, reply: str, tools: Sequence[str], cost_usd: float | None, tokens: Any) -> str:
    with evaltrace.llm_call(provider="acme-llm", model="penny-1", system=SYSTEM) as call:
        usage = None if tokens is None else {"input_tokens": tokens[0], "output_tokens": tokens[1]}
        call.record(messages=[{"role": "user", "content": message}], output=reply, usage=usage, cost_usd=cost_usd)
    for tool in tools:
        try:
            TOOLS[tool]("A-17")
        except RuntimeError:
            pass  # the agent carries on; the tool span recorded the error
    return reply


def group_by_trace(spans: Sequence[ReadableSpan]) -> list[list[ReadableSpan]]:
    groups: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        groups[span.context.trace_id].append(span)
    return list(groups.values())


def run_session(exporter: InMemorySpanExporter, steps: Sequence[Step], session_id: str = "s-1") -> Conversation:
    """Run one agent call per step in a session; return the session's Conversation."""
    exporter.clear()
    with evaltrace.context(session_id=session_id):
        for step in steps:
            support_agent(step.message, step.reply, tuple(step.tools), step.cost_usd, step.tokens)
    traces = [trace_from_spans(group) for group in group_by_trace(exporter.get_finished_spans())]
    assert len(traces) == len(steps)
    return Conversation.from_traces(session_id, traces)
