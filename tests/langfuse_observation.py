"""The observation type Langfuse gives a span, derived from its attributes as Langfuse does (conventions.md 4.2).

Tests use it to check what Langfuse would show, whichever attribute carried the type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Langfuse's ObservationTypeMapper, in priority order (the first that maps wins; none: "span").
_DIRECT = {t: t for t in "span generation event embedding agent tool chain retriever guardrail evaluator".split()}
_OPENINFERENCE = {
    "CHAIN": "chain",
    "RETRIEVER": "retriever",
    "LLM": "generation",
    "EMBEDDING": "embedding",
    "AGENT": "agent",
    "TOOL": "tool",
    "GUARDRAIL": "guardrail",
    "EVALUATOR": "evaluator",
}
_GENAI_OPERATION = {
    "chat": "generation",
    "completion": "generation",
    "text_completion": "generation",
    "generate_content": "generation",
    "generate": "generation",
    "embeddings": "embedding",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "execute_tool": "tool",
}
_MODEL_KEYS = ("langfuse.observation.model.name", "gen_ai.request.model", "gen_ai.response.model", "llm.model_name")


def langfuse_observation_type(attrs: Mapping[str, Any]) -> str:
    """The observation type Langfuse shows for a span with these attributes (lower case)."""
    for key, mapping in (
        ("langfuse.observation.type", _DIRECT),
        ("openinference.span.kind", _OPENINFERENCE),
        ("gen_ai.operation.name", _GENAI_OPERATION),
    ):
        found = mapping.get(attrs.get(key))  # type: ignore[arg-type]
        if found is not None:
            return found
    if attrs.get("gen_ai.tool.name") or attrs.get("gen_ai.tool.call.id"):
        return "tool"
    if any(attrs.get(key) for key in (*_MODEL_KEYS, "model")):
        return "generation"
    return "span"
