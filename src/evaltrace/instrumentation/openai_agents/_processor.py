"""``EvaltraceTracingProcessor``: the Agents SDK's traces and spans, as OTel spans on evaltrace's provider.

Each SDK trace becomes an ``invoke_workflow {name}`` span, each SDK span a child of its SDK parent's OTel span
(agent, tool, model call, handoff, guardrail, ...; see ``_attributes``). While an SDK span is open its OTel span
is the current OTel context, so what runs inside it (a function tool's body calling a decorated function, the
``openai`` client of a model call) nests under it.

No duplicate model spans: when ``instrument_openai()`` is on, a model call the SDK makes through the ``openai``
client already gets our OpenAI span (streaming timings, cost, full content), so the SDK's generation/response
span for it makes no span of its own: it only makes its parent's context current, and the OpenAI span lands under
the agent's span. Otherwise the SDK's span becomes the ``chat {model}`` span, with the LLM-suppression key set
inside it so that no other LLM instrumentation records the same call again.

Tool call ids: the SDK's function span has none, so each ``execute_tool`` span takes the id of the call the model
asked for (same tool and arguments), kept per SDK trace until that trace ends. A human-in-the-loop resume
(``Runner.run(agent, state)``) outside an outer ``with trace(...)`` runs in a new SDK trace, after the first run's
trace ended and its calls were dropped: the resumed tool span then has no ``gen_ai.tool.call.id`` (never a wrong
one). Wrap the run and its resumes in one ``with trace(...)`` to keep the id. A handoff span takes the id of
the model's call of its transfer tool as the SDK's ``execute_handoffs`` runs it, else the same way, by the
handoff's tool name.

Agent spans also carry the run's Agents ``Session`` id (``_sessions``) and the summed token counts of the model
calls under them (counts only the LLM spans add to a total).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import Token
from types import SimpleNamespace
from typing import Any

import agents
from agents import OpenAIResponsesModel
from agents.tracing import TracingProcessor
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context

from evaltrace._internal import semconv as sc
from evaltrace._internal import settings
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.fast_context import attach, detach, get_current
from evaltrace._internal.jsonutil import capped_json, capped_text, loads_or_raw
from evaltrace._internal.openai.parts import field
from evaltrace._internal.tracing import LLM_SUPPRESSION_KEYS, get_tracer
from evaltrace.instrumentation.openai_agents import _attributes as attributes
from evaltrace.instrumentation.openai_agents._sessions import current_session_id, session_attributes

# Set inside a model span we record: other LLM instrumentations (ours included) then record no second span.
_SUPPRESS_LLM_KEY = LLM_SUPPRESSION_KEYS[2]


class _Open:
    """An SDK span or trace we are following: its OTel span (None: passed through) and its children's context."""

    __slots__ = ("asked", "attached", "calls", "context", "parent", "session", "span", "token")

    def __init__(self, span: Span | None, context: Context, parent: _Open | None = None) -> None:
        self.span = span
        self.context = context
        self.parent = parent
        self.token: Token[Context] | None = None
        self.attached: Context | None = None
        self.asked = True  # no input.value to set, or set already; False on workflow and agent spans until set
        self.session: str | None = None  # the Agents Session id recorded on it (workflow spans)
        # Agent spans: the token counts of each model call made under it (None: a call that reported none).
        self.calls: list[dict[str, Any] | None] | None = None


def _openai_instrumented() -> bool:
    """Whether ``instrument_openai()`` is on (its instrumentor is a singleton)."""
    from evaltrace.instrumentation.openai import OpenAIInstrumentor

    return bool(OpenAIInstrumentor().is_instrumented_by_opentelemetry)


# The websocket transport's model; None on SDKs older than it (``openai-agents>=0.2`` is supported).
_WS_MODEL: type[Any] | None = getattr(agents, "OpenAIResponsesWSModel", None)

# How far up from ``on_span_start`` the SDK's model method is: the provider's and the span's own frames between.
_STREAM_FRAME_DEPTH = 8

# Why the SDK's own span stays a Responses call's model span (see ``_kept_model_call``).
_STREAM = "stream"
_WEBSOCKET = "websocket"
_WEBSOCKET_STREAM = "websocket stream"


