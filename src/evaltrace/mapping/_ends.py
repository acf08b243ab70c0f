"""What a Trace built from spans gets beyond its spans: the conversation's ends and structured mapping notes.

Both follow the offline runner's rules, so a live trace and an offline one read the same:

* a trace whose spans recorded no conversation (a decorator-only agent: ``@evaltrace.agent`` and tools, no LLM
  span) gets the user's turn and a final assistant message carrying its answer
  (:func:`~evaltrace.schema.conversation.conversation_ends`, which the offline runner applies to its case
  span); a trace rooted at one step (a tool call, a retrieval, an embedding) is not a conversation and gets none;
* the mapping's notes (values cut at capture, malformed attributes skipped) go to ``extra["enrichment_errors"]``
  as ``{"enricher": "evaltrace.mapping", "error": <note>}``, the shape of a failed TraceEnricher's entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from evaltrace._internal import semconv as sc
from evaltrace.mapping._spans import is_tool
from evaltrace.schema.conversation import conversation_ends
from evaltrace.schema.trace import TraceMessage, TraceOutput

MAPPING_ENRICHER = "evaltrace.mapping"
"""The ``enricher`` of the mapping's own ``enrichment_errors`` entries."""
_STEP_KINDS = frozenset((sc.KIND_RETRIEVER, sc.KIND_EMBEDDING))


def with_conversation_ends(values: dict[str, Any], root: ReadableSpan, root_attrs: Mapping[str, Any]) -> None:
    """Complete ``values["messages"]`` (the Trace's field values, built) in place where the spans left ends out.

    Not for a root that is one step (a tool call, a retrieval, an embedding): its input is arguments or a query,
    no user's turn, and its result is no answer to one.
    """
    messages = completed_messages(values["input"], values["messages"], values["output"], root, root_attrs)
    if messages is not None:
        values["messages"] = messages


def completed_messages(
    given: Mapping[str, Any],
    messages: list[TraceMessage],
    output: TraceOutput,
    root: ReadableSpan,
    root_attrs: Mapping[str, Any],
) -> list[TraceMessage] | None:
    """The messages with the conversation's missing ends added, or None when none is missing or due.

    Args:
        given: The Trace's input.
        messages: The Trace's messages as the spans recorded them.
        output: The Trace's output (its final answer closes the conversation).
        root: The root span.
        root_attrs: The root span's attributes.

    Returns:
        A new completed list, or None (nothing to add, or a root that is one step).
    """
    if is_tool(root, root_attrs) or root_attrs.get(sc.EVALTRACE_SPAN_KIND) in _STEP_KINDS:
        return None
    return conversation_ends(given, messages, output.final_answer)


def mapping_errors(notes: list[str]) -> list[dict[str, str]]:
    """The mapping's notes as ``enrichment_errors`` entries."""
    return [{"enricher": MAPPING_ENRICHER, "error": note} for note in notes]
