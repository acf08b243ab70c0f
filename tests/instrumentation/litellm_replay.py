"""Shared pieces of the LiteLLM tests: the recorded traffic, the calls made through the real ``litellm``, its cleanup.

The real ``litellm`` is pointed (``api_base``) at ``cassettes.ReplayServer`` on 127.0.0.1, serving the recorded
OpenAI traffic (tests/fixtures/openai-cassettes) or the Anthropic fixtures (tests/fixtures/anthropic).

This module imports ``litellm`` at import time: a test module sets ``LITELLM_LOCAL_MODEL_COST_MAP`` (LiteLLM fetches
its price map at import otherwise) and calls ``pytest.importorskip("litellm")`` before importing it (LiteLLM is an
optional extra, absent from CI's oldest-versions environment).
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

import litellm
import pytest

from cassettes import FIXTURES, Recorded, load_cassette

OPENAI = FIXTURES / "openai-cassettes" / "otel-contrib"
ANTHROPIC = FIXTURES / "anthropic"
CLAUDE = "anthropic/claude-sonnet-4-6"
USER = [{"role": "user", "content": "Say this is a test"}]

# LiteLLM's own types, built lazily by pydantic on first use (nothing of ours).
LITELLM_WARNINGS = [
    pytest.mark.filterwarnings("ignore:.*using the `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_.*' attribute on the instance:DeprecationWarning"),
]


async def close_clients() -> None:
    """Close and drop the clients LiteLLM caches across calls, so that no later test collects their sockets.

    LiteLLM keeps its provider clients (sync and per event loop) in ``in_memory_llm_clients_cache``; a test's event
    loop ends with it, and a client evicted later was collected, with a ResourceWarning for its socket, in whichever
    test ran then. Closed here, then dropped and collected here with that warning (LiteLLM's, about its own cache)
    ignored. Awaited by each test module's autouse fixture after its test.
    """
    await litellm.close_litellm_async_clients()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        litellm.in_memory_llm_clients_cache.flush_cache()
        gc.collect()


async def drain(stream: Any, is_async: bool) -> list[Any]:
    """Every chunk of a LiteLLM stream, sync or async."""
    if is_async:
        return [chunk async for chunk in stream]
    return list(stream)


async def complete(is_async: bool, **kwargs: Any) -> Any:
    """``litellm.completion`` (or ``acompletion``) asking ``USER``'s question, never retried: a served error is the answer."""
    params = {"api_key": "test", "messages": USER, "num_retries": 0, **kwargs}
    if is_async:
        return await litellm.acompletion(**params)
    return litellm.completion(**params)


async def complete_text(is_async: bool, *args: Any, **kwargs: Any) -> Any:
    """``litellm.text_completion`` (or ``atext_completion``), never retried: a served error is the answer."""
    params = {"api_key": "test", "num_retries": 0, **kwargs}
    if is_async:
        return await litellm.atext_completion(*args, **params)
    return litellm.text_completion(*args, **params)


def responses_item(name: str) -> tuple[Recorded, dict[str, Any]]:
    """The first interaction of an OpenAI Responses recording, and its request as LiteLLM keyword arguments."""
    item = load_cassette(OPENAI / f"{name}[content_mode0].yaml")[0]
    request = item.request_json()
    return item, {**request, "model": f"openai/{request['model']}"}


def anthropic_reply(name: str, status: int = 200) -> Recorded:
    """The Anthropic fixture ``name`` served as a Messages reply: an event stream for ``.sse``, else JSON."""
    body = (ANTHROPIC / name).read_bytes()
    kind = "text/event-stream" if name.endswith(".sse") else "application/json"
    return Recorded("POST", "https://api.anthropic.com/v1/messages", b"", status, "OK" if status == 200 else "Error",
                    [("content-type", kind)], body)  # fmt: skip
