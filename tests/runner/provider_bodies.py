"""Response bodies of four provider APIs, served by a local HTTP server to test the response_mapping presets.

OpenAI bodies are real recordings (tests/fixtures/openai-cassettes, from opentelemetry-python-contrib's
openai-v2 tests). The others follow each provider's API reference example responses field for field:
Anthropic Messages with extended thinking and tool use (thinking / redacted_thinking / text / tool_use blocks,
usage with cache counts), DeepSeek chat completions (deepseek-reasoner's ``reasoning_content``, and DeepSeek-R1
served without a reasoning parser, which inlines ``<think>``), and Gemini ``generateContent`` with thought
summaries (``thought: true`` parts, ``functionCall`` parts, ``usageMetadata`` with ``thoughtsTokenCount``; and
the Python SDK's snake_case dump of the same response).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CASSETTE_DIR = Path(
    os.environ.get("EVALTRACE_CASSETTE_DIR", REPO_ROOT / "tests" / "fixtures" / "openai-cassettes" / "otel-contrib")
)


def recorded(name: str) -> dict[str, Any]:
    """The first recorded response body of cassette ``name``."""
    interactions = yaml.safe_load((CASSETTE_DIR / name).read_text())["interactions"]
    body: dict[str, Any] = json.loads(interactions[0]["response"]["body"]["string"])
    return body


def openai_bodies() -> dict[str, dict[str, Any]]:
    """Chat Completions (text; two tool calls) and Responses (reasoning tokens; function call; summary)."""
    reasoning = recorded("test_responses_create_reports_reasoning_tokens[content_mode0].yaml")
    summarised = copy.deepcopy(reasoning)
    # Same recording with a reasoning summary requested (reasoning.summary="auto"): the documented item shape.
    summarised["output"][0]["summary"] = [
        {"type": "summary_text", "text": "**Transposing rows**\n\nSplit the rows, then emit each column."}
    ]
    return {
        "chat": recorded("test_chat_completion_with_content.yaml"),
        "chat_tools": recorded("test_chat_completion_tool_calls_no_content.yaml"),
        "responses": reasoning,
        "responses_summary": summarised,
        "responses_tools": recorded("test_responses_create_captures_tool_call_content[content_mode0].yaml"),
    }


ANTHROPIC_THINKING_TOOL_USE: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {
            "type": "thinking",
            "thinking": "The user wants the weather in Paris. I should call get_weather with the city.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds5S0i8WD1Fz4sdF7fZnW",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
        {"type": "text", "text": "I'll check the current weather in Paris."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"location": "Paris, France", "unit": "celsius"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 472,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 128,
        "output_tokens": 197,
        "service_tier": "standard",
    },
}

ANTHROPIC_ANSWER: dict[str, Any] = {
    "id": "msg_01BTqjK4eDM7YpVdS8Vq1pA9",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {
            "type": "thinking",
            "thinking": "27 * 453: 27 * 400 = 10800, 27 * 53 = 1431, total 12231.",
            "signature": "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV",
        },
        # Long answers come in several text blocks (around citations): joined with no separator.
        {"type": "text", "text": "27 × 453 = "},
        {"type": "text", "text": "12,231."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 30,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": None,
        "output_tokens": 90,
    },
}

# The thinking token count: under ``usage.output_tokens_details`` (the Messages API today, typed in the anthropic
# SDK 2.14's ``OutputTokensDetails``), or flat in ``usage`` (as some Anthropic-compatible servers send it).
ANTHROPIC_THINKING_DETAILS: dict[str, Any] = {
    **ANTHROPIC_ANSWER,
    "usage": {**ANTHROPIC_ANSWER["usage"], "output_tokens_details": {"thinking_tokens": 61}},
}
ANTHROPIC_THINKING_FLAT: dict[str, Any] = {
    **ANTHROPIC_ANSWER,
    "usage": {**ANTHROPIC_ANSWER["usage"], "thinking_tokens": 61},
}

DEEPSEEK_REASONER: dict[str, Any] = {
    "id": "930c60df-bf64-41c9-a88e-3ec75f81e00e",
    "object": "chat.completion",
    "created": 1737525600,
    "model": "deepseek-reasoner",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "9.8 is greater than 9.11.",
                "reasoning_content": "Compare 9.11 and 9.8: 9.8 = 9.80, and 0.80 > 0.11, so 9.8 is greater.",
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 18,
        "completion_tokens": 420,
        "total_tokens": 438,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 376},
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 18,
    },
    "system_fingerprint": "fp_7e73fd9a08",
}

DEEPSEEK_R1_INLINE: dict[str, Any] = {
    "id": "chatcmpl-9b1c",
    "object": "chat.completion",
    "created": 1737525700,
    "model": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "<think>\nThe user asks for the capital of France. That is Paris.\n</think>\n\nParis.",
                "tool_calls": [],
            },
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 25, "total_tokens": 37},
}

DEEPSEEK_TOOLS: dict[str, Any] = {
    "id": "7f2b-tools",
    "object": "chat.completion",
    "created": 1737525800,
    "model": "deepseek-chat",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_0_8b2c",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location": "Hangzhou"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
}

GEMINI_THOUGHTS_TOOL: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "parts": [
                    {
                        "text": "**Finding the weather**\n\nThe user asks about Paris; the get_weather tool answers that.",
                        "thought": True,
                    },
                    {"text": "Let me look that up. "},
                    {"text": "One moment."},
                    {
                        "functionCall": {"id": "fc-1", "name": "get_weather", "args": {"location": "Paris"}},
                        "thoughtSignature": "CiQBVKhc7oQ3GJ3hB2dXkQ==",
                    },
                ],
                "role": "model",
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 58,
        "candidatesTokenCount": 21,
        "totalTokenCount": 181,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 58}],
        "thoughtsTokenCount": 102,
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "mEfWaNvIJeOE7dcPmYzWsQ8",
}

GEMINI_SDK_SNAKE_CASE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "parts": [
                    {"text": "Weighing both options before answering.", "thought": True},
                    {"text": "Take the train."},
                    {"function_call": {"name": "book_ticket", "args": {"mode": "train"}}},
                ],
                "role": "model",
            },
            "finish_reason": "STOP",
            "index": 0,
        }
    ],
    "usage_metadata": {
        "prompt_token_count": 40,
        "candidates_token_count": 9,
        "thoughts_token_count": 55,
        "total_token_count": 104,
    },
    "model_version": "gemini-2.5-pro",
}