def _kept_model_call() -> str | None:
    """Whether the Responses call starting now is one our OpenAI instrumentation cannot record, and why.

    ``_STREAM``: a streamed call of the SDK's ``OpenAIResponsesModel``, through
    ``responses.with_streaming_response.create()`` and ``parse()``, a stream our OpenAI instrumentation does not
    follow yet (its span would end with no output); a subclass of it too. ``_WEBSOCKET`` / ``_WEBSOCKET_STREAM``: a
    call of ``OpenAIResponsesWSModel`` (when the SDK has it), sent as a websocket frame, never through the ``openai`` client's HTTP methods, so
    no OpenAI span is made at all. Such a call keeps the SDK's span as its model span (and our OpenAI span, if
    any, is suppressed inside it). Bounded: a few frames up, once per model call.
    """
    frame = sys._getframe(1)
    for _ in range(_STREAM_FRAME_DEPTH):
        if frame is None:
            return None
        method = frame.f_code.co_name
        if method in ("stream_response", "get_response"):
            model = frame.f_locals.get("self")
            if _WS_MODEL is not None and isinstance(model, _WS_MODEL):
                return _WEBSOCKET_STREAM if method == "stream_response" else _WEBSOCKET
            if method == "stream_response" and isinstance(model, OpenAIResponsesModel):
                return _STREAM
            return None
        frame = frame.f_back  # type: ignore[assignment]  # None ends the walk above
    return None


# How far up from ``_handoff_call`` the SDK's ``execute_handoffs`` is (the span's exit and our frames between).
_HANDOFF_FRAME_DEPTH = 12


def _handoff_call(data: Any) -> tuple[str | None, str | None]:
    """The tool the model called for this handoff: its name and, when known, the call's id (None: unknown).

    Both read from the SDK's ``execute_handoffs`` (only that function's frame), which ends the span inside its
    ``with`` block while its ``actual_handoff`` is the handoff run: the handoff's tool name
    (``tool_name_override`` included) and the model's call of it (``tool_call.call_id``). Failing that, the
    SDK's default name for the agent handed to (``transfer_to_{agent}``) and no id. Bounded: a few frames up,
    once per handoff.
    """
    frame = sys._getframe(1)
    for _ in range(_HANDOFF_FRAME_DEPTH):
        if frame is None:
            break
        if frame.f_code.co_name == "execute_handoffs":
            run = frame.f_locals.get("actual_handoff")
            tool = getattr(getattr(run, "handoff", None), "tool_name", None)
            call_id = getattr(getattr(run, "tool_call", None), "call_id", None)
            if isinstance(tool, str) and tool:
                return tool, call_id if isinstance(call_id, str) and call_id else None
            break
        frame = frame.f_back  # type: ignore[assignment]  # None ends the walk above
    to_agent = getattr(data, "to_agent", None)
    default = agents.Handoff.default_tool_name(SimpleNamespace(name=str(to_agent))) if to_agent else None  # type: ignore[arg-type]
    return default, None


