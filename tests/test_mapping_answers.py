"""Which text is a Trace's ``final_answer`` when model calls answer with tool calls (issue 24).

A step's answer is its own response; a trace's is what its root returned, else its last model call's. An earlier
turn's text, repeated in a call's input history, is never the answer.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from evaltrace.mapping import trace_from_spans

TRACE_ID = 0x1AF7651916CD43DD8448EB211C80319C
_ids = iter(range(0x200, 0x10000))
EARLIER = "Write to support.desk@example.com."


def span(name: str, attributes: dict[str, Any], *, parent: ReadableSpan | None = None, start: int = 0,
         end: int = 1000) -> ReadableSpan:  # fmt: skip
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE_ID, next(_ids), False, TraceFlags(TraceFlags.SAMPLED)),
        parent=parent.context if parent is not None else None,
        attributes=attributes,
        start_time=1_700_000_000_000_000_000 + start * 1_000_000,
        end_time=1_700_000_000_000_000_000 + end * 1_000_000,
    )


def text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


HISTORY = [
    {"role": "user", "parts": [text("How do I reach support?")]},
    {"role": "assistant", "parts": [text(EARLIER)]},
    {"role": "user", "parts": [text("Weather in Paris?")]},
]
CALLS = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {}}]}]


def llm(inputs: list[Any], outputs: list[Any] | None) -> dict[str, Any]:
    attrs = {"evaltrace.span.kind": "llm", "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(inputs)}
    if outputs is not None:
        attrs["gen_ai.output.messages"] = json.dumps(outputs)
    return attrs


def answer(content: str) -> list[Any]:
    return [{"role": "assistant", "parts": [text(content)], "finish_reason": "stop"}]


def agent(output: Any = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"evaltrace.span.kind": "agent"}
    if output is not None:
        attrs["output.value"] = json.dumps(output)
    return attrs


def test_a_tool_call_step_has_no_answer() -> None:
    assert trace_from_spans([span("chat", llm(HISTORY, CALLS))]).output.final_answer is None


def test_a_step_with_text_and_tool_calls_answers_its_text() -> None:
    mixed = [{"role": "assistant", "parts": [text("Let me check."), *CALLS[0]["parts"]]}]
    assert trace_from_spans([span("chat", llm(HISTORY, mixed))]).output.final_answer == "Let me check."


def test_a_trace_answers_its_last_model_call() -> None:
    root = span("agent", agent(), end=3000)
    first = span("chat", llm(HISTORY, CALLS), parent=root, start=1, end=1000)
    last = span("chat", llm([*HISTORY, *CALLS], answer("Rainy.")), parent=root, start=1001, end=2000)
    assert trace_from_spans([root, first, last]).output.final_answer == "Rainy."
    # ... and nothing when the last call only asked for tools, whatever an earlier call answered.
    root = span("agent", agent(), end=3000)
    first = span("chat", llm(HISTORY[:1], answer(EARLIER)), parent=root, start=1, end=1000)
    last = span("chat", llm(HISTORY, CALLS), parent=root, start=1001, end=2000)
    assert trace_from_spans([root, first, last]).output.final_answer is None


def test_what_the_root_returned_wins() -> None:
    root = span("agent", agent("It is rainy."), end=3000)
    call = span("chat", llm(HISTORY, CALLS), parent=root, start=1, end=1000)
    assert trace_from_spans([root, call]).output.final_answer == "It is rainy."


def test_parallel_calls_the_last_to_end_answers() -> None:
    root = span("agent", agent(), end=3000)
    slow = span("chat", llm(HISTORY, answer("Slow answer.")), parent=root, start=1, end=2500)
    fast = span("chat", llm(HISTORY, CALLS), parent=root, start=2, end=1500)
    assert trace_from_spans([root, slow, fast]).output.final_answer == "Slow answer."


def test_a_model_call_span_wrapping_another_answers_with_the_inner_call() -> None:
    """An ``@llm`` function (an LLM span that recorded no output) around an instrumented call."""
    outer = span("chat outer", {"evaltrace.span.kind": "llm"}, end=3000)
    inner = span("chat", llm(HISTORY, answer("Rainy.")), parent=outer, start=1, end=1000)
    assert trace_from_spans([outer, inner]).output.final_answer == "Rainy."
