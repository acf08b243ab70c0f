"""What the system returned -> the Trace's output fields, with reasoning always kept out of the answer.

The span mapping already gives a Trace for every case (string outputs split there); this module completes it
with what only the adapter's return value says:

* a JSON object (a function's dict, an HTTP body without ``response_mapping``): the answer is its first string
  among ``final_answer``, ``answer``, ``output``, ``response``, ``text``, ``content`` (unless the spans gave
  one), its reasoning the first string among ``thinking``, ``reasoning``, ``reasoning_content``;
* a :class:`~evaltrace.runner.response_mapping.MappedOutput`: every mapped field, an assistant message
  carrying the answer, reasoning and tool calls, and the mapped metrics.

Inline ``<think>`` reasoning found in any answer moves to ``output.thinking``.

A trace whose spans recorded no conversation (a decorator-only agent: ``@evaltrace.agent`` and tools, no LLM
span) still reads as one: it gets the user's turn (from the case input, :func:`~evaltrace.schema.turn_user_input`)
when it has no user message, and a final assistant message carrying the answer when its messages do not end
with an assistant's text (:func:`~evaltrace.schema.conversation.conversation_ends`, the rule live traces follow
too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace._internal.thinking import join_thinking, split_thinking
from evaltrace.runner.response_mapping import MappedOutput
from evaltrace.schema import Trace, TraceError, TraceMessage, TraceOutput
from evaltrace.schema.conversation import conversation_ends

__all__ = ["ANSWER_KEYS", "THINKING_KEYS", "finish_trace"]

ANSWER_KEYS = ("final_answer", "answer", "output", "response", "text", "content")
"""Keys of a returned JSON object read as the answer, first string wins."""
THINKING_KEYS = ("thinking", "reasoning", "reasoning_content")
"""Keys of a returned JSON object read as reasoning, first string wins."""


def finish_trace(
    trace: Trace, output: Any, failure: TraceError | None, extra: Mapping[str, Any] | None = None
) -> Trace:
    """Complete the Trace built from a case's spans with the adapter's output, error and variant facts.

    Args:
        trace: The Trace from the spans.
        output: What the adapter returned (None when it failed).
        failure: The adapter's error classification, or None.
        extra: Keys added to ``Trace.extra`` (the variant's kwargs and metadata).

    Returns:
        The completed Trace (a new object; latency recomputed from the timestamps).
    """
    updates: dict[str, Any] = {"error": failure}
    if failure is None and isinstance(output, MappedOutput):
        updates.update(_mapped(trace, output))
    elif failure is None and isinstance(output, dict):
        updates["output"] = _picked(trace.output, output)
    if extra:
        updates["extra"] = {**trace.extra, **extra}
    finished = Trace.model_validate({**trace.model_dump(exclude={"latency_ms"}), **updates})
    return _with_conversation_ends(finished)


def _with_conversation_ends(trace: Trace) -> Trace:
    """The trace with a user turn and a final assistant message where its spans recorded none (module docstring)."""
    messages = conversation_ends(trace.input, trace.messages, trace.output.final_answer)
    if messages is None:
        return trace
    # Text turns only: the tool views derived from the messages stay as they are.
    return Trace.model_validate({**trace.model_dump(exclude={"latency_ms"}), "messages": messages})


def _picked(current: TraceOutput, output: dict[str, Any]) -> TraceOutput:
    answer = current.final_answer
    thoughts: list[str] = []
    if answer is None:
        found = next((output[k] for k in ANSWER_KEYS if isinstance(output.get(k), str)), None)
        if found is not None:
            split = split_thinking(found)
            answer, thoughts = split.answer, list(split.thoughts)
    stated = next((output[k] for k in THINKING_KEYS if isinstance(output.get(k), str)), None)
    thinking = join_thinking(current.thinking, stated, *thoughts)
    return current.model_copy(update={"final_answer": answer, "thinking": thinking})


def _mapped(trace: Trace, mapped: MappedOutput) -> dict[str, Any]:
    answer, thoughts = mapped.final_answer, tuple[str, ...]()
    if answer is not None:
        split = split_thinking(answer)
        answer, thoughts = split.answer, split.thoughts
    thinking = join_thinking(mapped.thinking, *thoughts)
    messages = list(trace.messages)
    calls = mapped.tool_calls
    if answer or thinking or calls:
        first = calls[0] if calls else None
        messages.append(TraceMessage(role="assistant", content=answer or None, thinking=thinking, tool_call=first))
        messages.extend(TraceMessage(role="assistant", tool_call=call) for call in calls[1:])
    figures = {k: v for k, v in mapped.metrics.items() if k != "custom"}
    custom = {**trace.metrics.custom, **mapped.metrics.get("custom", {})}
    return {
        "output": TraceOutput(final_answer=answer, thinking=thinking, structured=mapped.structured),
        "messages": messages,
        # The trace's own calls and the response's: not derived from all the messages again, which would count
        # the calls of a history the request repeated (see Trace's invariants).
        "tool_calls": [*trace.tool_calls, *calls],
        "tool_results": list(trace.tool_results),
        "metrics": trace.metrics.model_copy(update={**figures, "custom": custom}),
    }