class EvaltraceTracingProcessor(TracingProcessor):
    """An Agents SDK ``TracingProcessor`` that records the SDK's traces as evaltrace OTel spans.

    Registered by :func:`evaltrace.instrument_openai_agents`; ``uninstrument_openai_agents()`` disables it (spans
    it started still end).
    """

    def __init__(self) -> None:
        self.enabled = True
        self._lock = threading.Lock()
        self._traces: dict[str, _Open] = {}
        self._spans: dict[str, _Open] = {}
        # Tool calls the model asked for, per SDK trace, for the call id of the function span that runs each
        # one (the SDK's function span data has no call id).
        self._calls: dict[str, list[_Call]] = {}
        # Run once nothing is open any more after ``enabled`` went False: unregisters the processor. Until then
        # it stays registered, so the spans it started still end.
        self.on_idle: Callable[[], None] | None = None

    def idle(self) -> bool:
        """Whether no SDK trace or span it follows is open."""
        return not self._traces and not self._spans

    def _maybe_idle(self) -> None:
        if not self.enabled and self.on_idle is not None and self.idle():
            on_idle, self.on_idle = self.on_idle, None
            on_idle()

    # --- traces -------------------------------------------------------------------------------------------

    def on_trace_start(self, trace: Any) -> None:
        """Start the workflow span of an SDK trace, under whatever OTel span is current."""
        if not self.enabled:
            return
        with handle_internal_errors("recording an Agents SDK trace"):
            exported = trace.export() or {}
            name, attrs = attributes.workflow_start(
                str(exported.get("workflow_name") or trace.name),
                exported.get("group_id"),
                exported.get("metadata"),
                str(trace.trace_id),
            )
            session_id = current_session_id()
            if session_id is not None:  # the run opened this trace: its session is the workflow's
                attrs.update(session_attributes(session_id))
            parent = get_current()
            span = get_tracer().start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attrs)
            entry = _Open(span, set_span_in_context(span, parent))
            entry.asked = False
            entry.session = session_id
            self._traces[trace.trace_id] = entry

    def on_trace_end(self, trace: Any) -> None:
        """End the workflow span (also after ``uninstrument``: every span we started ends exactly once)."""
        entry = self._traces.pop(trace.trace_id, None)
        self._calls.pop(trace.trace_id, None)
        if entry is not None and entry.span is not None:
            entry.span.end()
        with handle_internal_errors("unregistering the Agents SDK processor"):
            self._maybe_idle()

    # --- spans --------------------------------------------------------------------------------------------

    def on_span_start(self, span: Any) -> None:
        """Start the OTel span of an SDK span (or pass a duplicate model span through) and make it current."""
        if not self.enabled:
            return
        with handle_internal_errors("recording an Agents SDK span"):
            data = span.span_data
            parent_entry = self._spans.get(span.parent_id) if span.parent_id else None
            if parent_entry is None:
                parent_entry = self._traces.get(span.trace_id)
            parent = parent_entry.context if parent_entry is not None else get_current()
            is_model = data.type in attributes.MODEL_TYPES
            kept = _kept_model_call() if data.type == attributes.RESPONSE else None
            streamed = kept in (_STREAM, _WEBSOCKET_STREAM)
            if is_model and kept is None and attributes.calls_openai_client(data) and _openai_instrumented():
                entry = _Open(None, parent, parent_entry)  # our OpenAI span is this call's, under the parent's
            else:
                name, attrs = attributes.span_start(data)
                if streamed:
                    attrs[sc.GEN_AI_REQUEST_STREAM] = True
                session_id = current_session_id() if data.type == attributes.AGENT else None
                if session_id is not None:
                    attrs.update(self._agent_session(span.trace_id, session_id))
                kind = SpanKind.CLIENT if is_model else SpanKind.INTERNAL
                otel_span = get_tracer().start_span(name, context=parent, kind=kind, attributes=attrs)
                context = set_span_in_context(otel_span, parent)
                if is_model:
                    context = otel_context.set_value(_SUPPRESS_LLM_KEY, True, context)
                entry = _Open(otel_span, context, parent_entry)
                entry.asked = data.type != attributes.AGENT
                if data.type == attributes.AGENT:
                    entry.calls = []
            self._spans[span.span_id] = entry  # from here on_span_end ends it
            entry.attached = entry.context
            entry.token = attach(entry.context)

    def _agent_session(self, trace_id: str, session_id: str) -> dict[str, Any]:
        """The session attributes of an agent span whose run has Session ``session_id``.

        A trace has one ``session.id`` (evaluation and the local store each read one): the first run with a
        Session names it on the workflow. A run with another session in the same trace (an agent run as a tool
        with its own ``session=``, or a second run inside one ``with trace(...)``) names its session only as its
        agent's ``gen_ai.conversation.id``.
        """
        self._session_on_workflow(trace_id, session_id)
        workflow = self._traces.get(trace_id)
        on_trace = getattr(workflow.span, "attributes", None) if workflow is not None else None
        named = next((on_trace.get(key) for key in sc.SESSION_ID_KEYS if on_trace and on_trace.get(key)), None)
        if named is not None and named != session_id:
            return {sc.GEN_AI_CONVERSATION_ID: session_id}
        return session_attributes(session_id)

    def _session_on_workflow(self, trace_id: str, session_id: str) -> None:
        """Name the session on a workflow span opened before the run (``with trace(...)``), once, when it has none."""
        workflow = self._traces.get(trace_id)
        if workflow is None or workflow.span is None or workflow.session is not None:
            return
        workflow.session = session_id
        workflow.span.set_attributes(session_attributes(session_id, getattr(workflow.span, "attributes", None)))

    def on_span_end(self, span: Any) -> None:
        """Record what the SDK span learnt, end its OTel span and restore the context it replaced."""
        entry = self._spans.pop(span.span_id, None)
        if entry is None:
            return
        otel_span = entry.span
        try:
            with handle_internal_errors("recording an Agents SDK span"):
                self._restore(entry)
                self._record_end(span, entry)
        finally:  # ended exactly once, whatever failed above
            if otel_span is not None:
                otel_span.end()
            with handle_internal_errors("unregistering the Agents SDK processor"):
                self._maybe_idle()

    def _record_end(self, span: Any, entry: _Open) -> None:
        """Set what the SDK span learnt while it ran on its OTel span (name, attributes, error)."""
        data = span.span_data
        current = settings.current
        if data.type in attributes.MODEL_TYPES:
            self._remember_calls(span.trace_id, span.parent_id, data)
            if current.capture_content:
                _ask(entry.parent, data)
            if not span.error:  # a failed call is in no agent's counts (it reports none, and used none we know of)
                _count_usage(entry.parent, attributes.usage_of(data))
        otel_span = entry.span
        if otel_span is None:
            return
        name, attrs = attributes.span_end(data, current.capture_content, current.max_attribute_length)
        if entry.calls is not None:  # an agent: its model calls' counts, summed (never on an LLM span: no double)
            attrs.update(attributes.invocation_usage(entry.calls))
        if data.type == attributes.FUNCTION:
            # A span with its arguments but no output and no error ran nothing (the call awaits approval; a
            # later span, in the resumed run, runs it) or its tool returned None: it names the call without
            # using it up.
            waits = data.input is not None and data.output is None and not span.error
            call_id = self._claim_call(span.trace_id, span.parent_id, str(data.name), data.input, keep=waits)
            if call_id is not None:
                attrs[sc.GEN_AI_TOOL_CALL_ID] = call_id
        elif data.type == attributes.HANDOFF:
            call_id = self._handoff_call_id(span)
            if call_id is not None:
                attrs[sc.GEN_AI_TOOL_CALL_ID] = call_id
        if name is not None:
            otel_span.update_name(name)
        otel_span.set_attributes(attrs)
        _record_error(otel_span, span.error, current.capture_content, current.max_attribute_length)

    def _restore(self, entry: _Open) -> None:
        """Detach the context attached at start, when it is still the current one here.

        The SDK starts and ends a span in the same task (``with`` blocks, or ``start``/``finish`` around its run
        loop), so it is; a span ended elsewhere leaves that other context untouched rather than resetting it.
        """
        token, entry.token = entry.token, None
        if token is not None and get_current() is entry.attached:
            try:
                detach(token)
            except (ValueError, RuntimeError):  # a token of another context (a task copied from this one)
                pass

    def _remember_calls(self, trace_id: str, step: str | None, data: Any) -> None:
        """Keep the tool calls a model call asked for, so the function spans that run them get their ids."""
        found: list[tuple[str, str, Any]] = []
        response = field(data, "response")
        _response_calls(response, found)
        for message in field(data, "output") or () if data.type == attributes.GENERATION else ():
            if field(message, "output") is not None:
                # A Response the SDK built from a Chat Completions-style reply (its streamed chat model, LiteLLM,
                # any-llm): the calls are its function_call items, not a chat message's tool_calls.
                _response_calls(message, found)
                continue
            for call in field(message, "tool_calls") or ():
                function = field(call, "function")
                found.append((str(field(call, "id")), str(field(function, "name")), field(function, "arguments")))
        if found:
            calls = [_Call(step, *call) for call in found]  # arguments parsed here, outside the lock
            with self._lock:
                self._calls.setdefault(trace_id, []).extend(calls)

    def _claim_call(self, trace_id: str, step: str | None, name: str, arguments: Any, keep: bool) -> str | None:
        """The id of the call of tool ``name`` this function span runs (with these arguments when both are known).

        A call asked for in the span's own step comes first, one no span has named yet before a named one: a
        call left unrun by an earlier step (a run that failed, or was abandoned, in the same trace) must not give
        this step its id. With none in its own step (a run resumed after an approval asks the model nothing
        before it runs the approved call), a named call comes first: the one that waited for approval, not a
        stale one. ``keep``: name the call but leave it unclaimed (the span ran nothing, or returned None).
        """
        wanted = _UNKNOWN if arguments is None else loads_or_raw(str(arguments))
        with self._lock:
            calls = self._calls.get(trace_id) or []
            best: tuple[bool, bool, int] | None = None
            for index, call in enumerate(calls):
                if call.name != name or not (wanted is _UNKNOWN or call.parsed is _UNKNOWN or wanted == call.parsed):
                    continue
                own = call.step == step
                key = (not own, call.named == own, index)
                if best is None or key < best:
                    best = key
                    if own and not call.named:  # nothing comes before the first unnamed call of its own step
                        break
            if best is None:
                return None
            call = calls[best[2]]
            if keep:
                call.named = True
            else:
                del calls[best[2]]
            return call.call_id

    def _handoff_call_id(self, span: Any) -> str | None:
        """The id of the model's call of the transfer tool this handoff span ran (None: unknown).

        As the SDK ran it when it can be read (the call is then used up), else matched as a function span's is,
        by tool name (a handoff's arguments are not on its span).
        """
        tool, call_id = _handoff_call(span.span_data)
        if call_id is not None:
            self._drop_call(span.trace_id, call_id)
            return call_id
        return self._claim_call(span.trace_id, span.parent_id, tool, None, keep=False) if tool else None

    def _drop_call(self, trace_id: str, call_id: str) -> None:
        """Use up the call ``call_id`` (a handoff's, known exactly): no later span may take its id."""
        with self._lock:
            calls = self._calls.get(trace_id)
            if calls:
                calls[:] = [call for call in calls if call.call_id != call_id]

    # --- lifecycle ----------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Nothing to release: the spans belong to evaltrace's provider, which shuts down with evaltrace."""

    def force_flush(self) -> None:
        """Nothing is queued here: each span goes to evaltrace's provider when it ends."""


