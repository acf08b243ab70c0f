"""The values of a Trace's fields from the root's attributes: identity, input, output, model steps and error.

Shared by the eager mapping and the lazy one (``_build``); each is a pure function of the spans it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.thinking import split_thinking
from evaltrace._internal.trusted_models import trusted
from evaltrace.mapping import conventions
from evaltrace.mapping._conversation import step_answer
from evaltrace.mapping._lazy import SET_DICT, SET_EXTRA, SET_FIELDS_SET, SET_PRIVATE
from evaltrace.mapping._spans import _SCAN, MISSING, compact, is_truncated, json_attr, span_id
from evaltrace.schema import LlmStep, TraceError, TraceMessage, TraceOutput

_new = object.__new__


def _identity(
    resource: Any, root_attrs: Mapping[str, Any], read: list[tuple[ReadableSpan, dict[str, Any]]], trace_id: str
) -> tuple[str, str, str]:
    """Return run id, case id and variant name: the root's, else the first span's of the subtree, else defaults.

    ``resource``: the root's resource (its service name is the default variant).
    """
    # The root alone when it is the whole subtree (an evaluated span without descendants): same answers.
    seen, service = _last_service  # _service_name()'s memo, inline: the usual span has the last resource seen
    if resource is not seen:
        service = _service_name(resource)
    if len(read) == 1 and read[0][1] is root_attrs:
        # _first() over the root alone, inline (an evaluated span is mapped on every evaluation).
        get = root_attrs.get
        run_id, case_id, variant = get(sc.EVALTRACE_RUN_ID), get(sc.EVALTRACE_CASE_ID), get(sc.EVALTRACE_VARIANT)
        return (
            run_id if isinstance(run_id, str) and run_id else "live",
            case_id if isinstance(case_id, str) and case_id else trace_id,
            variant if isinstance(variant, str) and variant else (str(service) if service else "unknown_service"),
        )
    sources: list[Mapping[str, Any]] = [root_attrs, *(a for _, a in read)]
    return (
        _first(sources, sc.EVALTRACE_RUN_ID) or "live",
        _first(sources, sc.EVALTRACE_CASE_ID) or trace_id,
        _first(sources, sc.EVALTRACE_VARIANT) or (str(service) if service else "unknown_service"),
    )


# The last resource seen and its service name: a process has one or a few resources, and reading a Resource's
# attributes runs the SDK's locked mapping code (resources are immutable, so the same object has the same name).
_last_service: tuple[Any, Any] = (object(), None)


def _service_name(resource: Any) -> Any:
    """``resource.attributes.get("service.name")``; None without a resource."""
    global _last_service
    seen, service = _last_service
    if resource is seen:
        return service
    service = resource.attributes.get(sc.SERVICE_NAME) if resource else None
    _last_service = (resource, service)
    return service


def _first(sources: list[Mapping[str, Any]], key: str) -> str | None:
    """The first non-empty string value of ``key`` in ``sources``."""
    for span_attrs in sources:
        value = span_attrs.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _input(
    root: ReadableSpan,
    root_attrs: Mapping[str, Any],
    root_is_llm: bool,
    notes: list[str],
    first_llm: ReadableSpan | None,
) -> dict[str, Any]:
    key = sc.INPUT_VALUE if sc.INPUT_VALUE in root_attrs else conventions.input_key(root_attrs)
    if key == sc.PYDANTIC_AI_ALL_MESSAGES and first_llm is not None:
        # A pydantic-ai run's messages end with its retries and tool turns; its prompt is the last user text of
        # its first model request (after any history it was given).
        question = list_values.prompt_text(_list(json_attr(first_llm, sc.GEN_AI_INPUT_MESSAGES, notes)))
        if question is not None:
            return {"input": question}
    value = json_attr(root, key, notes, root_attrs)
    if value is MISSING:
        return {}
    items = _request_items(value) if (root_is_llm or key == sc.PYDANTIC_AI_ALL_MESSAGES) else None
    if items is not None:
        # A model call's input.value holds its whole input as GenAI messages when it is more than one user text
        # (what Langfuse and Phoenix show), as a pydantic-ai run's messages do, or the request body another
        # instrumentation recorded (OpenInference: Chat ``messages`` or the Responses ``input`` item list, with any
        # images' base64 in it); the question its evaluators read is the last user text in it, never a dump of it.
        messages = conventions.responses_messages(items) or _chat_messages(items)
        question = list_values.prompt_text(messages)
        if question is not None:
            return {"input": question}
        if key == sc.PYDANTIC_AI_ALL_MESSAGES:
            return {}  # the run's messages are the conversation, not its input
        if list_values.sends_documents(messages):
            # Documents and no question ("Summarize." as the system prompt): nothing asked, so the evaluators that
            # need a question do not run (never a judge reading the whole input, documents and markers, as one).
            return {}
    return value if isinstance(value, dict) else {"input": value}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _request_items(value: Any) -> list[Any] | None:
    """The message list of a model call's input.value: the list itself, or a request body's input/messages."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("input", "messages"):
            if isinstance(value.get(key), list):
                return list(value[key])
    return None


