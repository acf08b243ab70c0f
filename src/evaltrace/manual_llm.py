"""Manual LLM spans that carry everything the auto-instrumentations write, for calls through any SDK.

::

    with evaltrace.llm_call(model="claude-sonnet-4-5", provider="anthropic", max_tokens=1024) as call:
        response = my_client.generate(...)
        call.record(
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            output=response.text,
            thinking=response.reasoning,
            usage={"input_tokens": 120, "output_tokens": 40, "reasoning_tokens": 12},
            finish_reason="end_turn",
        )

Inside an ``@evaltrace.llm`` function, ``evaltrace.current_llm_call()`` returns the same recorder for the
function's span. ``record`` can be called any number of times; each argument given replaces what was recorded
for it before. Bad input to ``record`` is logged as an evaltrace error and never raised into the application
(raised only with ``EVALTRACE_RAISE_INTERNAL_ERRORS=1``, see ``_internal.errors``); exceptions of the block end the span with ERROR status and
``error.type`` and propagate unchanged.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import genai_parts, list_values, settings
from evaltrace._internal import manual_attributes as build
from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.outcome import Summary, Usage
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.metrics import Instruments, MetricAttributes
from evaltrace._internal.spans import end_error, error_type
from evaltrace._internal.tracing import get_tracer, is_suppressed
from evaltrace._internal.usage_shapes import parse_usage

__all__ = ["LLMCall", "current_llm_call", "llm_call"]

# The innermost llm_call() block: set on entry, reset on exit.
_BLOCK: ContextVar[LLMCall | None] = ContextVar("evaltrace_llm_call_block", default=None)
# The recorder made for an @llm function's span, so that its body's record() calls add up. Never reset (nothing
# tells us when the function ends), so an entry may outlive its span: it is only returned for the same span.
_DECORATED: ContextVar[LLMCall | None] = ContextVar("evaltrace_llm_call_decorated", default=None)
_instruments: Instruments | None = None  # created on first use, on the global MeterProvider


class LLMCall:
    """One LLM call's span, and what was recorded on it. Create it with :func:`llm_call`.

    Use it as a context manager (``with`` or ``async with``): the span starts on entry, is current inside the
    block (spans started there are its children) and ends on exit.
    """

    def __init__(
        self,
        spec: build.RequestSpec | None,
        name: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> None:
        """Prepare a call; ``llm_call`` is the public way to make one."""
        self._spec = spec
        self._name = name
        self._extra = dict(attributes or {})
        self._span: Span = INVALID_SPAN
        self._owns_span = spec is not None
        self._entered = False
        self._context_token: Token[otel_context.Context] | None = None
        self._current_token: Token[LLMCall | None] | None = None
        self._start = 0.0
        self._model = spec.model if spec is not None else None
        self._provider = spec.provider if spec is not None else None
        # What record() was given; each record() call replaces the fields it is given.
        self._output: Any = None
        self._has_output = False
        self._thinking: str | None = None
        self._tool_calls: Sequence[Any] | None = None
        self._finish_reason: str | None = None  # mapped, for the output message
        self._raw_finish_reason: str | None = None  # as given, for gen_ai.response.finish_reasons (verbatim)
        self._usage: Usage | None = None
        self._response_id: str | None = None
        self._response_model: str | None = None
        self._cost_usd: float | None = None
        self._first_token = False

    @classmethod
    def _of_span(cls, span: Span) -> LLMCall:
        """A recorder for a span someone else owns (an ``@evaltrace.llm`` function's)."""
        call = cls(None)
        call._span = span
        call._entered = True
        return call

    # --- context manager ---------------------------------------------------------------------------------

    def __enter__(self) -> LLMCall:
        """Start the span and make it current."""
        if self._entered:
            with handle_internal_errors("entering an llm_call() block"):
                raise RuntimeError("an evaltrace.llm_call() can be entered only once: make a new one per call")
            return self
        self._entered = True
        spec = self._spec
        if spec is None or is_suppressed():
            return self
        current = settings.current
        attrs = build.start_attributes(spec)
        # Bad request parameters lose the request attributes only: the span still starts and records the call.
        with handle_internal_errors("recording an LLM call's request"):
            attrs.update(build.request_attributes(spec, current.capture_content, current.max_attribute_length))
        attrs.update(self._extra)
        name = self._name or (f"{spec.operation} {spec.model}" if spec.model else spec.operation)
        self._start = time.perf_counter()
        self._span = get_tracer().start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
        self._context_token = otel_context.attach(otel_trace.set_span_in_context(self._span))
        self._current_token = _BLOCK.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """End the span: ERROR status and ``error.type`` when the block raised (the exception propagates)."""
        if self._context_token is None:
            return
        otel_context.detach(self._context_token)
        self._context_token = None
        if self._current_token is not None:
            try:
                _BLOCK.reset(self._current_token)
            except ValueError:  # exited in another context than it was entered in (a moved generator)
                _BLOCK.set(None)
            self._current_token = None
        elapsed = time.perf_counter() - self._start
        # Priced once, at the end: a span attribute cannot be removed, so pricing on each record() would leave
        # a stale thinking share behind when a later record() gives cost_usd.
        with handle_internal_errors("pricing an LLM call"):
            if self._span.is_recording():
                self._span.set_attributes(self._cost_attributes())
        if exc is not None:
            end_error(self._span, exc)
        else:
            self._span.end()
        with handle_internal_errors("recording LLM call metrics"):
            self._record_metrics(elapsed, error_type(exc) if exc is not None else None)

    async def __aenter__(self) -> LLMCall:
        """``async with`` form of ``with``."""
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """``async with`` form of ``with``."""
        self.__exit__(exc_type, exc, tb)

    # --- recording ---------------------------------------------------------------------------------------

    @property
    def span(self) -> Span:
        """The call's span (a non-recording span outside the block, when suppressed or sampled out)."""
        return self._span

    def record(
        self,
        *,
        messages: Sequence[Any] | None = None,
        output: Any = None,
        usage: Any = None,
        thinking: str | None = None,
        tool_calls: Sequence[Any] | None = None,
        finish_reason: str | None = None,
        response_id: str | None = None,
        response_model: str | None = None,
        cost_usd: float | None = None,
        model: str | None = None,
        provider: str | None = None,
    ) -> None:
        """Record what the call sent and got; arguments left None keep what was recorded before.

        Args:
            messages: The input messages: OpenAI-style dicts (``role``, ``content``, ``tool_calls``,
                ``tool_call_id``), Anthropic-style messages with content blocks (``tool_result`` blocks become
                ``tool`` messages, ``thinking`` blocks reasoning), ``TraceMessage`` objects, or GenAI messages
                (with ``parts``). Written to ``gen_ai.input.messages`` when content capture is on.
            output: The answer: a string, an assistant message in any of those shapes, or a list of content
                blocks (Anthropic's ``response.content``). Written to ``gen_ai.output.messages``.
            usage: Token counts: ``{"input_tokens", "output_tokens", "cache_read_tokens",
                "cache_creation_tokens", "reasoning_tokens"}`` (inclusive, as in OTel: input includes the
                cache reads and writes, output the reasoning), or an OpenAI, Anthropic or Gemini usage object
                or dict as the SDK returns it.
            thinking: The model's reasoning text: a ``reasoning`` part before the answer, never in its text.
            tool_calls: Tool calls the model asked for: ``ToolCall`` objects, OpenAI ``tool_calls`` entries,
                Anthropic ``tool_use`` blocks or ``{"id", "name", "arguments"}`` dicts.
            finish_reason: The provider's finish or stop reason: verbatim in ``gen_ai.response.finish_reasons``
                (as the auto-instrumentations write it), mapped to the GenAI one in the output message
                (``end_turn`` and ``stop_sequence`` -> ``stop``, ``tool_use``/``tool_calls`` -> ``tool_call``,
                ``max_tokens`` -> ``length``). Without it the output message says ``tool_call`` or ``stop``
                and ``gen_ai.response.finish_reasons`` is not written.
            response_id: The provider's response id.
            response_model: The model that answered (prices the call before the request model).
            cost_usd: The call's cost; without it, the cost is computed from usage with ``evaltrace.pricing``.
            model: The request model, for an ``@evaltrace.llm`` span that did not get one at start.
            provider: The ``gen_ai.provider.name``, likewise (needed to price the call).
        """
        with handle_internal_errors("recording an LLM call"):
            if not self._entered:
                raise RuntimeError("record() was called outside the llm_call() block")
            if self._span is INVALID_SPAN and self._spec is None:
                raise RuntimeError(
                    "evaltrace.current_llm_call(): no LLM span is current "
                    "(call it inside an @evaltrace.llm function or an evaltrace.llm_call() block)"
                )
            if not self._span.is_recording():
                return
            self._span.set_attributes(
                self._record(
                    messages, output, usage, thinking, tool_calls, finish_reason, response_id, response_model,
                    cost_usd, model, provider,
                )
            )  # fmt: skip

    def first_token(self) -> None:
        """Mark now as the arrival of the first token of a streamed answer (only the first call counts)."""
        with handle_internal_errors("recording an LLM call's first token"):
            if self._first_token or not self._span.is_recording():
                return
            self._first_token = True
            now_ns = time.time_ns()
            start_ns = getattr(self._span, "start_time", None)
            if not isinstance(start_ns, int):
                return
            seconds = (now_ns - start_ns) / 1e9
            stamp = dt.datetime.fromtimestamp(now_ns / 1e9, tz=dt.UTC).isoformat(timespec="microseconds")
            self._span.set_attributes(
                {
                    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: seconds,
                    sc.LANGFUSE_OBSERVATION_COMPLETION_START_TIME: stamp,
                }
            )
            instruments = _get_instruments()
            if self._owns_span and instruments.enabled():
                instruments.record_first_chunk(self._metric_base(), seconds)

    def _record(
        self,
        messages: Sequence[Any] | None,
        output: Any,
        usage: Any,
        thinking: str | None,
        tool_calls: Sequence[Any] | None,
        finish_reason: str | None,
        response_id: str | None,
        response_model: str | None,
        cost_usd: float | None,
        model: str | None,
        provider: str | None,
    ) -> dict[str, Any]:
        """Validate and convert everything given (nothing is kept when any of it is bad); return the attributes."""
        current = settings.current
        capture, max_len = current.capture_content, current.max_attribute_length
        attrs: dict[str, Any] = {}
        strings = {"thinking": thinking, "finish_reason": finish_reason, "response_id": response_id}
        _check_arguments({**strings, "response_model": response_model, "model": model, "provider": provider}, cost_usd)
        parsed_usage = parse_usage(usage) if usage is not None else self._usage
        if messages is not None and capture:
            inputs = genai_parts.input_messages(messages)
            text = attrs[sc.GEN_AI_INPUT_MESSAGES] = capped_json(inputs, max_len)
            if self._owns_span:  # an @llm function's span has its arguments there (the decorator's)
                attrs.update(self._input_list_values(inputs, text, max_len))
        new_output = output is not None or thinking is not None or tool_calls is not None or finish_reason is not None
        reason = genai_parts.finish_reason(finish_reason) if finish_reason is not None else self._finish_reason
        if new_output and capture:
            message = genai_parts.output_message(
                output if output is not None else self._output,
                thinking if thinking is not None else self._thinking,
                tool_calls if tool_calls is not None else self._tool_calls,
                reason,
            )
            answer = attrs[sc.GEN_AI_OUTPUT_MESSAGES] = capped_json([message], max_len)
            if self._owns_span:  # an @llm function's span has its return value there (the decorator's)
                attrs.update(list_values.output_attributes([message], answer, max_len))
        # Everything was valid: keep it.
        if output is not None:
            self._output = output
        if thinking is not None:
            self._thinking = thinking
        if tool_calls is not None:
            self._tool_calls = tool_calls
        self._finish_reason = reason
        if finish_reason is not None:
            self._raw_finish_reason = finish_reason
        self._usage = parsed_usage
        self._response_id = response_id or self._response_id
        self._response_model = response_model or self._response_model
        self._cost_usd = float(cost_usd) if cost_usd is not None else self._cost_usd
        if model is not None:
            self._model = model
            attrs[sc.GEN_AI_REQUEST_MODEL] = model
        if provider is not None:
            self._provider = provider
            attrs[sc.GEN_AI_PROVIDER_NAME] = provider
        attrs.update(
            build.response_attributes(self._response_id, self._response_model, self._usage, self._raw_finish_reason)
        )
        if not self._owns_span:  # nothing tells us when an @llm function's span ends: price on every record
            attrs.update(self._cost_attributes())
        return attrs

    def _input_list_values(self, inputs: list[Any], text: str, max_len: int) -> dict[str, Any]:
        """``input.value`` of the recorded messages, after the block's system instructions (as the instrumentations)."""
        system = self._spec.system if self._spec is not None else None
        instructions = genai_parts.system_parts(system) if system else None
        instructions_json = capped_json(instructions, max_len) if instructions else None
        return list_values.input_attributes(inputs, text, instructions, instructions_json, max_len)

    def _cost_attributes(self) -> dict[str, Any]:
        return build.cost_attributes(self._usage, self._response_model or self._model, self._provider, self._cost_usd)

    # --- metrics -----------------------------------------------------------------------------------------

    def _metric_base(self) -> dict[str, Any]:
        spec = self._spec
        base: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: spec.operation if spec is not None else sc.OP_CHAT,
            sc.GEN_AI_PROVIDER_NAME: self._provider or sc.ERROR_TYPE_OTHER,
        }
        if self._model:
            base[sc.GEN_AI_REQUEST_MODEL] = self._model
        if spec is not None:
            for key, name in (("server_address", sc.SERVER_ADDRESS), ("server_port", sc.SERVER_PORT)):
                value = spec.params.get(key)
                if value is not None:
                    base[name] = value
        return base

    def _record_metrics(self, elapsed: float, error: str | None) -> None:
        """The GenAI client metrics the auto-instrumentations record (duration, token usage)."""
        instruments = _get_instruments()
        if self._span is INVALID_SPAN or not instruments.enabled():  # suppressed: no call was traced
            return
        usage = self._usage
        summary = Summary(
            self._response_model,
            usage.input_tokens if usage is not None else None,
            usage.output_tokens if usage is not None else None,
        )
        instruments.record_call(MetricAttributes(self._metric_base()), elapsed, summary, error)


