"""The trace of one judgement: its own trace, never a part of the application's, and never evaluated.

A root span ``judge {evaluator}`` (INTERNAL, ``evaltrace.span.kind=judge``, OpenInference ``EVALUATOR``) with one
child ``chat {model}`` per attempt (CLIENT, the GenAI inference span: request parameters, the prompt as
``gen_ai.input.messages``, the reply as ``gen_ai.output.messages``, response id/model, token usage and cost,
written by the same builders as ``evaltrace.llm_call``). The root starts from an empty context, so the judgement
is a trace of its own even though the judge runs while an evaluated span's trace may be current, and it carries a
span link to the evaluated span. Every span of it carries ``evaltrace.judge=true``: the evaluation processor never
evaluates such a span. They go to the configured exporters like any span, so redaction applies to them at the
export boundary.

Nothing here raises into the judge: a failure to trace is logged as an evaltrace error and the judgement goes on
untraced. ``configure(trace_judges=False)`` (``EVALTRACE_TRACE_JUDGES=false``) turns it off.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanContext, SpanKind, TraceFlags

from evaltrace._internal import genai_parts, settings
from evaltrace._internal import manual_attributes as build
from evaltrace._internal import semconv as sc
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.spans import end_error
from evaltrace._internal.tracing import get_tracer
from evaltrace._internal.usage_shapes import parse_usage

PROVIDER = "openai"  # the judge speaks the OpenAI chat API, whoever serves it
_MARK: dict[str, Any] = {sc.EVALTRACE_JUDGE: True}


def _subject_link(subject: Mapping[str, Any] | None) -> list[Link]:
    """A link to the evaluated span, from a Trace's ``extra`` ids (none when they are missing or malformed)."""
    if not subject:
        return []
    trace_hex, span_hex = subject.get("trace_id"), subject.get("span_id")
    if not isinstance(trace_hex, str) or not isinstance(span_hex, str):
        return []
    try:
        context = SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=TraceFlags(1))
    except ValueError:
        return []
    return [Link(context)] if context.is_valid else []


class JudgeTrace:
    """One judgement's trace; inactive (records nothing, has no ids) when judge tracing is off or not recording."""

    def __init__(self, root: Span = INVALID_SPAN) -> None:
        """Wrap ``root``, the judgement's root span (INVALID_SPAN: nothing is traced)."""
        self._root = root

    @classmethod
    def start(cls, evaluator: str | None, prompt_ref: str, subject: Mapping[str, Any] | None) -> JudgeTrace:
        """Start the root span ``judge {evaluator}`` in a trace of its own, linked to the evaluated span.

        Args:
            evaluator: Name of the evaluator the judge works for (``None``: the span is named ``judge``).
            prompt_ref: The prompt's reference (name and version).
            subject: The evaluated Trace's ``extra`` (its ``trace_id`` and ``span_id``), for the link.
        """
        if not settings.current.trace_judges:
            return cls()
        with handle_internal_errors("starting a judge trace"):
            attributes: dict[str, Any] = {
                **_MARK,
                sc.EVALTRACE_SPAN_KIND: sc.KIND_JUDGE,
                sc.EVALTRACE_JUDGE_PROMPT: prompt_ref,
                sc.LANGFUSE_OBSERVATION_TYPE: sc.LANGFUSE_TYPE_EVALUATOR,
                # OpenInference's kind for evaluation work; without evaluations.* it is no feedback carrier.
                sc.OPENINFERENCE_SPAN_KIND: sc.OPENINFERENCE_KIND_EVALUATOR,
            }
            if evaluator:
                attributes[sc.EVALTRACE_JUDGE_EVALUATOR] = evaluator
            name = sc.JUDGE_SPAN_NAME_PREFIX + evaluator if evaluator else sc.JUDGE_SPAN_NAME_PREFIX.strip()
            # An empty context: no parent, whatever span is current (the judge never joins the app's trace).
            root = get_tracer().start_span(
                name, context=Context(), kind=SpanKind.INTERNAL, attributes=attributes, links=_subject_link(subject)
            )
            return cls(root if root.is_recording() else INVALID_SPAN)
        return cls()

    @property
    def trace_id(self) -> str | None:
        """The judge trace's id (32 hex), None when nothing is traced."""
        context = self._root.get_span_context()
        return format(context.trace_id, "032x") if context.is_valid and self._root is not INVALID_SPAN else None

    @property
    def span_id(self) -> str | None:
        """The root span's id (16 hex), None when nothing is traced."""
        context = self._root.get_span_context()
        return format(context.span_id, "016x") if context.is_valid and self._root is not INVALID_SPAN else None

    @contextmanager
    def chat(
        self, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any], url: str | None
    ) -> Iterator[ChatRecorder]:
        """One attempt's ``chat {model}`` span, child of the root; an exception ends it in ERROR and propagates."""
        span = self._start_chat(model, messages, params, url)
        recorder = ChatRecorder(span, model)
        try:
            yield recorder
        except BaseException as exc:
            with handle_internal_errors("ending a judge call's span"):
                end_error(span, exc)
            raise
        with handle_internal_errors("ending a judge call's span"):
            span.set_attributes(recorder.cost_attributes())
            span.end()

    def _start_chat(
        self, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any], url: str | None
    ) -> Span:
        if self._root is INVALID_SPAN:
            return INVALID_SPAN
        with handle_internal_errors("starting a judge call's span"):
            given = {key: value for key, value in params.items() if value is not None}
            given.update(_server(url))
            spec = build.RequestSpec(model, PROVIDER, sc.OP_CHAT, given)
            current = settings.current
            attributes = {**build.start_attributes(spec), **_MARK}
            attributes.update(build.request_attributes(spec, current.capture_content, current.max_attribute_length))
            if current.capture_content:
                attributes[sc.GEN_AI_INPUT_MESSAGES] = capped_json(
                    genai_parts.input_messages(list(messages)), current.max_attribute_length
                )
            parent = otel_trace.set_span_in_context(self._root, Context())
            return get_tracer().start_span(
                f"{sc.OP_CHAT} {model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes
            )
        return INVALID_SPAN

    def end(self, error: BaseException | None = None) -> None:
        """End the root span (ERROR with ``error.type`` when the judgement failed)."""
        if self._root is INVALID_SPAN:
            return
        with handle_internal_errors("ending a judge trace"):
            if error is not None:
                end_error(self._root, error)
            else:
                self._root.end()


