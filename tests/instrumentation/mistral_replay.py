"""Mistral traffic recorded in tests/fixtures/mistral-cassettes, replayed to the real ``mistralai`` client.

Each cassette's Mistral interactions are served in order by ``cassettes.ReplayServer`` on 127.0.0.1 and the client
points at it with ``server_url``; a test calls the SDK with the recorded request body as keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cassettes import FIXTURES, Recorded, ReplayServer, load_cassette

MISTRAL = FIXTURES / "mistral-cassettes"
OI = "openinference/test_instrumentor/"
STREAM = OI + "test_synchronous_streaming_chat_completions_emits_expected_span[False].yaml"
ASYNC_STREAM = OI + "test_asynchronous_streaming_chat_completions_emits_expected_span[False].yaml"
TOOL_STREAM = (
    OI + "test_synchronous_streaming_chat_completions_with_tool_call_response_emits_expected_spans[False].yaml"
)
THINKING = "pydantic-ai/test_mistral_model_thinking_part.yaml"
THINKING_STREAM = "pydantic-ai/test_mistral_model_thinking_part_iter.yaml"
PROMPT_CACHE = "pydantic-ai/test_mistral_history_uses_prompt_cache.yaml"
IMAGE_TOOL = "pydantic-ai/test_image_as_binary_content_tool_response.yaml"
PENALTIES = "pydantic-ai/test_mistral_forwards_penalties.yaml"


def interactions(name: str) -> list[Recorded]:
    """The cassette's Mistral interactions (a mixed-provider test also holds an OpenAI call, left out)."""
    return [item for item in load_cassette(MISTRAL / name) if "api.mistral.ai" in item.uri]


def server(name: str) -> ReplayServer:
    """A replay server (not started) for the cassette's Mistral interactions."""
    return ReplayServer(interactions(name))


def call_kwargs(item: Recorded) -> dict[str, Any]:
    """The recorded request body as the SDK's keyword arguments (``stream`` is chosen by the method called)."""
    body = dict(item.request_json())
    body.pop("stream", None)
    return body


def fixture_paths() -> list[Path]:
    """Every Mistral cassette in the repository."""
    return sorted(MISTRAL.rglob("*.yaml"))


def sdk_events(item: Recorded) -> list[Any]:
    """The events the real ``mistralai`` client yields for the replayed stream (up to an error it raises inside it)."""
    from mistralai.client import Mistral

    events: list[Any] = []
    with ReplayServer([item]) as server:
        client = Mistral(api_key="test", server_url=server.url)
        try:
            for event in client.chat.stream(**call_kwargs(item)):
                events.append(event)
        except Exception:  # the recorded failure itself: what arrived before it is folded
            pass
    return events
