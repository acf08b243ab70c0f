"""Pure: an Agents SDK span's data -> the name, evaltrace kind and attributes of its OTel span.

Reads the SDK's span data classes by their ``type`` and fields only (duck-typed, so a span data class this
module has never seen still becomes a ``task`` span named by its type). Model calls reuse the OpenAI
instrumentation's request and response builders, so a model span the Agents SDK reports carries the same
attributes as one our OpenAI instrumentation records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from agents.models.fake_id import FAKE_RESPONSES_ID

from evaltrace._internal import list_values
from evaltrace._internal import semconv as sc
from evaltrace._internal.jsonutil import capped_json, capped_text
from evaltrace._internal.openai import build
from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.parts import field
from evaltrace._internal.openai.provider import provider_for_host
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import (
    Outcome,
    chat_outcome,
    outcome_attributes,
    responses_outcome,
    responses_usage,
)

Attributes = dict[str, Any]

# The SDK's span types (``SpanData.type``).
AGENT = "agent"
FUNCTION = "function"
HANDOFF = "handoff"
GUARDRAIL = "guardrail"
GENERATION = "generation"
RESPONSE = "response"
CUSTOM = "custom"
MCP_TOOLS = "mcp_tools"
TASK = "task"
TURN = "turn"
TRANSCRIPTION = "transcription"
SPEECH = "speech"
SPEECH_GROUP = "speech_group"
MODEL_TYPES = frozenset((GENERATION, RESPONSE))

# Model implementations whose generation spans are not calls of the ``openai`` client (model_config's
# ``model_impl``, set by the SDK's LiteLLM and any-llm models); every other generation span is one.
_NON_OPENAI_IMPLS = frozenset(("litellm", "any-llm"))

# kind -> (gen_ai.operation.name, Langfuse observation type, OpenInference span kind), as the decorators write.
_KIND_ATTRIBUTES: dict[str, tuple[str | None, str, str]] = {
    sc.KIND_TASK: (None, "chain", "CHAIN"),
    sc.KIND_WORKFLOW: (sc.OP_INVOKE_WORKFLOW, "chain", "CHAIN"),
    sc.KIND_AGENT: (sc.OP_INVOKE_AGENT, "agent", "AGENT"),
    sc.KIND_TOOL: (sc.OP_EXECUTE_TOOL, "tool", "TOOL"),
    sc.KIND_LLM: (sc.OP_CHAT, sc.LANGFUSE_TYPE_GENERATION, "LLM"),
}


def _kind_attributes(kind: str, span_type: str) -> Attributes:
    operation, langfuse_type, openinference_kind = _KIND_ATTRIBUTES[kind]
    attrs: Attributes = {
        sc.EVALTRACE_SPAN_KIND: kind,
        sc.LANGFUSE_OBSERVATION_TYPE: langfuse_type,
        sc.OPENINFERENCE_SPAN_KIND: openinference_kind,
        sc.OPENAI_AGENTS_SPAN_TYPE: span_type,
    }
    if operation is not None:
        attrs[sc.GEN_AI_OPERATION_NAME] = operation
    return attrs


def calls_openai_client(data: Any) -> bool:
    """Whether a model span's call goes through the ``openai`` client (so our OpenAI instrumentation sees it)."""
    if data.type == RESPONSE:
        return True
    config = field(data, "model_config")
    impl = config.get("model_impl") if isinstance(config, Mapping) else None
    return impl not in _NON_OPENAI_IMPLS


def workflow_start(name: str, group_id: str | None, metadata: Any, trace_id: str) -> tuple[str, Attributes]:
    """The span of an Agents SDK trace (a workflow): its name and attributes."""
    attrs = _kind_attributes(sc.KIND_WORKFLOW, "trace")
    attrs[sc.GEN_AI_WORKFLOW_NAME] = name
    attrs[sc.OPENAI_AGENTS_TRACE_ID] = trace_id
    if group_id:  # the SDK's grouping of traces of one conversation
        attrs[sc.GEN_AI_CONVERSATION_ID] = group_id
    if isinstance(metadata, Mapping) and metadata:
        attrs[sc.EVALTRACE_METADATA] = capped_json(dict(metadata))
    return f"{sc.OP_INVOKE_WORKFLOW} {name}", attrs