def _check_arguments(strings: Mapping[str, Any], cost_usd: Any) -> None:
    """Raise ValueError naming the ``record`` argument whose value has the wrong type."""
    for label, value in strings.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"record({label}=...) must be a string, got {type(value).__name__}")
    if cost_usd is not None and (isinstance(cost_usd, bool) or not isinstance(cost_usd, int | float) or cost_usd < 0):
        raise ValueError(f"record(cost_usd=...) must be a non-negative number, got {cost_usd!r}")


def _get_instruments() -> Instruments:
    global _instruments
    if _instruments is None:
        _instruments = Instruments()
    return _instruments


def llm_call(
    *,
    provider: str,
    model: str | None = None,
    operation: str = sc.OP_CHAT,
    name: str | None = None,
    system: str | Sequence[Any] | None = None,
    tools: Sequence[Any] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    max_tokens: int | None = None,
    stop_sequences: Sequence[str] | None = None,
    seed: int | None = None,
    frequency_penalty: float | None = None,
    presence_penalty: float | None = None,
    choice_count: int | None = None,
    stream: bool | None = None,
    reasoning_level: str | None = None,
    output_type: str | None = None,
    conversation_id: str | None = None,
    server_address: str | None = None,
    server_port: int | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> LLMCall:
    """Trace one model call made through any SDK as an LLM span, like the auto-instrumentations' spans.

    Use the result with ``with`` or ``async with``; inside the block, :meth:`LLMCall.record` records messages,
    output, thinking, tool calls, usage and cost, and :meth:`LLMCall.first_token` the time to first token.

    Args:
        provider: ``gen_ai.provider.name`` (``openai``, ``anthropic``, ``gcp.gemini``, ``aws.bedrock``, or a
            custom value such as ``vllm``); with the model it prices the call.
        model: The requested model (``gen_ai.request.model``).
        operation: ``gen_ai.operation.name``: ``chat`` (default), ``text_completion`` or ``generate_content``.
        name: Span name; defaults to ``"{operation} {model}"`` as the GenAI conventions name it.
        system: System instructions (a string, or text blocks) -> ``gen_ai.system_instructions``.
        tools: Tool definitions, OpenAI-style or Anthropic-style -> ``gen_ai.tool.definitions``.
        temperature: ``gen_ai.request.temperature``.
        top_p: ``gen_ai.request.top_p``.
        top_k: ``gen_ai.request.top_k``.
        max_tokens: ``gen_ai.request.max_tokens``.
        stop_sequences: ``gen_ai.request.stop_sequences``.
        seed: ``gen_ai.request.seed``.
        frequency_penalty: ``gen_ai.request.frequency_penalty``.
        presence_penalty: ``gen_ai.request.presence_penalty``.
        choice_count: ``gen_ai.request.choice.count`` (OpenAI's ``n``).
        stream: True for a streamed request (``gen_ai.request.stream``).
        reasoning_level: ``gen_ai.request.reasoning.level`` (e.g. ``low``, ``high``).
        output_type: ``gen_ai.output.type`` (``text``, ``json``, ...).
        conversation_id: ``gen_ai.conversation.id``.
        server_address: ``server.address`` of the endpoint.
        server_port: ``server.port`` of the endpoint.
        attributes: Extra attributes put on the span.

    Returns:
        The call, to enter with ``with`` / ``async with``.
    """
    given = {
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "max_tokens": max_tokens,
        "stop_sequences": stop_sequences,
        "seed": seed,
        "frequency_penalty": frequency_penalty,
        "presence_penalty": presence_penalty,
        "choice_count": choice_count,
        "stream": stream,
        "reasoning_level": reasoning_level,
        "output_type": output_type,
        "conversation_id": conversation_id,
        "server_address": server_address,
        "server_port": server_port,
    }
    params = {key: value for key, value in given.items() if value is not None}
    spec = build.RequestSpec(model, provider, operation, params, system, tools)
    return LLMCall(spec, name, attributes)


def current_llm_call() -> LLMCall:
    """The LLM call being traced here: the current ``@evaltrace.llm`` function's span or ``llm_call`` block.

    Under a child span of an ``llm_call`` block (a tool span, say) it is still the block's call; an ``@llm``
    function's call is found from the function's own body. Outside both, the returned call records nothing, and its ``record`` reports the misuse as an evaltrace
    error (logged, never raised into the application).
    """
    span = otel_trace.get_current_span()
    block = _BLOCK.get()
    if block is not None and block._span is span:
        return block
    decorated = _DECORATED.get()
    if decorated is not None and decorated._span is span:
        return decorated
    if _is_llm_span(span):
        decorated = LLMCall._of_span(span)
        _DECORATED.set(decorated)
        return decorated
    if block is not None:  # inside an llm_call block, under a child span (a tool call, say)
        return block
    detached = LLMCall(None)
    detached._entered = True
    return detached


def _is_llm_span(span: Span) -> bool:
    if not span.is_recording():
        return False
    attributes = getattr(span, "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(sc.EVALTRACE_SPAN_KIND) == sc.KIND_LLM
