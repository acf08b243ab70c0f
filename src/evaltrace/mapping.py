"""ReadableSpans of one trace (or one subtree) -> ``schema.Trace``: the only reader of span attributes.

Rules (DESIGN.md section 4, data-model.md part A), where the spec left a choice:

* Messages come from the LLM spans in start order. A call's input usually repeats the conversation so far;
  only the part after the prefix the conversation already holds is appended. That prefix is the longer of
  (a) the longest input prefix found in order in the conversation, gaps allowed (a context window dropped old
  messages), whose match reaches the conversation's last message, and (b) the longest input prefix equal to
  the conversation's beginning (a retry or a fan-out from the same history). A call with
  ``gen_ai.request.previous_response.id`` sends only new items, so only its already-seen system messages are
  skipped. Messages are compared without ``thinking`` (providers do not send reasoning back) and without the
  tool name of tool messages. Output messages are always appended.
* One tool call per assistant message: a message with several ``tool_call`` parts becomes several messages
  (the first also carries the text and reasoning). ``tool_call_response`` parts become ``tool`` messages.
  Tool arguments that are not a JSON object are kept as ``{"_raw": <value>}``; tool results that are neither a
  string nor an object are kept as their JSON text. Media and unknown parts make the message content
  ``{"parts": [...]}`` (blob bytes replaced by their length). ``<think>...</think>`` blocks inlined in assistant
  text are moved to ``thinking``.
* Tool spans: without LLM spans each one becomes an assistant tool-call message plus a tool result message.
  With LLM spans a tool span is matched to a call (by call id, else name and arguments) and stamps its
  ``started_at``; its result is inserted only when no tool message already answers the call. An unmatched
  tool span (called by application code) is appended as a call plus result at its place in time.
* Trace fields: ``input`` is the root's ``input.value`` (a non-object wrapped as ``{"input": value}``);
  ``final_answer`` the root's output when it is a string, else the last assistant text, else the JSON text of
  a non-object output; ``structured`` the root's output when it is an object; ``thinking`` all reasoning
  joined by blank lines. Run, case and variant come from the root's ``evaltrace.*`` attributes (else from the
  first span of the subtree that has them), else the live defaults.
* Metrics: token and cost sums over LLM spans (None when no span reports one). Streaming: first/last chunk
  latency from the first streamed call, ``tokens_per_second`` the mean over streamed calls, chunks summed,
  ``stream_completed`` true only if every streamed call completed.
* Values cut at capture (the truncation marker of ``_internal.jsonutil``) are kept as they are and noted in
  ``extra["enrichment_errors"]``; malformed or foreign attributes are skipped with a note, never raised. JSON
  nested deeper than 64 levels, and non-finite numbers, are kept as text so the Trace always serialises.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, StatusCode

from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import TRUNCATED_KEY
from evaltrace.schema import Role, ToolCall, Trace, TraceError, TraceMessage, TraceMetrics, TraceOutput

__all__ = ["trace_from_spans"]

_MISSING: Any = object()
_LLM_OPERATIONS = frozenset({sc.OP_CHAT, "text_completion", "generate_content"})
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "system": "system",
    "developer": "system",
    "function": "tool",
}
_THINK = re.compile(r"<think>(.*?)</think>\s*", re.DOTALL)
_MAX_DEPTH = 64
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def trace_from_spans(spans: Sequence[ReadableSpan], root: ReadableSpan | int | str | None = None) -> Trace:
    """Build the Trace of one trace, or of the subtree under ``root``, from finished spans.

    Args:
        spans: Spans of one trace, in any order (other traces' spans are ignored).
        root: The root span, or its span id (int or 16-hex string); only it and its descendants are read.
            None selects the span whose parent is not among ``spans`` (the earliest if several).

    Returns:
        The Trace. Live defaults apply when the root carries no ``evaltrace.run_id`` / ``case_id`` /
        ``variant``: run_id ``"live"``, case_id the 32-hex trace id, variant_name the resource's service name.

    Raises:
        ValueError: ``spans`` is empty, or ``root`` is an id not found among them.
    """
    root_span = _select_root(spans, root)
    selected = _subtree(spans, root_span)
    notes: list[str] = []
    llm_spans = [s for s in selected if _is_llm(s)]
    builder = _Conversation(notes)
    for span in selected:
        if _is_llm(span):
            builder.add_llm_span(span)
        elif _is_tool(span):
            builder.add_tool_span(span)
    messages = builder.finish()
    root_ctx = _context(root_span)
    extra: dict[str, Any] = {
        "trace_id": format(root_ctx.trace_id if root_ctx else 0, "032x"),
        "span_id": format(root_ctx.span_id if root_ctx else 0, "016x"),
    }
    run_id, case_id, variant = _identity(root_span, selected, extra["trace_id"])
    started = _time(root_span.start_time)
    trace = Trace(
        run_id=run_id,
        case_id=case_id,
        variant_name=variant,
        started_at=started,
        finished_at=_time(root_span.end_time) if root_span.end_time else started,
        input=_input(root_span, notes),
        output=_output(root_span, messages, notes),
        messages=messages,
        metrics=_metrics(llm_spans),
        error=_error(root_span),
        extra=extra,
    )
    if notes:
        trace.extra["enrichment_errors"] = notes
    return trace


# --- span selection ------------------------------------------------------------------------------------


def _context(span: ReadableSpan) -> SpanContext | None:
    ctx: SpanContext | None = span.context
    return ctx


def _span_id(span: ReadableSpan) -> int:
    ctx = _context(span)
    return ctx.span_id if ctx else 0


def _select_root(spans: Sequence[ReadableSpan], root: ReadableSpan | int | str | None) -> ReadableSpan:
    if isinstance(root, ReadableSpan):
        return root
    if not spans:
        raise ValueError("trace_from_spans needs at least one span")
    if root is not None:
        wanted = int(root, 16) if isinstance(root, str) else root
        for span in spans:
            if _span_id(span) == wanted:
                return span
        raise ValueError(f"root span {root!r} is not among the {len(spans)} given spans")
    ids = {_span_id(s) for s in spans}
    tops = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    return min(tops or spans, key=lambda s: s.start_time or 0)


def _subtree(spans: Sequence[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    """Return ``root`` and its descendants among ``spans``, ordered by start time."""
    root_ctx = _context(root)
    trace_id = root_ctx.trace_id if root_ctx else None
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        ctx = _context(span)
        if span.parent is not None and (ctx is None or ctx.trace_id == trace_id):
            children.setdefault(span.parent.span_id, []).append(span)
    found: dict[int, ReadableSpan] = {}
    stack = [root]
    while stack:
        span = stack.pop()
        if _span_id(span) in found:
            continue
        found[_span_id(span)] = span
        stack.extend(children.get(_span_id(span), ()))
    return sorted(found.values(), key=lambda s: s.start_time or 0)


def _attrs(span: ReadableSpan) -> Mapping[str, Any]:
    return span.attributes or {}


def _is_llm(span: ReadableSpan) -> bool:
    attrs = _attrs(span)
    kind = attrs.get(sc.EVALTRACE_SPAN_KIND)
    if kind is not None:
        return bool(kind == sc.KIND_LLM)
    if attrs.get(sc.GEN_AI_OPERATION_NAME) in _LLM_OPERATIONS:
        return True
    return sc.GEN_AI_INPUT_MESSAGES in attrs or sc.GEN_AI_OUTPUT_MESSAGES in attrs


def _is_tool(span: ReadableSpan) -> bool:
    attrs = _attrs(span)
    return (
        attrs.get(sc.EVALTRACE_SPAN_KIND) == sc.KIND_TOOL or attrs.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL
    )


# --- attribute values ----------------------------------------------------------------------------------


def _time(ns: int | None) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=(ns or 0) // 1000)


def _is_truncated(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and value.get(TRUNCATED_KEY) is True


def _json_attr(span: ReadableSpan, key: str, notes: list[str]) -> Any:
    """Return the parsed JSON value of ``key`` (text kept when it is not JSON), or ``_MISSING``."""
    raw = _attrs(span).get(key)
    if raw is None:
        return _MISSING
    if isinstance(raw, str):
        text_mime = key == sc.INPUT_VALUE and _attrs(span).get(sc.INPUT_MIME_TYPE) == sc.MIME_TEXT
        text_mime = text_mime or (key == sc.OUTPUT_VALUE and _attrs(span).get(sc.OUTPUT_MIME_TYPE) == sc.MIME_TEXT)
        value = raw if text_mime else _loads(raw)
    elif isinstance(raw, Mapping):
        value = dict(raw)
    elif isinstance(raw, Sequence) and not isinstance(raw, bytes):
        value = list(raw)
    else:
        value = raw
    if _is_truncated(value):
        notes.append(
            f"{key} of span {span.name!r} ({_span_id(span):016x}) was truncated at capture "
            f"(original length {value.get('original_length')})"
        )
    return value


def _finite(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def _loads(text: str) -> Any:
    """Parse JSON text; text that is not JSON is returned as is, and non-finite numbers stay text."""
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=str)
    except (ValueError, RecursionError):
        return text
    return value if _shallow(value) else text


def _shallow(value: Any) -> bool:
    """Whether ``value`` nests at most ``_MAX_DEPTH`` deep (pydantic refuses to serialise deeper values)."""
    level: list[Any] = [value]
    for _ in range(_MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return True
    return False


def _number(span: ReadableSpan, key: str) -> float | None:
    value = _attrs(span).get(key)
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _sum(spans: Iterable[ReadableSpan], key: str) -> float | None:
    values = [v for s in spans if (v := _number(s, key)) is not None]
    return sum(values) if values else None


def _sum_int(spans: Iterable[ReadableSpan], key: str) -> int | None:
    total = _sum(spans, key)
    return None if total is None else int(total)


def _arguments(value: Any) -> dict[str, Any]:
    if value is None or value is _MISSING:
        return {}
    if isinstance(value, str):
        parsed = _loads(value) if value.strip() else {}
        return parsed if isinstance(parsed, dict) else {"_raw": value}
    return value if isinstance(value, dict) else {"_raw": value}


def _tool_content(value: Any) -> dict[str, Any] | str:
    if isinstance(value, dict | str):
        return value
    return "" if value is None else _compact(value)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# --- conversation --------------------------------------------------------------------------------------


def _key(message: TraceMessage) -> str:
    """Identity of a message when deciding whether a call's input repeats it."""
    call = message.tool_call
    ident: list[Any] = [message.role, message.content, message.tool_call_id]
    if call is not None:
        ident.append([call.id, call.name, call.arguments])
    return json.dumps(ident, sort_keys=True, default=str)


class _Conversation:
    """Accumulates messages from LLM and tool spans in start order."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.messages: list[TraceMessage] = []
        self.tool_names: dict[str, str] = {}
        self.matched: set[int] = set()
        self.pending: list[tuple[ToolCall, Any]] = []
        self._key_cache: dict[int, str] = {}  # id() of messages in self.messages, which keeps them alive

    def _keys(self) -> list[str]:
        return [self._key_cache.setdefault(id(m), _key(m)) for m in self.messages]

    def add_llm_span(self, span: ReadableSpan) -> None:
        system = self._system(span)
        inputs = self._messages(span, sc.GEN_AI_INPUT_MESSAGES, "user")
        if isinstance(_attrs(span).get(sc.GEN_AI_REQUEST_PREVIOUS_RESPONSE_ID), str):
            # The provider keeps the history (Responses API): the input holds only new items.
            known = set(self._keys())
            self.messages.extend([m for m in system if _key(m) not in known] + inputs)
        else:
            candidate = system + inputs
            self.messages.extend(candidate[self._repeated_prefix(candidate) :])
        self.messages.extend(self._messages(span, sc.GEN_AI_OUTPUT_MESSAGES, "assistant"))

    def _repeated_prefix(self, candidate: list[TraceMessage]) -> int:
        """Return how many leading messages of a call's input the conversation already holds.

        The larger of: the longest input prefix found in order in the conversation (gaps allowed, for context
        windows that drop old messages) whose match reaches the conversation's last message (the input caught
        up with everything so far), and the longest input prefix equal to the conversation's beginning (a retry
        or a fan-out from the same history).
        """
        keys = self._keys()
        wanted = [_key(m) for m in candidate]
        caught_up = position = 0
        for count, key in enumerate(wanted, start=1):
            if key not in keys[position:]:
                break
            position = keys.index(key, position) + 1
            caught_up = count if position == len(keys) else caught_up
        shared = 0
        while shared < min(len(keys), len(wanted)) and keys[shared] == wanted[shared]:
            shared += 1
        return max(caught_up, shared)

    def _system(self, span: ReadableSpan) -> list[TraceMessage]:
        value = _json_attr(span, sc.GEN_AI_SYSTEM_INSTRUCTIONS, self.notes)
        if value is _MISSING:
            return []
        if isinstance(value, str) or _is_truncated(value):
            return [TraceMessage(role="system", content=value)]
        if not isinstance(value, list):
            self._note(span, sc.GEN_AI_SYSTEM_INSTRUCTIONS, "is not a JSON array of parts")
            return []
        return self._convert("system", value, None)

    def _messages(self, span: ReadableSpan, key: str, default_role: Role) -> list[TraceMessage]:
        value = _json_attr(span, key, self.notes)
        if value is _MISSING:
            return []
        if _is_truncated(value):
            return [TraceMessage(role=default_role, content=value)]
        if not isinstance(value, list):
            self._note(span, key, "is not a JSON array of messages")
            return []
        out: list[TraceMessage] = []
        for item in value:
            if not isinstance(item, dict):
                self._note(span, key, f"has a message that is not an object: {str(item)[:80]!r}")
                continue
            role = _ROLES.get(str(item.get("role")), default_role)
            parts = item.get("parts")
            if parts is None and "content" in item:  # older {"role", "content"} shape
                parts = [{"type": "text", "content": item["content"]}]
            name = item.get("name") if isinstance(item.get("name"), str) else None
            out.extend(self._convert(role, parts if isinstance(parts, list) else [], name))
        return out

    def _convert(self, role: Role, parts: list[Any], name: str | None) -> list[TraceMessage]:
        texts, reasoning, calls, results, others = _split_parts(parts)
        if role == "assistant":
            texts, inline = _strip_think(texts)
            reasoning += inline
        out = [self._tool_message(part, name) for part in results]
        if role == "tool" and not results and texts:
            out.append(TraceMessage(role="tool", name=name, content="\n".join(texts)))
            return out
        content: str | dict[str, Any] | None = "\n".join(texts) if texts else None
        if others:
            content = {"parts": others}
        thinking = "\n".join(reasoning) if reasoning else None
        tool_calls = [self._tool_call(part) for part in calls]
        if content is not None or thinking is not None or tool_calls:
            first = tool_calls[0] if tool_calls else None
            out.append(TraceMessage(role=role, content=content, thinking=thinking, tool_call=first, name=name))
            out.extend(TraceMessage(role=role, tool_call=call) for call in tool_calls[1:])
        return out

    def _tool_call(self, part: dict[str, Any]) -> ToolCall:
        call_id = part.get("id") if isinstance(part.get("id"), str) else None
        name = str(part.get("name") or "")
        if call_id:
            self.tool_names[call_id] = name
        return ToolCall(id=call_id, name=name, arguments=_arguments(part.get("arguments")))

    def _tool_message(self, part: dict[str, Any], name: str | None) -> TraceMessage:
        call_id = part.get("id") if isinstance(part.get("id"), str) else None
        tool_name = self.tool_names.get(call_id or "", name)
        return TraceMessage(
            role="tool", name=tool_name, tool_call_id=call_id, content=_tool_content(part.get("response"))
        )

    def add_tool_span(self, span: ReadableSpan) -> None:
        attrs = _attrs(span)
        name = attrs.get(sc.GEN_AI_TOOL_NAME)
        name = name if isinstance(name, str) else span.name.removeprefix(f"{sc.OP_EXECUTE_TOOL} ")
        call_id = attrs.get(sc.GEN_AI_TOOL_CALL_ID)
        call_id = call_id if isinstance(call_id, str) else None
        args = _json_attr(span, sc.GEN_AI_TOOL_CALL_ARGUMENTS, self.notes)
        if args is _MISSING:
            args = _json_attr(span, sc.INPUT_VALUE, self.notes)
        result = _json_attr(span, sc.GEN_AI_TOOL_CALL_RESULT, self.notes)
        if result is _MISSING:
            result = _json_attr(span, sc.OUTPUT_VALUE, self.notes)
        if result is _MISSING and span.status.status_code is StatusCode.ERROR:
            result = {"error": span.status.description or "tool raised"}
        call = ToolCall(id=call_id, name=name, arguments=_arguments(args), started_at=_time(span.start_time))
        matched = self._match(call)
        if matched is not None:
            matched.started_at = call.started_at
            self.pending.append((matched, result))
            return
        self.messages.append(TraceMessage(role="assistant", tool_call=call))
        if result is not _MISSING:
            content = _tool_content(result)
            self.messages.append(TraceMessage(role="tool", name=name, tool_call_id=call_id, content=content))

    def _match(self, call: ToolCall) -> ToolCall | None:
        """Find the unmatched assistant tool call a tool span executed: same id, else same name and arguments."""
        candidates = [
            m.tool_call
            for m in self.messages
            if m.role == "assistant" and m.tool_call is not None and id(m.tool_call) not in self.matched
        ]
        found = next((c for c in candidates if call.id and c.id == call.id), None)
        if found is None:
            found = next(
                (
                    c
                    for c in candidates
                    if c.name == call.name and c.arguments == call.arguments and not (c.id and call.id)
                ),
                None,
            )
        if found is not None:
            self.matched.add(id(found))
        return found

    def finish(self) -> list[TraceMessage]:
        """Insert the results of executed calls that no tool message answers; return the messages."""
        for call, result in self.pending:
            index = next((i for i, m in enumerate(self.messages) if m.tool_call is call), None)
            if result is _MISSING or index is None:
                continue
            if any(m.role == "tool" and _answers(m, call) for m in self.messages[index + 1 :]):
                continue
            after = index + 1
            while after < len(self.messages) and self.messages[after].role == "tool":
                after += 1
            message = TraceMessage(role="tool", name=call.name, tool_call_id=call.id, content=_tool_content(result))
            self.messages.insert(after, message)
        return self.messages

    def _note(self, span: ReadableSpan, key: str, problem: str) -> None:
        self.notes.append(f"{key} of span {span.name!r} ({_span_id(span):016x}) {problem}; ignored")


def _answers(message: TraceMessage, call: ToolCall) -> bool:
    return message.tool_call_id == call.id if call.id else message.name == call.name


def _split_parts(
    parts: list[Any],
) -> tuple[list[str], list[str], list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    """Sort message parts into texts, reasoning texts, tool calls, tool responses and everything else."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    others: list[Any] = []
    parts = [p for p in parts if isinstance(p, dict | str)]  # null or numeric parts carry nothing
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "reasoning":
            reasoning.append(str(part.get("content") or ""))
        elif kind == "tool_call":
            calls.append(part)
        elif kind == "tool_call_response":
            results.append(part)
        else:
            others.append(part)
    if others:  # a media message keeps its text parts in place among the others
        skip = {"reasoning", "tool_call", "tool_call_response"}
        others = [_other_part(p) for p in parts if not (isinstance(p, dict) and p.get("type") in skip)]
    return texts, reasoning, calls, results, others