def span_start(data: Any) -> tuple[str, Attributes]:
    """Name and attributes known when the SDK starts a span (names may change at the end: see ``span_end``)."""
    span_type = str(data.type)
    start = _STARTS.get(span_type)
    if start is not None:
        return start(data, span_type)
    attrs = _kind_attributes(sc.KIND_TASK, span_type)
    name = _TASK_NAMES.get(span_type)
    return (name(data) if name is not None else span_type), attrs


def _agent_start(data: Any, span_type: str) -> tuple[str, Attributes]:
    attrs = _kind_attributes(sc.KIND_AGENT, span_type)
    attrs[sc.GEN_AI_AGENT_NAME] = str(data.name)
    return f"{sc.OP_INVOKE_AGENT} {data.name}", attrs


def _function_start(data: Any, span_type: str) -> tuple[str, Attributes]:
    attrs = _kind_attributes(sc.KIND_TOOL, span_type)
    attrs[sc.GEN_AI_TOOL_NAME] = str(data.name)
    attrs[sc.GEN_AI_TOOL_TYPE] = "function"
    return f"{sc.OP_EXECUTE_TOOL} {data.name}", attrs


def _model_start(data: Any, span_type: str) -> tuple[str, Attributes]:
    return _named_by_model(data, span_type, sc.KIND_LLM, sc.OP_CHAT)


def _named_by_model(data: Any, span_type: str, kind: str, operation: str) -> tuple[str, Attributes]:
    """``{operation} {model}`` (the operation alone without a model), with the model as the request's."""
    attrs = _kind_attributes(kind, span_type)
    model = field(data, "model")
    if model:
        attrs[sc.GEN_AI_REQUEST_MODEL] = str(model)
    return f"{operation} {model}" if model else operation, attrs


def _guardrail_start(data: Any, span_type: str) -> tuple[str, Attributes]:
    attrs = _kind_attributes(sc.KIND_TASK, span_type)
    # Langfuse and OpenInference both have a guardrail type; evaltrace's own kind stays task (no guardrail kind).
    attrs[sc.LANGFUSE_OBSERVATION_TYPE] = "guardrail"
    attrs[sc.OPENINFERENCE_SPAN_KIND] = "GUARDRAIL"
    attrs[sc.OPENAI_AGENTS_GUARDRAIL_NAME] = str(data.name)
    return f"guardrail {data.name}", attrs


def _audio_start(data: Any, span_type: str) -> tuple[str, Attributes]:
    return _named_by_model(data, span_type, sc.KIND_TASK, span_type)


_STARTS = {
    AGENT: _agent_start,
    FUNCTION: _function_start,
    GENERATION: _model_start,
    RESPONSE: _model_start,
    GUARDRAIL: _guardrail_start,
    TRANSCRIPTION: _audio_start,
    SPEECH: _audio_start,
}
# Names of the spans that are plain ``task`` spans.
_TASK_NAMES = {
    HANDOFF: lambda data: f"handoff {data.from_agent}",
    MCP_TOOLS: lambda data: f"mcp list_tools {data.server}" if data.server else "mcp list_tools",
    TURN: lambda data: f"turn {field(data, 'turn')} {field(data, 'agent_name')}",
    TASK: lambda data: f"task {field(data, 'name')}",
    CUSTOM: lambda data: str(data.name),
}


def span_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    """A new name (None: unchanged) and the attributes known when the SDK ends a span."""
    end = _ENDS.get(str(data.type))
    return end(data, capture, max_len) if end is not None else (None, {})


def _agent_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    attrs: Attributes = {}
    if data.tools:
        attrs[sc.OPENAI_AGENTS_AGENT_TOOLS] = [str(t) for t in data.tools]
    if data.handoffs:
        attrs[sc.OPENAI_AGENTS_AGENT_HANDOFFS] = [str(h) for h in data.handoffs]
    if data.output_type:
        attrs[sc.OPENAI_AGENTS_AGENT_OUTPUT_TYPE] = str(data.output_type)
    return None, attrs


def _function_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    attrs: Attributes = {}
    mcp = data.mcp_data if isinstance(data.mcp_data, Mapping) else None
    if mcp:
        attrs[sc.GEN_AI_TOOL_TYPE] = "extension"  # GenAI semconv: a tool run by an external agent/server
        server = mcp.get("server")
        if server:
            attrs[sc.OPENAI_AGENTS_MCP_SERVER] = str(server)
    if capture:
        if data.input is not None:
            attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = capped_text(str(data.input), max_len)
        if data.output is not None:
            attrs[sc.GEN_AI_TOOL_CALL_RESULT] = capped_json(data.output, max_len)
    return None, attrs


