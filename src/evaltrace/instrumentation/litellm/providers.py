"""Where a ``litellm.completion`` call goes: its arguments by name, the provider and server LiteLLM routes it to.

Read once per call by ``LiteLLMCodec.route`` (:mod:`evaltrace.instrumentation.litellm.hooks`), and cached per
(model, ``custom_llm_provider``, ``api_base``).
"""

from __future__ import annotations

from typing import Any

from evaltrace._internal.engine.values import host_port

Server = tuple[str | None, int | None]

# LiteLLM's provider names -> gen_ai.provider.name (conventions.md); others are kept as LiteLLM names them.
PROVIDER_NAMES = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "azure": "azure.ai.openai",
    "azure_text": "azure.ai.openai",  # LiteLLM's Azure OpenAI text completions
    "azure_ai": "azure.ai.inference",
    "anthropic": "anthropic",
    "anthropic_text": "anthropic",  # LiteLLM's handler of Anthropic's legacy text completions
    "groq": "groq",
    "mistral": "mistral_ai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "ollama": "ollama",
    "ollama_chat": "ollama",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
    "watsonx_text": "ibm.watsonx.ai",
}
# Where a provider's API is when the call names no ``api_base`` and LiteLLM resolves none.
_DEFAULT_HOSTS: dict[str, Server] = {
    "openai": ("api.openai.com", 443),
    "text-completion-openai": ("api.openai.com", 443),
    "anthropic": ("api.anthropic.com", 443),
    "anthropic_text": ("api.anthropic.com", 443),
    "groq": ("api.groq.com", 443),
    "mistral": ("api.mistral.ai", 443),
    "cohere": ("api.cohere.com", 443),
    "cohere_chat": ("api.cohere.com", 443),
    "ollama": ("localhost", 11434),
    "ollama_chat": ("localhost", 11434),
    "deepseek": ("api.deepseek.com", 443),
    "xai": ("api.x.ai", 443),
    "gemini": ("generativelanguage.googleapis.com", 443),
}
UNKNOWN_PROVIDER = "litellm"  # a model LiteLLM cannot place (the call then fails in LiteLLM itself)


_RERANK_POSITIONAL = ("model", "query", "documents", "custom_llm_provider", "top_n", "rank_fields",
                      "return_documents", "max_chunks_per_doc", "max_tokens_per_doc")  # fmt: skip
# The leading parameters of each traced function, which callers may pass positionally.
_POSITIONAL = {
    "embedding": ("model", "input"),
    "aembedding": ("model", "input"),
    "text_completion": ("prompt", "model"),  # LiteLLM's order: the prompt first
    "atext_completion": ("prompt", "model"),
    "responses": ("input", "model"),  # the Responses API's order
    "aresponses": ("input", "model"),
    # Cohere's rerank parameters, in LiteLLM's order (``arerank`` takes no ``max_tokens_per_doc`` positionally)
    "rerank": _RERANK_POSITIONAL,
    "arerank": _RERANK_POSITIONAL[:-1],
}
_CHAT_POSITIONAL = ("model", "messages")


def bind(args: tuple[Any, ...], kwargs: dict[str, Any], function: str = "completion") -> dict[str, Any]:
    """The call's arguments by name, those given positionally included.

    ``completion(model, messages, ...)``, ``embedding(model, input, ...)``, ``text_completion(prompt, model, ...)``.
    """
    params = dict(zip(_POSITIONAL.get(function, _CHAT_POSITIONAL), args, strict=False))
    params.update(kwargs)
    return params


def model_group(params: dict[str, Any]) -> str | None:
    """The ``Router`` model name (alias) a call was sent for, from the metadata the Router adds; None if no Router.

    ``Router.completion(model="my-alias")`` picks a deployment of ``model_list`` and calls ``litellm.completion``
    with the deployment's own model, naming the alias in ``metadata["model_group"]`` (``litellm_metadata`` for the
    calls whose ``metadata`` goes to the provider).
    """
    for key in ("metadata", "litellm_metadata"):
        metadata = params.get(key)
        group = metadata.get("model_group") if isinstance(metadata, dict) else None
        if isinstance(group, str) and group:
            return group
    return None


def resolve(params: dict[str, Any]) -> tuple[str, Server]:
    """(``gen_ai.provider.name``, server) of one call, from its model, ``custom_llm_provider`` and ``api_base``."""
    model = params.get("model")
    custom = params.get("custom_llm_provider")
    base = params.get("api_base") or params.get("base_url")
    return _resolve(
        model if isinstance(model, str) else "",
        custom if isinstance(custom, str) else None,
        base if isinstance(base, str) else None,
    )


_resolved: dict[tuple[str, str | None, str | None], tuple[str, Server]] = {}


def _resolve(model: str, custom: str | None, base: str | None) -> tuple[str, Server]:
    key = (model, custom, base)
    found = _resolved.get(key)
    if found is not None:
        return found
    provider: str | None = custom
    resolved_base = base
    try:
        import litellm

        _, provider, _, dynamic_base = litellm.get_llm_provider(model=model, custom_llm_provider=custom, api_base=base)
        resolved_base = base or dynamic_base
    except Exception:  # LiteLLM cannot place the model (the call itself will say so): not cached, it may later
        name = PROVIDER_NAMES.get(custom, custom) if custom else UNKNOWN_PROVIDER
        return name, host_port(base) if base else (None, None)
    name = PROVIDER_NAMES.get(provider, provider) if provider else UNKNOWN_PROVIDER
    server = host_port(resolved_base) if resolved_base else _DEFAULT_HOSTS.get(provider or "", (None, None))
    if len(_resolved) >= 512:  # bounded: model names and bases come from user code, a handful per process
        _resolved.clear()
    _resolved[key] = (name, server)
    return name, server
