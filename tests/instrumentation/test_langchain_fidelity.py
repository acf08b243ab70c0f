"""What each LangChain GenAI span records for evaluation: the output format a request asks for.

Replayed through the real ``ChatOpenAI``: Chat Completions bodies built with the openai SDK's own types, served
on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_replay import chat_openai, langchain_instrumented, one
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from cassettes import Recorded, ReplayServer

pytestmark = [
    pytest.mark.usefixtures("provider", "capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]


class City(BaseModel):
    city: str


def _completion(message: dict[str, Any], finish_reason: str) -> Recorded:
    """One Chat Completions response, validated by the openai SDK's ``ChatCompletion`` type."""
    from openai.types.chat import ChatCompletion

    body = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-structured-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
    ).model_dump_json()
    return Recorded(
        "POST", "/v1/chat/completions", b"", 200, "OK", [("content-type", "application/json")], body.encode()
    )


_ANSWER = _completion({"content": '{"city":"Paris"}'}, "stop")
_TOOL_ANSWER = _completion(
    {
        "content": None,
        "tool_calls": [
            {"id": "call_city", "type": "function", "function": {"name": "City", "arguments": '{"city":"Paris"}'}}
        ],
    },
    "tool_calls",
)


@pytest.mark.parametrize(
    ("method", "response", "sent", "output_type"),
    [
        ("json_schema", _ANSWER, "json_schema", "json"),
        ("json_mode", _ANSWER, "json_object", "json"),
        ("function_calling", _TOOL_ANSWER, None, None),
    ],
)
def test_structured_output_records_the_output_format_the_request_asks_for(
    exporter: InMemorySpanExporter, method: str, response: Recorded, sent: str | None, output_type: str | None
) -> None:
    """A response format asked for is ``gen_ai.output.type``; a forced tool call asks for none (its tool is defined)."""
    with ReplayServer([response]) as server, langchain_instrumented():
        model = chat_openai(server, model="gpt-4o-mini")
        result = model.with_structured_output(City, method=method).invoke("Which city is the capital of France?")
    assert result == City(city="Paris")
    request = server.received[0].json()
    assert (request.get("response_format") or {}).get("type") == sent
    attrs = dict(one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {})
    assert attrs.get("gen_ai.output.type") == output_type
    if method == "function_calling":
        assert [t["name"] for t in json.loads(str(attrs["gen_ai.tool.definitions"]))] == ["City"]


def test_a_plain_call_records_no_output_format(exporter: InMemorySpanExporter) -> None:
    with ReplayServer([_ANSWER]) as server, langchain_instrumented():
        chat_openai(server, model="gpt-4o-mini").invoke("Which city is the capital of France?")
    assert "response_format" not in server.received[0].json()
    assert "gen_ai.output.type" not in (one(exporter.get_finished_spans(), "chat gpt-4o-mini").attributes or {})