def _handoff_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    attrs: Attributes = {sc.OPENAI_AGENTS_HANDOFF_FROM: str(data.from_agent)}
    if data.to_agent is None:
        return None, attrs
    attrs[sc.OPENAI_AGENTS_HANDOFF_TO] = str(data.to_agent)
    return f"handoff {data.from_agent} -> {data.to_agent}", attrs


def _guardrail_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    return None, {sc.OPENAI_AGENTS_GUARDRAIL_TRIGGERED: bool(data.triggered)}


def _mcp_tools_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    attrs: Attributes = {}
    if data.server:
        attrs[sc.OPENAI_AGENTS_MCP_SERVER] = str(data.server)
    if data.result is not None:
        attrs[sc.OPENAI_AGENTS_MCP_TOOLS] = [str(t) for t in data.result]
    return None, attrs


def _custom_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    exported = data.export()
    custom = exported.get("data") if isinstance(exported, Mapping) else None
    return None, ({sc.OPENAI_AGENTS_CUSTOM_DATA: capped_json(custom, max_len)} if custom else {})


def _audio_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    """Transcription and speech: their text side only (the other side is base64 audio)."""
    span_type = str(data.type)
    text = field(data, "output") if span_type == TRANSCRIPTION else field(data, "input")
    if not capture or not isinstance(text, str):
        return None, {}
    return None, {(sc.OUTPUT_VALUE if span_type == TRANSCRIPTION else sc.INPUT_VALUE): capped_text(text, max_len)}


def prompt_of(data: Any) -> str | None:
    """The last user text of a model span's input (the question an agent run was asked), None without one."""
    given = field(data, "input")
    if given is None:
        return None
    if data.type == GENERATION:
        messages = req.input_messages(EndpointKind.CHAT, {"messages": list(given)})
    else:
        messages = req.input_messages(EndpointKind.RESPONSES, {"input": given})
    return list_values.prompt_text(messages)


def _model_name(model: Any) -> str | None:
    return str(model) if model else None


_ECHOED = (
    "instructions",
    "tools",
    "temperature",
    "top_p",
    "max_output_tokens",
    "conversation",  # a server-side conversation the run continues (``Runner.run(conversation_id=...)``)
    "previous_response_id",  # the response the run continues (``Runner.run(previous_response_id=...)``)
)


def _response_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    """A Responses-API call: the request and response the SDK recorded (``trace_include_sensitive_data``)."""
    response = field(data, "response")
    attrs: Attributes = dict(build.KIND_ATTRS[EndpointKind.RESPONSES])
    model = _model_name(field(response, "model")) if response is not None else None
    if response is not None:
        params: dict[str, Any] = {"model": model}
        given = field(data, "input")
        if given is not None:
            params["input"] = given
        # What the Response echoes of its request. Only what is absent unless it was asked for: ``reasoning`` and
        # ``text`` are echoed with the API's defaults, which would read as asked for when they were not.
        for key in _ECHOED:
            value = field(response, key)
            if value is not None and value != []:
                params[key] = _plain(value)
        attrs.update(build.request_attributes(EndpointKind.RESPONSES, params, capture, max_len))
        outcome = responses_outcome(response, capture)
        attrs.update(build.outcome_attributes_of(outcome, None, capture, max_len, model, provider_for_host(None)))
    else:
        usage = field(data, "usage")
        attrs.update(_usage_only(usage))
        response_id = field(data, "_response_id")
        if response_id:
            attrs[sc.GEN_AI_RESPONSE_ID] = str(response_id)
    attrs[sc.GEN_AI_PROVIDER_NAME] = provider_for_host(None)
    return (f"{sc.OP_CHAT} {model}" if model else None), attrs


def _generation_end(data: Any, capture: bool, max_len: int) -> tuple[str | None, Attributes]:
    """A Chat Completions call (the SDK's chat model, or its LiteLLM / any-llm models)."""
    model = _model_name(field(data, "model"))
    config = field(data, "model_config")
    config = config if isinstance(config, Mapping) else {}
    attrs: Attributes = dict(build.KIND_ATTRS[EndpointKind.CHAT])
    params: dict[str, Any] = {"model": model, "messages": list(field(data, "input") or ())}
    for key in ("temperature", "top_p", "max_tokens", "frequency_penalty", "presence_penalty"):
        if config.get(key) is not None:
            params[key] = config[key]
    attrs.update(build.request_attributes(EndpointKind.CHAT, params, capture, max_len))
    provider = config.get("provider") if isinstance(config.get("provider"), str) else None
    base_url = config.get("base_url")
    provider = provider or provider_for_host(urlsplit(base_url).hostname if isinstance(base_url, str) else None)
    outcome = _generation_outcome(field(data, "output"), field(data, "usage"), model, capture)
    attrs.update(build.outcome_attributes_of(outcome, None, capture, max_len, model, provider))
    attrs[sc.GEN_AI_PROVIDER_NAME] = provider
    return None, attrs


