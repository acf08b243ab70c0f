"""Pure request/response mapping: shapes the recordings do not contain."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from evaltrace._internal.openai import request as req
from evaltrace._internal.openai.parts import split_think
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.response import chat_outcome, responses_outcome

CHAT = EndpointKind.CHAT
RESPONSES = EndpointKind.RESPONSES


def test_chat_roles_names_and_multipart_content() -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "Listen and read:"},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            ],
        },
        {"role": "assistant", "content": None, "refusal": None, "function_call": {"name": "f", "arguments": "{}"}},
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}],
        },
    ]
    assert req.input_messages(CHAT, {"messages": messages}) == [
        {"role": "developer", "parts": [{"type": "text", "content": "Be brief."}]},
        {
            "role": "user",
            "name": "ann",
            "parts": [
                {"type": "text", "content": "Listen and read:"},
                {
                    "type": "uri",
                    "modality": "audio",
                    "uri": "data:audio/wav;base64,<omitted 8 bytes>",
                    "mime_type": "audio/wav",
                },
                {"type": "file", "modality": "document", "file_id": "file-1"},
                {"type": "uri", "modality": "image", "uri": "https://example.com/cat.png"},
            ],
        },
        {"role": "assistant", "parts": [{"type": "tool_call", "id": None, "name": "f", "arguments": {}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "42"}]},
    ]


def test_responses_input_items() -> None:
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/AA=="},
            ],
        },
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thought"}]},
        {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "found"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]
    params = {
        "input": items,
        "instructions": "Be kind.",
        "reasoning": {"effort": "high"},
        "text": {"format": {"type": "json_schema"}},
    }
    assert req.input_messages(RESPONSES, params) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "hi"},
                {
                    "type": "uri",
                    "modality": "image",
                    "uri": "data:image/jpeg;base64,<omitted 8 bytes>",
                    "mime_type": "image/jpeg",
                },
            ],
        },
        {"role": "assistant", "parts": [{"type": "reasoning", "content": "thought"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_9", "name": "lookup", "arguments": {"q": "x"}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_9", "response": "found"}]},
        # conventions.md 6.3: web_search_call and the other built-in tool items "map to server_tool_call parts".
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "server_tool_call",
                    "id": "ws_1",
                    "name": "web_search_call",
                    "server_tool_call": {"type": "web_search_call"},
                }
            ],
        },
    ]
    assert req.system_instructions(params) == [{"type": "text", "content": "Be kind."}]
    attrs = req.request_attributes(RESPONSES, params)
    assert attrs == {"gen_ai.request.reasoning.level": "high", "gen_ai.output.type": "json"}
    assert req.model_parameters(RESPONSES, params) == {"reasoning_effort": "high", "response_format": "json_schema"}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}, "speech"),
        ({"modalities": ["text", "audio"], "response_format": {"type": "json_object"}}, "speech"),
        ({"modalities": ["text"], "response_format": {"type": "json_object"}}, "json"),
        ({"modalities": ["text"]}, None),
    ],
    ids=["audio", "audio-and-json", "text-json", "text"],
)
def test_chat_output_type_from_modalities(params: dict[str, Any], expected: str | None) -> None:
    """conventions.md: gen_ai.output.type is set when the request asks for an output format; audio is speech."""
    assert req.request_attributes(CHAT, params).get("gen_ai.output.type") == expected


def test_chat_request_parameters() -> None:
    params = {
        "max_completion_tokens": 100,
        "max_tokens": 50,
        "stop": ["a", "b"],
        "n": 3,
        "reasoning_effort": "low",
        "frequency_penalty": 0.5,
        "presence_penalty": -1,
        "response_format": {"type": "json_object"},
        "stream": True,
    }
    assert req.request_attributes(CHAT, params) == {
        "gen_ai.request.max_tokens": 100,
        "gen_ai.request.stop_sequences": ["a", "b"],
        "gen_ai.request.choice.count": 3,
        "gen_ai.request.reasoning.level": "low",
        "gen_ai.request.frequency_penalty": 0.5,
        "gen_ai.request.presence_penalty": -1.0,
        "gen_ai.output.type": "json",
        "gen_ai.request.stream": True,
    }
    assert req.model_parameters(CHAT, {**params, "temperature": 0, "seed": 7, "service_tier": "flex"}) == {
        "temperature": 0,
        "max_tokens": 50,
        "max_completion_tokens": 100,
        "frequency_penalty": 0.5,
        "presence_penalty": -1,
        "seed": 7,
        "n": 3,
        "stop": '["a", "b"]',
        "reasoning_effort": "low",
        "service_tier": "flex",
        "stream": True,
        "response_format": "json_object",
    }


def test_model_parameters_skip_wrong_types_content_and_embeddings() -> None:
    params = {"n": True, "seed": "7", "temperature": None, "stop": [], "messages": [{"role": "user"}], "tools": [{}]}
    assert req.model_parameters(CHAT, params) == {}
    assert req.model_parameters(CHAT, {"stop": "END", "stream": False}) == {"stop": "END", "stream": False}
    assert req.model_parameters(EndpointKind.EMBEDDINGS, {"dimensions": 8, "encoding_format": "float"}) == {}


def test_split_think() -> None:
    assert split_think("plain") == (None, "plain")
    assert split_think("<think>a</think>b<think>c</think>d") == ("a\n\nc", "bd")
    assert split_think("<think>unterminated") == ("unterminated", "")


def test_chat_reasoning_content_refusal_and_invalid_arguments() -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "deepseek-reasoner",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "<think>more</think>Answer",
                        "reasoning_content": "first",
                        "reasoning": "ignored",
                        "refusal": None,
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{bad"}}],
                    },
                },
                {"index": 1, "finish_reason": "content_filter", "message": {"role": "assistant", "refusal": "No."}},
            ],
        }
    )
    outcome = chat_outcome(completion)
    assert outcome.finish_reasons == ["tool_calls", "content_filter"]
    assert outcome.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "first\n\nmore"},
                {"type": "text", "content": "Answer"},
                {"type": "tool_call", "id": "c", "name": "f", "arguments": "{bad"},
            ],
            "finish_reason": "tool_call",
        },
        {"role": "assistant", "parts": [{"type": "refusal", "content": "No."}], "finish_reason": "content_filter"},
    ]
    assert chat_outcome(completion, content=False).output_messages is None


def test_responses_incomplete_and_server_tools() -> None:
    response = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [
            {
                "type": "reasoning",
                "id": "rs",
                "summary": [{"type": "summary_text", "text": "s"}],
                "content": [{"type": "reasoning_text", "text": "r"}],
            },
            {"type": "web_search_call", "id": "ws_1"},
            {"type": "message", "content": [{"type": "output_text", "text": "Partial"}]},
        ],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "input_tokens_details": {"cached_tokens": 2},
            "output_tokens_details": {"reasoning_tokens": 3},
        },
    }
    outcome = responses_outcome(response)
    assert outcome.finish_reasons == ["max_output_tokens"]
    assert outcome.output_messages == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "s"},
                {"type": "reasoning", "content": "r"},
                {
                    "type": "server_tool_call",
                    "id": "ws_1",
                    "name": "web_search_call",
                    "server_tool_call": {"type": "web_search_call"},
                },
                {"type": "text", "content": "Partial"},
            ],
            "finish_reason": "max_output_tokens",
        }
    ]
    assert outcome.usage is not None and (outcome.usage.cached_tokens, outcome.usage.reasoning_tokens) == (2, 3)


def test_chat_custom_tool_calls_and_definitions_keep_their_names() -> None:
    """conventions.md 1.5: a ``tool_call`` part requires ``name``; tool definitions are flattened (``name`` on top).

    Custom tools nest under ``custom`` (``{name, input}`` in calls, ``{name, description, format}`` in definitions)
    where function tools use ``function``.
    """
    custom_call = {"id": "call_1", "type": "custom", "custom": {"name": "run_sql", "input": "SELECT 1"}}
    completion = {
        "id": "x",
        "model": "gpt-5",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [custom_call]},
            }
        ],
    }
    expected_part = {"type": "tool_call", "id": "call_1", "name": "run_sql", "arguments": "SELECT 1"}
    assert chat_outcome(completion).output_messages == [
        {"role": "assistant", "parts": [expected_part], "finish_reason": "tool_call"}
    ]
    params = {
        "messages": [{"role": "assistant", "tool_calls": [custom_call]}],
        "tools": [
            {
                "type": "custom",
                "custom": {"name": "run_sql", "description": "Runs SQL", "format": {"type": "text"}},
            }
        ],
    }
    assert req.input_messages(CHAT, params) == [{"role": "assistant", "parts": [expected_part]}]
    assert req.tool_definitions(params) == [{"type": "custom", "name": "run_sql", "description": "Runs SQL"}]


def test_legacy_functions_are_tool_definitions() -> None:
    """``functions`` (the pre-tools Chat API) defines tools too: flattened as conventions.md 1.5 shows."""
    weather = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}
    assert req.tool_definitions({"functions": [weather]}) == [{"type": "function", **weather}]
    assert req.tool_definitions({"functions": []}) is None
