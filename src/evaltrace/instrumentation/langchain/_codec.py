"""Pure: LangChain callback payloads (messages, ``LLMResult``, documents) -> GenAI attributes.

Reads only public fields of ``langchain_core`` objects (``BaseMessage.type`` / ``content`` / ``tool_calls`` /
``usage_metadata`` / ``response_metadata``, ``LLMResult.generations`` / ``llm_output``, ``Document``) by
attribute, so it works on every model integration without importing any of them. Content blocks follow both
LangChain's standard blocks (``text``, ``reasoning``, ``image``, ``tool_call``) and the provider-native ones
integrations pass through (OpenAI ``image_url``, Anthropic ``thinking`` / ``tool_use``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from evaltrace._internal import semconv as sc
from evaltrace._internal.engine.values import count
from evaltrace._internal.genai_parts import finish_reason as genai_finish_reason
from evaltrace._internal.genai_parts import tool_definitions
from evaltrace._internal.openai.parts import (
    Message,
    Part,
    assistant_parts,
    reasoning_part,
    text_part,
    tool_call_part,
    tool_response_part,
    uri_part,
)
from evaltrace._internal.openai.response import responses_finish_reason

# BaseMessage.type -> GenAI role (chunks carry their class name as type).
_ROLES = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "tool",
    "FunctionMessageChunk": "tool",
}
# LangChain's ``ls_provider`` metadata -> gen_ai.provider.name (conventions.md 1.3); others are kept as given.
_PROVIDERS = {
    "azure": "azure.ai.openai",
    "google_genai": "gcp.gen_ai",
    "google_vertexai": "gcp.vertex_ai",
    "google_anthropic_vertex": "gcp.vertex_ai",
    "amazon_bedrock": "aws.bedrock",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
}
# ``ls_provider``s whose APIs take the system prompt apart from the messages (Anthropic's ``system``, Gemini's
# ``system_instruction``, Bedrock's ``system``), where their integrations put the leading system messages: those are
# ``gen_ai.system_instructions`` there, as evaltrace's instrumentation of the provider's SDK records the same call.
# Elsewhere (OpenAI, Mistral, Ollama...) a system message is one of the messages sent, and stays one.
_SYSTEM_APART = frozenset(
    {
        "anthropic",
        "google_anthropic_vertex",
        "google_genai",
        "google_vertexai",
        "amazon_bedrock",
        "bedrock",
        "bedrock_converse",
    }
)
# Of those, where the integration also moves a later system message into the system prompt when it is the only one
# (a run of them counts as one): langchain-anthropic does so (with a warning) unless the model's profile allows
# system messages mid-conversation and the message follows a user turn, and raises on a second one. Others leave a
# later system message in place.
_SYSTEM_HOISTED = frozenset({"anthropic"})
# invocation_params key -> request attribute (the keys chat model integrations use for the same parameter).
_PARAMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (sc.GEN_AI_REQUEST_TEMPERATURE, ("temperature",)),
    (sc.GEN_AI_REQUEST_MAX_TOKENS, ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")),
    (sc.GEN_AI_REQUEST_TOP_P, ("top_p",)),
    (sc.GEN_AI_REQUEST_TOP_K, ("top_k",)),
    (sc.GEN_AI_REQUEST_FREQUENCY_PENALTY, ("frequency_penalty",)),
    (sc.GEN_AI_REQUEST_PRESENCE_PENALTY, ("presence_penalty",)),
    (sc.GEN_AI_REQUEST_SEED, ("seed",)),
)


# Counts: integers. top_k too when whole (as instrument_anthropic() records it: an int, as on the conventions' main
# branch); the other sampling parameters are doubles.
_INTEGERS = (sc.GEN_AI_REQUEST_MAX_TOKENS, sc.GEN_AI_REQUEST_SEED)


def provider_name(ls_provider: Any) -> str | None:
    """gen_ai.provider.name of a model, from LangChain's ``ls_provider`` metadata."""
    return _PROVIDERS.get(ls_provider, ls_provider) if isinstance(ls_provider, str) and ls_provider else None


