"""Shared pieces of the OpenAI Agents SDK tests: the SDK traced to evaltrace alone, and runs against a replay server.

This module imports ``agents`` at import time: a test module imports it only after ``pytest.importorskip("agents")``
(the Agents SDK is an optional extra, absent from CI's oldest-versions environment).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from agents import set_default_openai_client, set_trace_processors
from agents.models import _openai_shared
from openai import AsyncOpenAI

import evaltrace
from cassettes import Recorded, ReplayServer
from evaltrace._internal import settings
from evaltrace.instrumentation.openai_agents import _registered_processors
from evaltrace.testing import TraceCapture, capture_traces

T = TypeVar("T")


@contextmanager
def agents_capture() -> Iterator[TraceCapture]:
    """Agents SDK tracing to evaltrace only (the SDK's own exporter off), content captured, globals restored after.

    The SDK's trace processors and default OpenAI client are process globals: both are put back as they were, so a
    test leaves no processor or client behind for the next one.
    """
    previous_processors = _registered_processors() or []
    previous_client = _openai_shared.get_default_openai_client()
    previous_settings = settings.replace(settings.CaptureSettings(capture_content=True))
    set_trace_processors([])
    try:
        with capture_traces() as capture:
            evaltrace.instrument_openai_agents()
            yield capture
    finally:
        evaltrace.uninstrument_openai_agents()
        set_trace_processors(previous_processors)
        _openai_shared.set_default_openai_client(previous_client)  # type: ignore[arg-type]
        settings.replace(previous_settings)


def replay(
    bodies: list[Recorded],
    run: Callable[[AsyncOpenAI], Awaitable[T]],
    *,
    by_path: bool = False,
    **client_options: Any,
) -> tuple[T, ReplayServer]:
    """Serve ``bodies`` on 127.0.0.1 and await ``run(client)`` with that client as the SDK's default.

    The client is a real ``AsyncOpenAI`` (``client_options`` passed on to it, e.g. ``max_retries=0``), closed in the
    run's own event loop. Returns what ``run`` returned and the server, whose ``received`` requests a test can read.
    """

    async def main(server: ReplayServer) -> T:
        client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test", **client_options)
        set_default_openai_client(client, use_for_tracing=False)
        try:
            return await run(client)
        finally:
            await client.close()

    with ReplayServer(bodies, by_path=by_path) as server:
        return asyncio.run(main(server)), server
