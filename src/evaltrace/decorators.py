"""Decorators that turn application functions into OTel spans following the GenAI conventions.

``@trace`` (a task), ``@workflow``, ``@agent``, ``@tool`` and ``@llm`` work bare or with arguments, on sync and
async functions, sync and async generators, methods, classmethods and staticmethods::

    @evaltrace.tool
    def get_weather(city: str) -> dict: ...

    @evaltrace.agent(name="support", evaluators=[ToolCalled("get_weather")])
    async def answer(question: str) -> str: ...

User exceptions pass through unchanged (recorded on the span first); our own errors never reach the caller.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, overload

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv
from evaltrace._internal.capture import ArgBinder
from evaltrace._internal.deferred_attributes import Preset
from evaltrace._internal.errors import handle_internal_errors
from evaltrace._internal.evaluator_registry import register_evaluators
from evaltrace._internal.fast_context import SPAN_KEY, attach, detach, get_current
from evaltrace._internal.generators import trace_async_generator, trace_generator
from evaltrace._internal.spans import SpanSpec, end_error, end_ok, start_span
from evaltrace._internal.tracing import SUPPRESSION_KEYS, is_suppressed

__all__ = ["agent", "llm", "tool", "trace", "workflow"]

F = TypeVar("F", bound=Callable[..., Any])

# kind -> (gen_ai.operation.name, Langfuse observation type, OpenInference span kind)
_KIND_ATTRIBUTES: dict[str, tuple[str | None, str, str]] = {
    semconv.KIND_TASK: (None, "chain", "CHAIN"),
    semconv.KIND_WORKFLOW: (semconv.OP_INVOKE_WORKFLOW, "chain", "CHAIN"),
    semconv.KIND_AGENT: (semconv.OP_INVOKE_AGENT, "agent", "AGENT"),
    semconv.KIND_TOOL: (semconv.OP_EXECUTE_TOOL, "tool", "TOOL"),
    semconv.KIND_LLM: (semconv.OP_CHAT, "generation", "LLM"),
}


def _span_name(kind: str, name: str) -> str:
    if kind == semconv.KIND_TOOL:
        return f"execute_tool {name}"
    if kind == semconv.KIND_AGENT:
        return f"invoke_agent {name}"
    if kind == semconv.KIND_WORKFLOW:
        return f"invoke_workflow {name}"
    return name


def _static_attributes(kind: str, name: str, func: Callable[..., Any]) -> dict[str, AttributeValue]:
    operation, langfuse_type, openinference_kind = _KIND_ATTRIBUTES[kind]
    attributes: dict[str, AttributeValue] = {
        semconv.EVALTRACE_SPAN_KIND: kind,
        semconv.LANGFUSE_OBSERVATION_TYPE: langfuse_type,
        semconv.OPENINFERENCE_SPAN_KIND: openinference_kind,
    }
    if operation is not None:
        attributes[semconv.GEN_AI_OPERATION_NAME] = operation
    if kind == semconv.KIND_TOOL:
        attributes[semconv.GEN_AI_TOOL_NAME] = name
        attributes[semconv.GEN_AI_TOOL_TYPE] = "function"
        doc = inspect.getdoc(func)
        if doc:
            attributes[semconv.GEN_AI_TOOL_DESCRIPTION] = doc.strip().splitlines()[0]
    elif kind == semconv.KIND_AGENT:
        attributes[semconv.GEN_AI_AGENT_NAME] = name
    elif kind == semconv.KIND_WORKFLOW:
        attributes[semconv.GEN_AI_WORKFLOW_NAME] = name
    return attributes


def _build_spec(
    kind: str,
    func: Callable[..., Any],
    name: str | None,
    attributes: Mapping[str, AttributeValue] | None,
    capture_input: bool | None,
    capture_output: bool | None,
    evaluators: Sequence[Any] | None,
) -> SpanSpec:
    display_name: str = name or str(getattr(func, "__name__", "function"))
    static = _static_attributes(kind, display_name, func)
    if attributes:
        static.update(attributes)
    if evaluators:
        module = getattr(func, "__module__", None)
        owner = f"{module or '?'}.{getattr(func, '__qualname__', display_name)}"
        static[semconv.EVALTRACE_EVALUATORS_REF] = register_evaluators(owner, evaluators, module=module)
    tool = kind == semconv.KIND_TOOL
    return SpanSpec(
        name=_span_name(kind, display_name),
        kind=SpanKind.CLIENT if kind == semconv.KIND_LLM else SpanKind.INTERNAL,
        attributes=static,
        input_attribute=semconv.GEN_AI_TOOL_CALL_ARGUMENTS if tool else semconv.INPUT_VALUE,
        output_attribute=semconv.GEN_AI_TOOL_CALL_RESULT if tool else semconv.OUTPUT_VALUE,
        binder=ArgBinder.for_function(func),
        capture_input=capture_input,
        capture_output=capture_output,
        preset=_preset(static),
    )


def _preset(static: Mapping[str, AttributeValue]) -> Preset | None:
    """The static attributes validated once, for starts that skip the SDK's per-span check (see ``start_span``)."""
    try:
        return Preset(static)  # type: ignore[arg-type]  # non-scalar values are refused, below
    except Exception:  # a sequence among the user's ``attributes=`` (or anything odd): the SDK's check per start
        return None