def _strip_think(texts: list[str]) -> tuple[list[str], list[str]]:
    """Move ``<think>...</think>`` blocks that some models inline in their text out of it."""
    kept: list[str] = []
    thoughts: list[str] = []
    for text in texts:
        found = _THINK.findall(text)
        thoughts.extend(t.strip() for t in found)
        stripped = _THINK.sub("", text) if found else text
        if stripped or not found:
            kept.append(stripped)
    return kept, thoughts


def _other_part(part: Any) -> Any:
    if isinstance(part, dict) and part.get("type") == "blob" and isinstance(part.get("content"), str):
        return {**part, "content": f"<{len(part['content'])} base64 characters>"}
    return part


# --- trace-level fields --------------------------------------------------------------------------------


def _identity(root: ReadableSpan, spans: list[ReadableSpan], trace_id: str) -> tuple[str, str, str]:
    def first(key: str) -> str | None:
        for span in (root, *spans):
            value = _attrs(span).get(key)
            if isinstance(value, str) and value:
                return value
        return None

    service = root.resource.attributes.get(sc.SERVICE_NAME) if root.resource else None
    return (
        first(sc.EVALTRACE_RUN_ID) or "live",
        first(sc.EVALTRACE_CASE_ID) or trace_id,
        first(sc.EVALTRACE_VARIANT) or (str(service) if service else "unknown_service"),
    )