def _generation_outcome(output: Any, usage: Any, model: str | None, capture: bool) -> Outcome:
    """The outcome of a generation span: its output is chat messages, or (LiteLLM, any-llm) a Response dump."""
    items = list(output or ())
    if items and isinstance(items[0], Mapping) and "output" in items[0]:
        outcome = responses_outcome(items[0], capture)
        if items[0].get("id") == FAKE_RESPONSES_ID:
            # A Response the SDK built around a Chat Completions-style reply (its streamed chat model, LiteLLM,
            # any-llm): its id is a placeholder every such call shares, its model the one asked for and its finish
            # reason inferred. None is the provider's, so none is recorded (as for the SDK's chat messages below).
            outcome.response_id = None
            outcome.response_model = None
            outcome.finish_reasons = []
    else:
        choices = [{"message": item, "finish_reason": _chat_finish(item)} for item in items]
        outcome = chat_outcome({"choices": choices, "model": None}, capture)
        # The SDK's span keeps the messages, not the choices' finish reasons: the inferred one above is only the
        # output message's (a required field); the span's finish reasons are the provider's own, else none.
        outcome.finish_reasons = [str(r) for item in items if (r := field(item, "finish_reason"))]
    if outcome.usage is None and isinstance(usage, Mapping):
        outcome.usage = responses_usage(usage)
    return outcome


def _chat_finish(message: Any) -> str | None:
    """An output message's finish reason: its own when it has one, else a tool call means ``tool_calls``."""
    own = field(message, "finish_reason")
    if own:
        return str(own)
    return "tool_calls" if field(message, "tool_calls") else "stop"


def usage_of(data: Any) -> Attributes | None:
    """A model span's token counts (``gen_ai.usage.*``, as its ``chat`` span has them); None: none recorded."""
    if data.type == RESPONSE:
        response = field(data, "response")
        usage = responses_usage(field(response, "usage")) if response is not None else None
        if usage is None:
            recorded = field(data, "usage")  # content off: the SDK keeps the usage alone (newer SDKs)
            usage = responses_usage(recorded) if isinstance(recorded, Mapping) else None
    else:
        usage = _generation_outcome(field(data, "output"), field(data, "usage"), None, False).usage
    counts = outcome_attributes(Outcome(usage=usage)) if usage is not None else {}
    return counts or None


def invocation_usage(calls: list[Attributes | None]) -> Attributes:
    """The token counts of an agent invocation: each count summed over its model calls, when every call has it.

    A count some call did not report is left out (a sum of the others would read as the whole); so is every
    count when a call reported none.
    """
    if not calls or any(call is None for call in calls):
        return {}
    return {
        key: sum(call[key] for call in calls if call)
        for key in USAGE_KEYS
        if all(call and key in call for call in calls)
    }


# The counts an ``invoke_agent`` span carries (the GenAI conventions recommend the usage attributes on it).
USAGE_KEYS = (
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
)


def _usage_only(usage: Any) -> Attributes:
    """Token counts of a model span whose response was not recorded (content off in the SDK)."""
    if not isinstance(usage, Mapping):
        return {}
    return outcome_attributes(Outcome(usage=responses_usage(usage)))


_ENDS = {
    AGENT: _agent_end,
    FUNCTION: _function_end,
    HANDOFF: _handoff_end,
    GUARDRAIL: _guardrail_end,
    MCP_TOOLS: _mcp_tools_end,
    RESPONSE: _response_end,
    GENERATION: _generation_end,
    CUSTOM: _custom_end,
    TASK: _custom_end,
    TURN: _custom_end,
    TRANSCRIPTION: _audio_end,
    SPEECH: _audio_end,
    SPEECH_GROUP: _audio_end,
}


def _plain(value: Any) -> Any:
    """SDK models (tool definitions) as plain data for the request builders."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value