def _chat_messages(items: list[Any]) -> list[Any]:
    """GenAI messages as they are; Chat messages (``{"role", "content"}``) get their content as parts."""
    return [
        {"role": m["role"], "parts": conventions.content_parts(m.get("content"))}
        if isinstance(m, dict) and "parts" not in m and "role" in m
        else m
        for m in items
    ]


def _llm_steps(llm_read: list[tuple[ReadableSpan, dict[str, Any]]]) -> list[LlmStep]:
    """Each model call's model and finish reasons, in start order, from whichever convention recorded them."""
    steps: list[LlmStep] = []
    for span, span_attrs in llm_read:
        # Events only matter without the GenAI finish reasons (reading them takes the span's lock).
        events = () if sc.GEN_AI_RESPONSE_FINISH_REASONS in span_attrs else span.events
        info = conventions.step_info(span_attrs, events)
        steps.append(
            trusted(
                LlmStep,
                None,
                span_id=format(span_id(span), "016x"),
                model=info.model,
                request_model=info.request_model,
                finish_reasons=info.finish_reasons,
            )
        )
    return steps


def _last_step(steps: list[tuple[ReadableSpan, list[TraceMessage]]]) -> list[TraceMessage] | None:
    """The output messages of the last model call to end (start order breaks ties) that recorded any, or None."""
    found: list[TraceMessage] | None = None
    latest = -1
    for span, outputs in steps:
        end = span.end_time or 0
        if outputs and end >= latest:  # a call that recorded no output (content not captured) tells nothing
            found, latest = outputs, end
    return found


def _output(
    root: ReadableSpan,
    root_attrs: Mapping[str, Any],
    messages: list[TraceMessage],
    own: list[TraceMessage],
    step: list[TraceMessage] | None,
    notes: list[str],
) -> TraceOutput:
    key = sc.OUTPUT_VALUE if sc.OUTPUT_VALUE in root_attrs else conventions.output_key(root_attrs)
    value = json_attr(root, key, notes, root_attrs)
    thoughts = [m.thinking for m in messages if m.thinking] if messages else []
    if own:
        # A model call's answer is its own response, never the history its input repeats: a call that answered
        # with tool calls only has none. Its output.value (the answer, or the whole response as JSON: another
        # instrumentation may write the raw response body there) is not read.
        return _answer(step_answer(own), "\n\n".join(thoughts) or None)
    if isinstance(value, str):
        if "think>" not in value:  # neither <think> nor </think>: split_thinking() would return it unchanged
            return _answer(value, ("\n\n".join(thoughts) or None) if thoughts else None)
        # A function returning a model's raw text returns its inline reasoning too: never part of the answer.
        # The LLM span's message usually holds the same reasoning already; add only what it lacks.
        split = split_thinking(value)
        thoughts += [t for t in split.thoughts if t not in thoughts]
        # Built unvalidated (str and None values, made here): validating them was a tenth of a small mapping.
        return _answer(split.answer, "\n\n".join(thoughts) or None)
    # Without a text output of its own, the trace answers what its last model call answered: nothing when that
    # call asked for tools (an earlier turn's text is not the answer).
    thinking = "\n\n".join(thoughts) or None
    structured = value if isinstance(value, dict) and not is_truncated(value) else None
    raw = root_attrs.get(key)
    if key == sc.PYDANTIC_AI_FINAL_RESULT and _paused(value):
        # Paused for approvals or external results: nothing answered yet, whatever the model wrote beside its calls
        # (Anthropic models often say what they are about to do). The requests stay the structured output.
        return TraceOutput(final_answer=None, thinking=thinking, structured=structured)
    if key == sc.PYDANTIC_AI_FINAL_RESULT and value is not None and isinstance(raw, str):
        # A pydantic-ai run's output (its JSON, for an object, a list or a number) is its answer: the model gave it
        # as an output tool's arguments (no text answer), or as text in another shape (``{"response": ...}``).
        return TraceOutput(final_answer=raw, thinking=thinking, structured=structured)
    last = step_answer(step) if step is not None else None
    if last is None and value not in (MISSING, None) and structured is None and not is_truncated(value):
        last = compact(value)
    return TraceOutput(final_answer=last, thinking=thinking, structured=structured)


