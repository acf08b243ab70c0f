"""Built-in ``response_mapping`` presets: JSONPath selectors for the response bodies of four provider APIs.

Each field lists alternative selectors; the first one that matches a value wins, so one preset reads every
shape a provider answers in (OpenAI's Chat Completions and Responses APIs; Gemini's REST camelCase and its
Python SDK's snake_case dump). Shapes, from each provider's API reference:

* Anthropic Messages: ``content[]`` blocks of type ``text`` (``text``), ``thinking`` (``thinking``,
  ``signature``), ``redacted_thinking`` (encrypted ``data``, nothing readable) and ``tool_use`` (``id``,
  ``name``, ``input``); ``usage.input_tokens`` (+ the cache read/creation counts, which it keeps apart) and
  ``usage.output_tokens`` (thinking included), of which ``usage.output_tokens_details.thinking_tokens`` (a flat
  ``usage.thinking_tokens`` from some compatible servers) are thinking.
* OpenAI Chat Completions: ``choices[0].message.content`` and ``tool_calls[]`` (``id``, ``function.name``,
  ``function.arguments`` as JSON text); ``usage.prompt_tokens`` / ``completion_tokens`` /
  ``completion_tokens_details.reasoning_tokens`` (reasoning text is never returned). Responses API:
  ``output[]`` items of type ``message`` (``content[]`` of ``output_text``), ``reasoning`` (``summary[]`` of
  ``summary_text``) and ``function_call`` (``call_id``, ``name``, ``arguments``); ``usage.input_tokens`` /
  ``output_tokens`` / ``output_tokens_details.reasoning_tokens``.
* DeepSeek: the Chat Completions shape plus ``message.reasoning_content`` (vLLM and others: ``reasoning``);
  R1-style ``<think>`` blocks inlined in the content are split off for every adapter, not only here.
* Gemini ``generateContent``: ``candidates[0].content.parts[]``, where parts with ``thought: true`` are
  reasoning summaries, other ``text`` parts the answer, ``functionCall`` (``name``, ``args``, ``id``) parts
  tool calls; ``usageMetadata.promptTokenCount`` / ``candidatesTokenCount`` / ``thoughtsTokenCount``.
  ``candidatesTokenCount`` leaves the thoughts out, so the preset adds them to ``token_output``: evaltrace
  counts thinking tokens inside the output tokens, as OpenAI and Anthropic report them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """Selectors of one provider's responses."""

    name: str
    selectors: Mapping[str, tuple[str, ...]]
    """Field name -> alternative JSONPath selectors (the first that matches a value wins)."""
    output_excludes_thinking: bool = False
    """The provider's output count leaves thinking tokens out; they are added to ``token_output``."""
    provider: str = ""
    """``gen_ai.provider.name`` of the API, for the price lookup of ``cost_usd`` when the body has no cost."""
    model: tuple[str, ...] = ("$.model",)
    """Selectors of the model that answered (priced with ``evaltrace.pricing``)."""
    cached_tokens: tuple[str, ...] = ()
    """Selectors of the input tokens read from the provider's prompt cache (billed at the cached rate)."""
    cache_write_tokens: tuple[str, ...] = ()
    """Selectors of the input tokens written to the prompt cache (billed at the cache-write rate)."""


_CHAT = "$.choices[0].message"
_CHAT_TOOL_CALLS = f"{_CHAT}.tool_calls[*]"
_CHAT_TOKENS = {
    "token_input": ("$.usage.prompt_tokens",),
    "token_output": ("$.usage.completion_tokens",),
    "token_thinking": ("$.usage.completion_tokens_details.reasoning_tokens",),
}

ANTHROPIC = Preset(
    "anthropic",
    {
        "final_answer": ('$.content[?@.type == "text"].text',),
        "thinking": ('$.content[?@.type == "thinking"].thinking',),
        "tool_calls": ('$.content[?@.type == "tool_use"]',),
        # Anthropic's input_tokens excludes cached prompt tokens; OpenAI's prompt_tokens includes them.
        "token_input": ("$.usage['input_tokens','cache_creation_input_tokens','cache_read_input_tokens']",),
        "token_output": ("$.usage.output_tokens",),
        "token_thinking": ("$.usage.output_tokens_details.thinking_tokens", "$.usage.thinking_tokens"),
    },
    provider="anthropic",
    cached_tokens=("$.usage.cache_read_input_tokens",),
    cache_write_tokens=("$.usage.cache_creation_input_tokens",),
)

OPENAI = Preset(
    "openai",
    {
        "final_answer": (
            f"{_CHAT}.content",
            '$.output[?@.type == "message"].content[?@.type == "output_text"].text',
        ),
        "thinking": ('$.output[?@.type == "reasoning"].summary[*].text',),
        "tool_calls": (_CHAT_TOOL_CALLS, '$.output[?@.type == "function_call"]'),
        "token_input": ("$.usage.prompt_tokens", "$.usage.input_tokens"),
        "token_output": ("$.usage.completion_tokens", "$.usage.output_tokens"),
        "token_thinking": (
            "$.usage.completion_tokens_details.reasoning_tokens",
            "$.usage.output_tokens_details.reasoning_tokens",
        ),
    },
    provider="openai",
    cached_tokens=("$.usage.prompt_tokens_details.cached_tokens", "$.usage.input_tokens_details.cached_tokens"),
)

DEEPSEEK = Preset(
    "deepseek",
    {
        "final_answer": (f"{_CHAT}.content",),
        "thinking": (f"{_CHAT}.reasoning_content", f"{_CHAT}.reasoning"),
        "tool_calls": (_CHAT_TOOL_CALLS,),
        **_CHAT_TOKENS,
    },
    provider="deepseek",
    cached_tokens=("$.usage.prompt_cache_hit_tokens",),
)

_PARTS = "$.candidates[0].content.parts"
GEMINI = Preset(
    "gemini",
    {
        "final_answer": (f"{_PARTS}[?@.thought != true].text",),
        "thinking": (f"{_PARTS}[?@.thought == true].text",),
        "tool_calls": (f"{_PARTS}[*].functionCall", f"{_PARTS}[*].function_call"),
        "token_input": ("$.usageMetadata.promptTokenCount", "$.usage_metadata.prompt_token_count"),
        "token_output": ("$.usageMetadata.candidatesTokenCount", "$.usage_metadata.candidates_token_count"),
        "token_thinking": ("$.usageMetadata.thoughtsTokenCount", "$.usage_metadata.thoughts_token_count"),
    },
    output_excludes_thinking=True,
    provider="gcp.gemini",
    model=("$.modelVersion", "$.model_version"),
    cached_tokens=("$.usageMetadata.cachedContentTokenCount", "$.usage_metadata.cached_content_token_count"),
)

PRESETS: dict[str, Preset] = {p.name: p for p in (ANTHROPIC, OPENAI, DEEPSEEK, GEMINI)}
"""Preset name -> selectors."""