def request_attributes(metadata: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """Model and request parameters of one model call, from its ``ls_*`` metadata and invocation params."""
    out: dict[str, Any] = {}
    model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name") or params.get("model_id")
    if isinstance(model, str) and model:
        out[sc.GEN_AI_REQUEST_MODEL] = model
    provider = provider_name(metadata.get("ls_provider"))
    if provider:
        out[sc.GEN_AI_PROVIDER_NAME] = provider
    for key, names in _PARAMS:
        value = next((params[n] for n in names if params.get(n) is not None), None)
        if value is None and key == sc.GEN_AI_REQUEST_TEMPERATURE:
            value = metadata.get("ls_temperature")
        if value is None and key == sc.GEN_AI_REQUEST_MAX_TOKENS:
            value = metadata.get("ls_max_tokens")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = (
                int(value)
                if key in _INTEGERS or (key == sc.GEN_AI_REQUEST_TOP_K and int(value) == value)
                else float(value)
            )
    stop = params.get("stop") or metadata.get("ls_stop")
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, Sequence) and stop and all(isinstance(s, str) for s in stop):
        out[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = list(stop)
    n = params.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n != 1:
        out[sc.GEN_AI_REQUEST_CHOICE_COUNT] = n
    if params.get("stream") is True or params.get("streaming") is True:
        out[sc.GEN_AI_REQUEST_STREAM] = True
    out.update(_answer_attributes(params))
    return out


def _answer_attributes(params: Mapping[str, Any]) -> dict[str, str]:
    """What the request asks of the answer: its reasoning effort and its output format."""
    out: dict[str, str] = {}
    # OpenAI Responses {"effort": ...}; Anthropic's output_config {"effort": ...}; Chat Completions reasoning_effort
    reasoning = params.get("reasoning") or params.get("output_config")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else params.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        out[sc.GEN_AI_REQUEST_REASONING_LEVEL] = effort
    output_type = _output_type(params.get("response_format"))
    if output_type is None:  # Anthropic's structured outputs: output_config {"format": ...} (output_format before)
        config = params.get("output_config")
        output_type = _output_type(
            (config.get("format") if isinstance(config, Mapping) else None) or params.get("output_format")
        )
    if output_type:
        out[sc.GEN_AI_OUTPUT_TYPE] = output_type
    return out


def _output_type(response_format: Any) -> str | None:
    """``gen_ai.output.type`` of the OpenAI-style ``response_format`` an integration sends, if it names one.

    ``with_structured_output`` puts the schema's class there (json_schema, turned into the wire form later), or a
    ``{"type": "json_schema" | "json_object" | "text"}`` mapping. Structured output by a forced tool call
    (``method="function_calling"``) asks for no output format: the request carries a tool, not a format.
    """
    if isinstance(response_format, type):
        return "json"
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if kind in ("json_schema", "json_object"):
        return "json"
    return "text" if kind == "text" else None


def tools_of(params: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The tool definitions bound to the model (``bind_tools`` puts them in the invocation params), or None."""
    tools = params.get("tools")
    if not isinstance(tools, Sequence) or isinstance(tools, str) or not tools:
        return None
    try:
        return tool_definitions(tools)
    except ValueError:  # a provider-native tool without a name (a server tool): nothing to define
        return None


def is_a(value: Any, classes: Collection[tuple[str, str]]) -> bool:
    """Whether ``value`` is an instance of one of ``classes`` (``(module, qualname)`` pairs), subclasses included.

    Told by name over the MRO, so a LangChain / LangGraph class is recognised without importing its package.
    """
    return any((c.__module__, c.__qualname__) in classes for c in type(value).__mro__)


# --- messages --------------------------------------------------------------------------------------------


def role_of(message: Any) -> str:
    """GenAI role of a LangChain message (``ChatMessage`` keeps its own role)."""
    kind = getattr(message, "type", None)
    if kind in ("chat", "ChatMessageChunk"):
        return str(getattr(message, "role", "user"))
    if isinstance(message, Mapping):  # a message given as a dict ({"role": ..., "content": ...})
        return str(message.get("role") or "user")
    return _ROLES.get(kind, str(kind)) if isinstance(kind, str) else "user"


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _block_parts(block: Any) -> list[Part]:
    """One content block -> parts; tool-call blocks are skipped (the message's ``tool_calls`` holds them)."""
    if isinstance(block, str):
        return [text_part(block)]
    if not isinstance(block, Mapping):
        return []
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return [text_part(block["text"])]
    if kind in ("reasoning", "thinking"):
        text = block.get("reasoning") or block.get("thinking") or ""
        summary = block.get("summary")  # OpenAI Responses reasoning items: a list of summary_text blocks
        if not text and isinstance(summary, Sequence):
            text = "\n\n".join(str(_field(s, "text")) for s in summary if _field(s, "text"))
        return [reasoning_part(str(text))]
    if kind == "redacted_thinking":
        return [{"type": "reasoning", "content": "", "redacted": True}]
    if kind in ("tool_call", "tool_use", "tool_call_chunk", "function_call", "server_tool_call"):
        return []
    if kind == "image_url":
        url = block.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        return [uri_part(url, "image")] if isinstance(url, str) else []
    if kind in ("image", "audio", "video", "file"):
        modality = "document" if kind == "file" else kind
        if isinstance(block.get("url"), str):
            return [uri_part(block["url"], modality)]
        data = block.get("base64") or block.get("data")
        mime = block.get("mime_type") or block.get("mimeType") or ""
        if isinstance(data, str):  # never the payload: a data URL is recorded by media type and size only
            return [uri_part(f"data:{mime};base64,{data}", modality)]
        file_id = block.get("file_id") or block.get("id")
        return [{"type": "file", "modality": modality, **({"file_id": str(file_id)} if file_id else {})}]
    return [{"type": str(kind)}] if kind else []


def _content_parts(content: Any) -> list[Part]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [text_part(content)]
    if isinstance(content, Sequence):
        return [part for block in content for part in _block_parts(block)]
    return [text_part(str(content))]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = _content_parts(content)
    return "\n".join(p["content"] for p in parts if p.get("type") == "text")


def _assistant_parts(message: Any) -> list[Part]:
    parts: list[Part] = []
    extra = _field(message, "additional_kwargs") or {}
    reasoning = extra.get("reasoning_content") if isinstance(extra, Mapping) else None
    if isinstance(reasoning, str) and reasoning:
        parts.append(reasoning_part(reasoning))
    for part in _content_parts(_field(message, "content")):
        if part.get("type") == "text":
            parts.extend(assistant_parts(None, part["content"]))  # an inline <think> block becomes reasoning
        else:
            parts.append(part)
    for call in _field(message, "tool_calls") or ():
        parts.append(tool_call_part(_field(call, "id"), _field(call, "name"), _field(call, "args")))
    for call in _field(message, "invalid_tool_calls") or ():
        parts.append(tool_call_part(_field(call, "id"), _field(call, "name"), _field(call, "args")))
    return parts


def message(message: Any) -> Message:
    """One LangChain message (or a role/content dict) -> a GenAI ChatMessage."""
    role = role_of(message)
    if role == "assistant":
        parts = _assistant_parts(message)
    elif role == "tool":
        call_id = _field(message, "tool_call_id")
        parts = [tool_response_part(call_id, _text(_field(message, "content")))]
    else:
        parts = _content_parts(_field(message, "content"))
    out: Message = {"role": role, "parts": parts}
    name = _field(message, "name")
    if isinstance(name, str) and name and role != "tool":
        out["name"] = name
    return out


def messages(batch: Sequence[Any]) -> list[Message]:
    """The input messages of one model call."""
    return [message(m) for m in batch]


def split_system(batch: Sequence[Any], ls_provider: Any, model: Any = None) -> tuple[list[Part], Sequence[Any]]:
    """The system instructions sent apart from the messages (see ``_SYSTEM_APART``), and the messages left.

    The leading system messages of a provider that takes its system prompt apart (with Anthropic, the only run of
    system messages wherever it is, unless ``model`` may be sent it in place: see ``_SYSTEM_HOISTED``); nothing
    elsewhere.
    """
    if ls_provider not in _SYSTEM_APART:
        return [], batch
    roles = [role_of(m) for m in batch]
    first = roles.index("system") if "system" in roles else len(roles)
    end = first
    while end < len(roles) and roles[end] == "system":
        end += 1
    if first == end or (
        first
        and (
            ls_provider not in _SYSTEM_HOISTED
            or "system" in roles[end:]
            or (roles[first - 1] in ("user", "tool") and _takes_system_mid_conversation(model))
        )
    ):
        return [], batch
    system = [p for m in batch[first:end] for p in _content_parts(_field(m, "content"))]
    return system, [*batch[:first], *batch[end:]] if first else batch[end:]


def _takes_system_mid_conversation(model: Any) -> bool:
    """Whether langchain-anthropic's default profile of ``model`` lets a system message stay where it is.

    The profile is the integration's (a model's own ``profile=`` override is not in the callback): read from its
    defaults, and when they cannot be read the message counts as moved, as for most models.
    """
    if not isinstance(model, str) or not model:
        return False
    try:
        from langchain_anthropic.chat_models import _get_default_model_profile

        return bool(_get_default_model_profile(model).get("mid_conversation_system_messages"))
    except Exception:  # another langchain-anthropic (no such lookup), or no langchain-anthropic at all
        return False


# --- response --------------------------------------------------------------------------------------------


def finish_reason(generation: Any) -> str | None:
    """A generation's finish reason, verbatim, from wherever its integration put it.

    An OpenAI Responses API answer has a status instead (langchain-openai keeps ``status`` and
    ``incomplete_details`` in the message's ``response_metadata``, whole or streamed): it reads as
    ``instrument_openai()`` reads the same response, so one step has one finish reason whichever records it.
    """
    message = _field(generation, "message")
    metadata = _field(message, "response_metadata")
    for source in (_field(generation, "generation_info"), metadata):
        if isinstance(source, Mapping):
            for key in ("finish_reason", "stop_reason", "stopReason", "done_reason"):
                value = source.get(key)
                if isinstance(value, str) and value:
                    return value
    if isinstance(metadata, Mapping) and metadata.get("object") == "response" and metadata.get("status"):
        # A function call whose arguments do not parse is in ``invalid_tool_calls`` only: still a tool call.
        called = bool(_field(message, "tool_calls") or _field(message, "invalid_tool_calls"))
        return responses_finish_reason(metadata, called)
    return None


def output_messages(generations: Sequence[Any]) -> tuple[list[Message], list[str]]:
    """One output message per generation (choice) of the first prompt, and the verbatim finish reasons."""
    out: list[Message] = []
    reasons: list[str] = []
    for generation in generations:
        chat_message = _field(generation, "message")
        reason = finish_reason(generation)
        if reason:
            reasons.append(reason)
        if chat_message is not None:
            parts = _assistant_parts(chat_message)
        else:  # a text-completion model's Generation
            text = _field(generation, "text")
            parts = assistant_parts(None, text) if isinstance(text, str) and text else []
        if reason is not None:
            mapped = genai_finish_reason(reason)
        else:
            mapped = "tool_call" if any(p.get("type") == "tool_call" for p in parts) else "stop"
        out.append({"role": "assistant", "parts": parts, "finish_reason": mapped})
    return out, reasons


def usage_attributes(generations: Sequence[Any], llm_output: Any) -> dict[str, int]:
    """Token usage: the first ``usage_metadata`` of the generations' messages, else ``llm_output`` token usage.

    ``usage_metadata`` (LangChain's standard) counts input tokens with cached ones included and output tokens with
    reasoning included, as the GenAI conventions do; integrations put the same object on every choice, so the
    first one found is the call's.
    """
    out: dict[str, int] = {}
    usage = next(
        (u for g in generations if isinstance(u := _field(_field(g, "message"), "usage_metadata"), Mapping)), None
    )
    if usage is not None:
        details = usage.get("input_token_details") or {}
        inputs = count(usage.get("input_tokens"))
        pairs = (
            # No call reads no input: a 0 is a count the integration did not get (langchain-anthropic reads a
            # stream's usage from its last event, where older streams repeat the output count only).
            (sc.GEN_AI_USAGE_INPUT_TOKENS, inputs or None),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, usage.get("output_tokens")),
            (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, details.get("cache_read")),
            (sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, _cache_creation(details)),
            (sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, (usage.get("output_token_details") or {}).get("reasoning")),
        )
        return {key: number for key, value in pairs if (number := count(value)) is not None}
    token_usage = _field(llm_output, "token_usage") or _field(llm_output, "usage") if llm_output else None
    if isinstance(token_usage, Mapping):
        for key, names in (
            (sc.GEN_AI_USAGE_INPUT_TOKENS, ("prompt_tokens", "input_tokens")),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, ("completion_tokens", "output_tokens")),
        ):
            value = next((v for n in names if (v := count(token_usage.get(n))) is not None), None)
            if value is not None:
                out[key] = value
    return out


def _cache_creation(details: Mapping[str, Any]) -> int | None:
    """Tokens written to the prompt cache: ``cache_creation``, or the sum of its per-TTL counts.

    langchain-anthropic splits Anthropic's cache writes by lifetime (``ephemeral_5m_input_tokens``,
    ``ephemeral_1h_input_tokens``) and then zeroes ``cache_creation`` so that LangChain does not count them twice;
    the writes are still in ``input_tokens``, and priced above plain input.
    """
    creation = count(details.get("cache_creation"))
    by_ttl = [n for key, value in details.items() if key.startswith("ephemeral_") and (n := count(value)) is not None]
    if by_ttl and sum(by_ttl) > (creation or 0):
        return sum(by_ttl)
    return creation


def response_attributes(generations: Sequence[Any], llm_output: Any) -> dict[str, Any]:
    """Response id and model: the first message's ``response_metadata``, else ``llm_output``."""
    out: dict[str, Any] = {}
    metadata = next(
        (m for g in generations if isinstance(m := _field(_field(g, "message"), "response_metadata"), Mapping)), {}
    )
    sources = [metadata, llm_output if isinstance(llm_output, Mapping) else {}]
    for key, names in (
        (sc.GEN_AI_RESPONSE_MODEL, ("model_name", "model", "model_id")),
        (sc.GEN_AI_RESPONSE_ID, ("id",)),
        (sc.OPENAI_RESPONSE_SYSTEM_FINGERPRINT, ("system_fingerprint",)),
        (sc.OPENAI_RESPONSE_SERVICE_TIER, ("service_tier",)),
    ):
        value = next((s[n] for s in sources for n in names if isinstance(s.get(n), str) and s[n]), None)
        if value is not None:
            out[key] = value
    if sc.GEN_AI_RESPONSE_ID not in out:  # the message id integrations derive from the response (run-... is ours)
        message_id = next((i for g in generations if isinstance(i := _field(_field(g, "message"), "id"), str)), None)
        if message_id and not message_id.startswith(("run-", "lc_run-")):
            out[sc.GEN_AI_RESPONSE_ID] = message_id
    return out


# --- documents -------------------------------------------------------------------------------------------


def documents(docs: Sequence[Any]) -> list[dict[str, Any]]:
    """Retrieved ``Document``s -> ``gen_ai.retrieval.documents`` entries (id, score when known, content, metadata)."""
    out: list[dict[str, Any]] = []
    for doc in docs:
        metadata = _field(doc, "metadata")
        metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        entry: dict[str, Any] = {}
        doc_id = _field(doc, "id") or metadata.get("id")
        if doc_id is not None:
            entry["id"] = str(doc_id)
        score = metadata.get("score", metadata.get("relevance_score"))
        if isinstance(score, int | float) and not isinstance(score, bool):
            entry["score"] = score
        content = _field(doc, "page_content")
        entry["content"] = content if isinstance(content, str) else str(doc)
        if metadata:
            entry["metadata"] = metadata
        out.append(entry)
    return out