def _wrap_generator(spec: SpanSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    tracer_fn = trace_async_generator if inspect.isasyncgenfunction(func) else trace_generator

    @functools.wraps(func)
    def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_suppressed():
            return func(*args, **kwargs)
        return tracer_fn(spec, func, args, kwargs)

    return generator_wrapper


def _leave_context_failed() -> None:
    """Report a failed context restore (an error of ours, never the caller's) by the boundary's policy."""
    with handle_internal_errors("leaving a decorated function's context"):
        raise


# The per-call path of both wrappers: the current context is read once (suppression, parent, our span's context),
# the span's context is one dict copy, and attach/detach are the ContextVar's own methods (see fast_context).
# The async wrapper is the sync one line for line (keep them so): a shared helper would cost a call per call.
def _wrap_coroutine(spec: SpanSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    suppress_otel, suppress_ours = SUPPRESSION_KEYS

    @functools.wraps(func)
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        current = get_current()
        if current.get(suppress_otel) or current.get(suppress_ours):
            return await func(*args, **kwargs)
        span = start_span(spec, args, kwargs, current)
        token = attach(Context({**current, SPAN_KEY: span}))
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            end_error(span, exc)
            raise
        finally:
            try:
                detach(token)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _leave_context_failed()
        end_ok(span, spec, result)
        return result

    return async_wrapper


def _wrap_sync(spec: SpanSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    suppress_otel, suppress_ours = SUPPRESSION_KEYS

    @functools.wraps(func)
    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        current = get_current()
        if current.get(suppress_otel) or current.get(suppress_ours):
            return func(*args, **kwargs)
        span = start_span(spec, args, kwargs, current)
        token = attach(Context({**current, SPAN_KEY: span}))
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            end_error(span, exc)
            raise
        finally:
            try:
                detach(token)
            except Exception:  # as opentelemetry.context.detach does: never into the user's code
                _leave_context_failed()
        end_ok(span, spec, result)
        return result

    return sync_wrapper


def _wrap_function(spec: SpanSpec, func: Callable[..., Any]) -> Callable[..., Any]:
    """Return the traced version of ``func``, choosing the wrapper by what ``func`` is."""
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        return _wrap_generator(spec, func)
    if inspect.iscoroutinefunction(func):
        return _wrap_coroutine(spec, func)
    return _wrap_sync(spec, func)


def _decorate(
    kind: str,
    target: Any,
    name: str | None,
    attributes: Mapping[str, AttributeValue] | None,
    capture_input: bool | None,
    capture_output: bool | None,
    evaluators: Sequence[Any] | None,
) -> Any:
    # Applied on top of @classmethod / @staticmethod: trace the underlying function, keep the descriptor.
    if isinstance(target, classmethod | staticmethod):
        inner = _decorate(kind, target.__func__, name, attributes, capture_input, capture_output, evaluators)
        return type(target)(inner)
    if not callable(target):
        raise TypeError(f"@evaltrace.{kind} decorates functions, not {type(target).__name__}")
    spec = _build_spec(kind, target, name, attributes, capture_input, capture_output, evaluators)
    return _wrap_function(spec, target)


class SpanDecorator(Protocol):
    """The type of ``trace``, ``workflow``, ``agent``, ``tool`` and ``llm``: the decorated function keeps its type."""

    @overload
    def __call__(self, func: F, /) -> F: ...

    @overload
    def __call__(
        self,
        func: None = None,
        /,
        *,
        name: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        capture_input: bool | None = None,
        capture_output: bool | None = None,
        evaluators: Sequence[Any] | None = None,
    ) -> Callable[[F], F]: ...


def _make_decorator(kind: str, doc: str) -> SpanDecorator:
    def decorator(
        func: Any = None,
        /,
        *,
        name: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        capture_input: bool | None = None,
        capture_output: bool | None = None,
        evaluators: Sequence[Any] | None = None,
    ) -> Any:
        if func is not None:
            return _decorate(kind, func, name, attributes, capture_input, capture_output, evaluators)
        return lambda f: _decorate(kind, f, name, attributes, capture_input, capture_output, evaluators)

    decorator.__doc__ = doc
    decorator.__name__ = decorator.__qualname__ = "trace" if kind == semconv.KIND_TASK else kind
    return decorator


_ARGS_DOC = """

    Usable bare (``@evaltrace.{n}``) or with keyword arguments:

    Args:
        name: Span/entity name; defaults to the function's ``__name__``.
        attributes: Extra static attributes put on every span.
        capture_input: Record the arguments (default: follow ``configure(capture_content=...)``).
        capture_output: Record the return value (default: follow ``configure(capture_content=...)``).
        evaluators: Evaluators run over this span's subtree when it ends (needs the evaluation processor).
    """

trace = _make_decorator(
    semconv.KIND_TASK,
    "Trace a function as a task span named after it (``evaltrace.span.kind=task``)." + _ARGS_DOC.format(n="trace"),
)
workflow = _make_decorator(
    semconv.KIND_WORKFLOW,
    "Trace a function as an ``invoke_workflow {name}`` span." + _ARGS_DOC.format(n="workflow"),
)
agent = _make_decorator(
    semconv.KIND_AGENT,
    "Trace a function as an in-process agent: an ``invoke_agent {name}`` INTERNAL span." + _ARGS_DOC.format(n="agent"),
)
tool = _make_decorator(
    semconv.KIND_TOOL,
    "Trace a function as a tool: an ``execute_tool {name}`` span with ``gen_ai.tool.*`` attributes."
    + _ARGS_DOC.format(n="tool"),
)
llm = _make_decorator(
    semconv.KIND_LLM,
    "Trace a hand-written model call as an LLM (generation) CLIENT span; inside it,"
    " ``evaltrace.current_llm_call().record(...)`` records messages, output, usage and cost like ``llm_call``."
    + _ARGS_DOC.format(n="llm"),
)
