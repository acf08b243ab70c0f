"""What a LangChain run is: its name, whether it is an agent, and whether an SDK instrumentor records its model call.

Split from :mod:`evaltrace.instrumentation.langchain._handler` (which imports these names back).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from opentelemetry.util.types import AttributeValue

from evaltrace._internal import semconv as sc

# ``ls_provider`` -> (module, class) of the evaltrace instrumentor that traces that provider's SDK calls itself,
# for LangChain integrations that call that SDK (langchain-groq: ``groq``; langchain-ollama: ``ollama.Client``;
# langchain-aws: boto3's bedrock-runtime; ChatLiteLLM: ``litellm``; langchain-google-genai 4+: ``google-genai``).
# Not listed, so the handler records them (and the SDK stands aside): langchain-mistralai calls the API with
# httpx, not ``mistralai``; langchain-cohere's ChatCohere calls the v1 chat, which ``instrument_cohere`` does
# not trace; ChatVertexAI (``google_vertexai``) calls the Vertex AI SDK, not ``google-genai``.
_PROVIDER_INSTRUMENTORS: dict[str, tuple[str, str]] = {
    "openai": ("evaltrace.instrumentation.openai", "OpenAIInstrumentor"),
    "azure": ("evaltrace.instrumentation.openai", "OpenAIInstrumentor"),
    "anthropic": ("evaltrace.instrumentation.anthropic", "AnthropicInstrumentor"),
    "groq": ("evaltrace.instrumentation.groq", "GroqInstrumentor"),
    "ollama": ("evaltrace.instrumentation.ollama", "OllamaInstrumentor"),
    "amazon_bedrock": ("evaltrace.instrumentation.bedrock", "BedrockInstrumentor"),
    "litellm": ("evaltrace.instrumentation.litellm", "LiteLLMInstrumentor"),
    "google_genai": ("evaltrace.instrumentation.google_genai", "GoogleGenAIInstrumentor"),
}
# ``ls_provider`` -> (distribution, first major version) of the LangChain integration that calls the SDK above:
# an older one calls another client, whose call no SDK span would record.
_INTEGRATION_SINCE: dict[str, tuple[str, int]] = {"google_genai": ("langchain-google-genai", 4)}
# kind -> (Langfuse observation type, OpenInference span kind)
_KIND_LABELS = {
    sc.KIND_AGENT: ("agent", "AGENT"),
    sc.KIND_TASK: ("chain", "CHAIN"),
    sc.KIND_TOOL: ("tool", "TOOL"),
    sc.KIND_RETRIEVER: (sc.LANGFUSE_TYPE_RETRIEVER, "RETRIEVER"),
    sc.KIND_LLM: (sc.LANGFUSE_TYPE_GENERATION, "LLM"),
}


def provider_traced(ls_provider: Any) -> bool:
    """Whether evaltrace's instrumentation of this provider's SDK is on (its call span is the model call's span)."""
    home = _PROVIDER_INSTRUMENTORS.get(ls_provider) if isinstance(ls_provider, str) else None
    if home is None or not _integration_calls_the_sdk(ls_provider):
        return False
    try:  # imported once (it patches nothing, and imports no SDK): whichever way it was turned on, it is this one
        instrumentor = getattr(importlib.import_module(home[0]), home[1])
    except (ImportError, AttributeError):
        return False
    return bool(getattr(instrumentor(), "is_instrumented_by_opentelemetry", False))


@functools.cache
def _integration_calls_the_sdk(ls_provider: str) -> bool:
    """Whether the installed LangChain integration of this provider calls the SDK its instrumentor traces."""
    since = _INTEGRATION_SINCE.get(ls_provider)
    if since is None:
        return True
    try:
        major = int(importlib.metadata.version(since[0]).split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return major >= since[1]


def _name(kwargs: Mapping[str, Any], serialized: Any, default: str) -> str:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    if isinstance(serialized, Mapping):
        if isinstance(serialized.get("name"), str) and serialized["name"]:
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, Sequence) and ids and isinstance(ids[-1], str):
            return ids[-1]
    return default


def _is_agent(name: str, serialized: Any, metadata: Mapping[str, Any]) -> bool:
    """A LangGraph graph (not one of its nodes) or a classic AgentExecutor."""
    if metadata.get("ls_integration") == "langgraph" and "langgraph_node" not in metadata:
        return True
    ids = serialized.get("id") if isinstance(serialized, Mapping) else None
    return name == "AgentExecutor" or (isinstance(ids, Sequence) and "AgentExecutor" in ids)


def _agent_attributes(name: str, metadata: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """An agent span's GenAI attributes: the operation, the agent's name, its LangGraph thread if any."""
    attributes: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT, sc.GEN_AI_AGENT_NAME: name}
    attributes.update(conversation_attributes(metadata))
    return attributes


def conversation_attributes(metadata: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    """``gen_ai.conversation.id`` of a run inside a LangGraph thread (its ``thread_id``), else nothing.

    LangGraph copies ``config["configurable"]`` into the metadata of every run of the graph, its model calls and
    tools included, so each GenAI span of a turn names the conversation it belongs to (never an invented id).
    """
    thread = thread_of(metadata)
    return {sc.GEN_AI_CONVERSATION_ID: thread} if thread is not None else {}


def thread_of(metadata: Mapping[str, Any] | None) -> str | None:
    """The LangGraph thread (``configurable.thread_id``) a run belongs to, as text, or None.

    LangGraph takes any id its checkpointer can store: text, a number, or (often) a ``uuid.UUID``.
    """
    thread = metadata.get("thread_id") if metadata else None
    if isinstance(thread, str | int | UUID) and not isinstance(thread, bool) and str(thread):
        return str(thread)
    return None