def _paused(value: Any) -> bool:
    """Whether a pydantic-ai run's output is its ``DeferredToolRequests``: no answer, calls left waiting.

    They wait for an approval or an external result; the run that resumes them answers.
    """
    return isinstance(value, dict) and isinstance(value.get("calls"), list) and isinstance(value.get("approvals"), list)


def _answer(final_answer: str | None, thinking: str | None) -> TraceOutput:
    """``trusted(TraceOutput, None, final_answer=..., thinking=...)`` (str and None values, made here).

    Its four slots set through their descriptors (``_lazy.SET_*``): ~6k instructions instead of ~15k, on every
    evaluated span that has an answer.
    """
    output = _new(TraceOutput)
    SET_DICT(output, {"final_answer": final_answer, "thinking": thinking, "structured": None})  # field order
    SET_FIELDS_SET(output, {"final_answer", "thinking"})
    SET_EXTRA(output, None)
    SET_PRIVATE(output, None)
    return output


def _error(root: ReadableSpan, root_attrs: Mapping[str, Any]) -> TraceError | None:
    if root.status.status_code is not StatusCode.ERROR:
        return None
    events = [e for e in root.events if e.name == sc.EXCEPTION_EVENT]
    event_attrs: Mapping[str, Any] = (events[-1].attributes or {}) if events else {}
    exc_type, exc_message = event_attrs.get(sc.EXCEPTION_TYPE), event_attrs.get(sc.EXCEPTION_MESSAGE)
    from_event = f"{exc_type}: {exc_message}" if exc_type and exc_message else (exc_message or exc_type)
    stack = event_attrs.get(sc.EXCEPTION_STACKTRACE) or root_attrs.get(sc.EVALTRACE_EXCEPTION_STACK)
    return TraceError(
        type="exception",
        message=str(root.status.description or from_event or "error"),
        stack=str(stack) if stack else None,
    )


def lone_output(root_attrs: Mapping[str, Any]) -> TraceOutput | None:
    """``_output()``'s TraceOutput of a root without messages or model call, when its ``output.value`` maps in one step.

    That is a compact JSON string without ``think>`` (or such a ``text/plain`` text). None: anything else, which
    ``_output()`` maps (with its notes). It cannot raise.
    """
    raw = root_attrs.get(sc.OUTPUT_VALUE)
    if type(raw) is not str:
        return None
    value: Any = raw
    if root_attrs.get(sc.OUTPUT_MIME_TYPE) != sc.MIME_TEXT:
        try:  # loads() of compact JSON text: a string's depth needs no check
            value, end = _SCAN(raw, 0)
        except Exception:
            return None
        if end != len(raw):
            return None  # not one compact JSON value: _output() decides
    if type(value) is not str or "think>" in value:
        return None
    output = _new(TraceOutput)  # _answer(value, None): no messages, so no reasoning
    SET_DICT(output, {"final_answer": value, "thinking": None, "structured": None})
    SET_FIELDS_SET(output, {"final_answer", "thinking"})
    SET_EXTRA(output, None)
    SET_PRIVATE(output, None)
    return output