def _input(root: ReadableSpan, notes: list[str]) -> dict[str, Any]:
    value = _json_attr(root, sc.INPUT_VALUE, notes)
    if value is _MISSING:
        return {}
    return value if isinstance(value, dict) else {"input": value}


def _output(root: ReadableSpan, messages: list[TraceMessage], notes: list[str]) -> TraceOutput:
    value = _json_attr(root, sc.OUTPUT_VALUE, notes)
    last = next((m.content for m in reversed(messages) if m.role == "assistant" and isinstance(m.content, str)), None)
    thinking = "\n\n".join(m.thinking for m in messages if m.thinking) or None
    if isinstance(value, str):
        return TraceOutput(final_answer=value, thinking=thinking)
    structured = value if isinstance(value, dict) and not _is_truncated(value) else None
    if last is None and value not in (_MISSING, None) and structured is None and not _is_truncated(value):
        last = _compact(value)
    return TraceOutput(final_answer=last, thinking=thinking, structured=structured)


def _metrics(llm_spans: list[ReadableSpan]) -> TraceMetrics:
    streamed = [
        s
        for s in llm_spans
        if sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK in _attrs(s) or sc.EVALTRACE_STREAM_CHUNKS in _attrs(s)
    ]
    first = streamed[0] if streamed else None
    ttfc = _number(first, sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK) if first else None
    ttlc = _number(first, sc.EVALTRACE_STREAM_TIME_TO_LAST_CHUNK) if first else None
    rates = [r for s in streamed if (r := _number(s, sc.EVALTRACE_STREAM_OUTPUT_TOKENS_PER_SECOND)) is not None]
    completed = [v for s in streamed if isinstance(v := _attrs(s).get(sc.EVALTRACE_STREAM_COMPLETED), bool)]
    return TraceMetrics(
        token_input=_sum_int(llm_spans, sc.GEN_AI_USAGE_INPUT_TOKENS),
        token_output=_sum_int(llm_spans, sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        token_thinking=_sum_int(llm_spans, sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
        cost_usd=_sum(llm_spans, sc.EVALTRACE_COST_USD),
        cost_thinking_usd=_sum(llm_spans, sc.EVALTRACE_COST_THINKING_USD),
        latency_first_token_ms=None if ttfc is None else round(ttfc * 1000),
        latency_last_token_ms=None if ttlc is None else round(ttlc * 1000),
        tokens_per_second=sum(rates) / len(rates) if rates else None,
        stream_chunks=_sum_int(streamed, sc.EVALTRACE_STREAM_CHUNKS),
        stream_completed=all(completed) if completed else None,
    )


def _error(root: ReadableSpan) -> TraceError | None:
    if root.status.status_code is not StatusCode.ERROR:
        return None
    events = [e for e in root.events if e.name == sc.EXCEPTION_EVENT]
    event_attrs: Mapping[str, Any] = (events[-1].attributes or {}) if events else {}
    exc_type, exc_message = event_attrs.get(sc.EXCEPTION_TYPE), event_attrs.get(sc.EXCEPTION_MESSAGE)
    from_event = f"{exc_type}: {exc_message}" if exc_type and exc_message else (exc_message or exc_type)
    stack = event_attrs.get(sc.EXCEPTION_STACKTRACE) or _attrs(root).get(sc.EVALTRACE_EXCEPTION_STACK)
    return TraceError(
        type="exception",
        message=str(root.status.description or from_event or "error"),
        stack=str(stack) if stack else None,
    )
