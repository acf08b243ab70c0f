"""Groq traffic recorded in tests/fixtures/groq-cassettes, replayed to the real ``groq`` client.

Each cassette is served in order by ``cassettes.ReplayServer`` on 127.0.0.1 and the client points at it with
``base_url``; a test calls ``chat.completions.create`` with the recorded request body as keyword arguments.

This module imports ``groq`` at import time: a test module imports it only after ``pytest.importorskip("groq")``
(groq is an optional extra, absent from CI's oldest-versions environment).
"""

from __future__ import annotations

from typing import Any

import groq

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


def groq_client(url: str, is_async: bool = False) -> Any:
    """The real groq client (``AsyncGroq`` when ``is_async``) of the server at ``url``, never retried."""
    return (groq.AsyncGroq if is_async else groq.Groq)(api_key="x", base_url=url, max_retries=0)


def served(body: bytes, stream: bool = False) -> Recorded:
    """A 200 chat completions reply of ``body``: a JSON completion, or with ``stream`` an event stream."""
    return Recorded(
        method="POST",
        uri="https://api.groq.com/openai/v1/chat/completions",
        request_body=b"",
        status=200,
        reason="OK",
        headers=[("content-type", "text/event-stream" if stream else "application/json")],
        body=body,
    )
