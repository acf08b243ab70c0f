"""The stream accumulator of a streamed interaction (``interactions.create(stream=True)``): events in, one ``Outcome`` out.

The stream (``stream=True``): ``interaction.created`` (id, model), ``step.start`` / ``step.delta`` / ``step.stop``
per step index (``text``, ``thought_summary``, ``arguments_delta`` fragments, a server tool's ``*_call`` /
``*_result`` delta with its arguments or result, as the whole interaction's step holds them; signatures ignored), and
``interaction.completed`` (status and usage), the terminal signal; an ``error`` event fails the span.
Each streamed step is read back as the whole interaction would hold it, through ``interactions.step_parts``, so
whole and streamed record the same parts.
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Outcome, Summary
from evaltrace._internal.openai.parts import Part, field, text_part, tool_call_part
from evaltrace.instrumentation.google_genai.interactions import (
    CONTENT_TYPES,
    citations_of,
    content_part,
    failure_of,
    outcome_of,
    step_parts,
    summary_of,
    thought_parts,
)


def _is_server_tool(kind: Any) -> bool:
    """A step (or delta) type of the API's own tools: ``google_search_call``, ``url_context_result``..."""
    return isinstance(kind, str) and kind.endswith(("_call", "_result")) and not kind.startswith("function_")


class _Step:
    __slots__ = ("annotations", "fragments", "media", "start", "thoughts", "tool")

    def __init__(self, start: Any) -> None:
        self.start = start  # the step as step.start announced it (type, and id / name for a call)
        self.fragments: list[str] = []  # text, or a call's argument JSON
        self.thoughts: list[str] = []
        self.media: list[Part] = []  # image / audio / video / document deltas of a model output (or a thought)
        self.tool: dict[str, Any] = {}  # a server tool step's streamed ``arguments`` / ``result``
        self.annotations: list[Any] = []  # a model output's text annotations (its citations)

    def add(self, delta: Any) -> bool:
        """Fold one ``step.delta``'s delta in; True when it carries output."""
        delta_type = field(delta, "type")
        if delta_type == "text" or (delta_type is None and isinstance(field(delta, "text"), str)):
            self.fragments.append(str(field(delta, "text") or ""))
            return True
        if delta_type in CONTENT_TYPES:  # a media item of the answer, whole in one delta
            part = content_part(delta)
            if part is not None:
                self.media.append(part)
            return part is not None
        if delta_type == "arguments_delta":
            self.fragments.append(str(field(delta, "arguments") or ""))
            return True
        summary = field(delta, "content")
        text = field(summary, "text")
        if isinstance(text, str):  # a thought summary
            self.thoughts.append(text)
            return True
        if delta_type == "thought_summary" and field(summary, "type") in CONTENT_TYPES:  # a thought's image
            part = content_part(summary)
            if part is not None:
                self.media.append(part)
            return part is not None
        if _is_server_tool(delta_type):  # a server tool's arguments or result (the SDK's ``*CallDelta``...)
            return self.add_tool(delta)
        if delta_type == "text_annotation_delta":  # what the text cites: no output of its own
            self.annotations.extend(field(delta, "annotations") or ())
        return False

    def add_tool(self, delta: Any) -> bool:
        """A server tool delta: its ``arguments`` (a call) or ``result``; True when it carried either.

        An MCP tool's delta also names the tool and its server (``name``, ``server_name``), kept for the part.

        The SDK types each as a whole value (``GoogleSearchCallDelta.arguments`` is the whole arguments object);
        should a step get several deltas, a result list is extended (pieces of one list) and anything else is
        replaced by the later value.
        """
        carried = False
        for key in ("name", "server_name"):  # an MCP tool's, which its delta repeats: kept, not output by itself
            value = field(delta, key)
            if value is not None:
                self.tool[key] = value
        for key in ("arguments", "result"):
            value = field(delta, key)
            if value is None:
                continue
            previous = self.tool.get(key)
            self.tool[key] = previous + value if isinstance(previous, list) and isinstance(value, list) else value
            carried = True
        return carried

    def parts(self) -> list[Part]:
        kind = field(self.start, "type")
        if kind == "thought":
            return thought_parts("".join(self.thoughts), list(self.media))
        if kind == "model_output":
            text = "".join(self.fragments)
            if not text:
                return list(self.media)
            part = text_part(text)
            cited = citations_of(self.annotations)
            if cited:  # as the whole interaction's text item holds them
                part["citations"] = cited
            return [part, *self.media]
        if kind == "function_call":
            arguments: Any = "".join(self.fragments)
            if not arguments:
                arguments = field(self.start, "arguments") or {}
            return [tool_call_part(field(self.start, "id"), field(self.start, "name"), arguments)]
        if self.tool:
            # The step as the whole interaction would hold it, so that both read through ``step_parts`` alike.
            start = self.start
            whole = {"type": kind, "id": field(start, "id"), "call_id": field(start, "call_id"),
                     "name": field(start, "name"), "server_name": field(start, "server_name"),
                     "arguments": field(start, "arguments"), "result": field(start, "result"), **self.tool}  # fmt: skip
            return step_parts(whole)
        return step_parts(self.start)


class InteractionStreamAccumulator:
    """Accumulates the SSE events of one streamed ``create`` request. ``add`` is O(1) per event."""

    __slots__ = ("completed", "error", "interaction", "steps")

    def __init__(self) -> None:
        self.steps: dict[int, _Step] = {}
        self.interaction: Any = None  # the latest interaction the events described (created, then completed)
        self.completed = False
        self.error: Any = None

    def add(self, event: Any) -> bool:
        """Fold one event in; True when it carries output (text, a thought, call arguments)."""
        if self.completed:  # a continuation's next hop, read through this stream: that request's, not ours
            return False
        kind = field(event, "event_type")
        if kind == "step.delta":
            step = self.steps.get(field(event, "index") or 0)
            delta = field(event, "delta")
            if step is None or delta is None:
                return False
            return step.add(delta)
        if kind == "step.start":
            self.steps[field(event, "index") or 0] = _Step(field(event, "step"))
        elif kind in ("interaction.created", "interaction.completed"):
            self.interaction = field(event, "interaction")
            self.completed = self.completed or kind == "interaction.completed"
        elif kind == "error":
            self.error = field(event, "error") or event
        return False

    def end_reason(self) -> str:
        """``exhausted`` only with ``interaction.completed``; an error makes it ``error``."""
        if self.failure() is not None:
            return sc.STREAM_END_ERROR
        return sc.STREAM_END_EXHAUSTED if self.completed else sc.STREAM_END_TRUNCATED

    def failure(self) -> tuple[str, str] | None:
        """An ``error`` event, or a ``failed`` interaction."""
        if self.error is not None:
            code = field(self.error, "code")
            message = field(self.error, "message")
            return (str(code) if code is not None else sc.ERROR_TYPE_OTHER), str(message or code or "error")
        return failure_of(self.interaction) if self.interaction is not None else None

    def outcome(self, content: bool = True) -> Outcome:
        """What the events so far amount to: the steps in index order."""
        parts = [p for i in sorted(self.steps) for p in self.steps[i].parts()] if content else None
        status = field(self.interaction, "status") if self.completed else None
        return outcome_of(self.interaction, parts, status)

    def summary(self) -> Summary:
        """Model and token counts only."""
        return summary_of(self.interaction)
