"""Groq traffic recorded in tests/fixtures/groq-cassettes, replayed to the real ``groq`` client.

Each cassette is served in order by ``cassettes.ReplayServer`` on 127.0.0.1 and the client points at it with
``base_url``; a test calls ``chat.completions.create`` with the recorded request body as keyword arguments.
"""

from __future__ import annotations

from typing import Any

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette

GROQ = FIXTURES / "groq-cassettes" / "pydantic-ai"
PLAIN = "test_extra_headers.yaml"
THINKING_RAW_PARSED = "test_groq_model_thinking_part.yaml"  # reasoning_format raw, then parsed
THINKING_STREAM = "test_groq_model_thinking_part_iter.yaml"
WEB_SEARCH = "test_groq_model_web_search_tool.yaml"
WEB_SEARCH_STREAM = "test_groq_model_web_search_tool_stream.yaml"
NATIVE_OUTPUT = "test_groq_native_output.yaml"
IMAGE_TOOL = "test_image_as_binary_content_tool_response.yaml"
NOT_FOUND = "test_tool_regular_error.yaml"
TOOL_USE_FAILED = "test_tool_use_failed_error.yaml"  # 400 tool_use_failed, then two 200s (tool call, answer)
TOOL_USE_FAILED_STREAM = "test_tool_use_failed_error_streaming.yaml"  # the error inside a stream, then two streams


def interactions(name: str) -> list[Recorded]:
    """Every interaction of the cassette, in recorded order."""
    return load_cassette(GROQ / name)


def server(name: str) -> ReplayServer:
    """A replay server (not started) for the cassette."""
    return ReplayServer(interactions(name))


def call_kwargs(item: Recorded) -> dict[str, Any]:
    """The recorded request body as ``create``'s keyword arguments."""
    return dict(item.request_json())