class ChatRecorder:
    """Writes what one judge call got back onto its ``chat`` span."""

    def __init__(self, span: Span, model: str) -> None:
        """Record onto ``span`` (a non-recording span records nothing)."""
        self._span = span
        self._model = model
        self._usage: Any = None
        self._response_model: str | None = None
        self._cost_usd: float | None = None

    def record(self, response: Any, text: str, finish_reason: str | None, cost_usd: float | None) -> None:
        """Record the reply text, response id/model, finish reason, token usage and cost of a chat response.

        ``cost_usd`` is the judge's own price of this call (its ``price_per_million_tokens`` when given), so the
        span and the result's ``cost_usd`` agree; None prices it from ``evaltrace.pricing``.
        """
        if not self._span.is_recording():
            return
        self._cost_usd = cost_usd
        with handle_internal_errors("recording a judge call's reply"):
            current = settings.current
            usage = getattr(response, "usage", None)
            self._usage = parse_usage(usage) if usage is not None else None
            response_model = getattr(response, "model", None)
            self._response_model = response_model if isinstance(response_model, str) else None
            response_id = getattr(response, "id", None)
            attributes = build.response_attributes(
                response_id if isinstance(response_id, str) else None, self._response_model, self._usage, finish_reason
            )
            if current.capture_content:
                reason = genai_parts.finish_reason(finish_reason) if finish_reason else None
                message = genai_parts.output_message(text, None, None, reason)
                attributes[sc.GEN_AI_OUTPUT_MESSAGES] = capped_json([message], current.max_attribute_length)
            self._span.set_attributes(attributes)

    def cost_attributes(self) -> dict[str, Any]:
        """The call's cost, priced as an ``llm_call`` span is (empty when unknown or nothing was recorded)."""
        if not self._span.is_recording():
            return {}
        return build.cost_attributes(self._usage, self._response_model or self._model, PROVIDER, self._cost_usd)


def _server(url: str | None) -> dict[str, Any]:
    """``server_address`` / ``server_port`` of the judge's endpoint (the request parameters ``llm_call`` takes)."""
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    server: dict[str, Any] = {}
    if parts.hostname:
        server["server_address"] = parts.hostname
    if port is not None:
        server["server_port"] = port
    return server