class _Call:
    """A tool call a model call asked for, until the function span that runs it claims its id."""

    __slots__ = ("call_id", "name", "named", "parsed", "step")

    def __init__(self, step: str | None, call_id: str, name: str, arguments: Any) -> None:
        self.step = step  # the SDK parent of the model span: its turn, or its agent when there are no turn spans
        self.call_id = call_id
        self.name = name
        # The arguments the model sent, parsed once (_UNKNOWN: not recorded; any span's arguments match).
        self.parsed = _UNKNOWN if arguments is None else loads_or_raw(str(arguments))
        self.named = False  # given to a span that ran nothing (awaiting approval), still to claim


# A call's or a function span's arguments when unknown (content off, or not recorded): they match any.
_UNKNOWN: Any = object()


def _response_calls(response: Any, found: list[tuple[str, str, Any]]) -> None:
    """Append the function calls a Responses-shaped reply asked for: (call id, tool name, arguments text)."""
    for item in field(response, "output") or () if response is not None else ():
        if field(item, "type") == "function_call":
            found.append((str(field(item, "call_id")), str(field(item, "name")), field(item, "arguments")))


def _ask(entry: _Open | None, data: Any) -> None:
    """Set the question of a model call as ``input.value`` on the agent and workflow spans above it, once each.

    The SDK records no input on its agent spans or traces; the Trace's ``input`` (what a judge is asked about) is
    the root's ``input.value``, and the user's question is the last user text of the run's first model call.
    """
    question: str | None = None
    while entry is not None:
        span = entry.span
        if span is not None and not entry.asked:
            if question is None:
                question = attributes.prompt_of(data)
                if question is None:
                    return
            entry.asked = True
            span.set_attribute(sc.INPUT_VALUE, capped_text(question, settings.current.max_attribute_length))
            span.set_attribute(sc.INPUT_MIME_TYPE, sc.MIME_TEXT)
        entry = entry.parent


def _count_usage(entry: _Open | None, usage: dict[str, Any] | None) -> None:
    """Add a model call's token counts to every agent span above it (an agent run as a tool's included)."""
    while entry is not None:
        if entry.calls is not None:
            entry.calls.append(usage)
        entry = entry.parent


def _record_error(span: Span, error: Any, capture: bool, max_len: int) -> None:
    """An SDK ``SpanError`` (message plus data) as status ERROR, ``error.type`` and, with content, its data."""
    if not error:
        return
    message = str(error.get("message") or "error")
    data = error.get("data")
    detail = data.get("error") if isinstance(data, dict) else None
    span.set_attribute(sc.ERROR_TYPE, sc.ERROR_TYPE_OTHER)  # the SDK reports a message, never an exception type
    span.set_status(Status(StatusCode.ERROR, f"{message}: {detail}" if detail and capture else message))
    if capture and data:
        span.set_attribute(sc.OPENAI_AGENTS_ERROR_DATA, capped_json(data, max_len))
