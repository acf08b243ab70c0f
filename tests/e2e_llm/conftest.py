"""Fixtures of the opt-in suite against a real local LLM server (started by scripts/e2e_llm.sh).

Every test here is marked ``e2e_llm``: the default run deselects them (``-m "not e2e_llm"`` in pyproject's
addopts), and without ``EVALTRACE_E2E_BASE_URL`` they skip, under CI too, because the server is never part of CI.
The embedding tests skip likewise without ``EVALTRACE_E2E_EMBED_BASE_URL`` (a server serving /v1/embeddings).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from evaltrace.evaluators import Judge, OpenAIEmbedder

from .report import OUTCOMES

MODEL = "smollm2"
# Bounded replies keep a judgement to seconds on one CPU thread; a reply cut at the limit is a realistic
# malformed reply, which must end as a clean `failed` result.
JUDGE_MAX_TOKENS = 192


@pytest.fixture(scope="session")
def base_url() -> str:
    url = os.environ.get("EVALTRACE_E2E_BASE_URL")
    if not url:
        pytest.skip("EVALTRACE_E2E_BASE_URL is not set: run `bash scripts/e2e_llm.sh`")
    return url.rstrip("/")


@pytest.fixture(scope="session")
def embed_base_url() -> str:
    url = os.environ.get("EVALTRACE_E2E_EMBED_BASE_URL")
    if not url:
        pytest.skip("EVALTRACE_E2E_EMBED_BASE_URL is not set: run `bash scripts/e2e_llm.sh`")
    return url.rstrip("/")


@dataclass
class ServerCalls:
    """The calls (chat completions or embeddings) the server answered, with the usage each response reported."""

    usage: list[dict[str, Any] | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.usage)


@dataclass
class CountingJudge:
    judge: Judge
    calls: ServerCalls


def counting_judge(base_url: str, **options: Any) -> CountingJudge:
    calls = ServerCalls()

    async def record(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/chat/completions"):
            await response.aread()
            calls.usage.append(json.loads(response.content).get("usage"))

    settings: dict[str, Any] = {"max_tokens": JUDGE_MAX_TOKENS, "max_concurrency": 1, "max_retries": 0}
    settings.update(options)
    judge = Judge(
        MODEL,
        base_url=base_url,
        api_key="none",
        timeout=300.0,
        http_client=httpx.AsyncClient(event_hooks={"response": [record]}, timeout=300.0),
        **settings,
    )
    return CountingJudge(judge, calls)


@dataclass
class CountingEmbedder:
    embedder: OpenAIEmbedder
    calls: ServerCalls


def counting_embedder(base_url: str) -> CountingEmbedder:
    """The real OpenAIEmbedder; ``calls`` records each /embeddings response's usage (texts per request too)."""
    calls = ServerCalls()

    async def record(response: httpx.Response) -> None:
        if response.request.url.path.endswith("/embeddings"):
            await response.aread()
            body = json.loads(response.content)
            calls.usage.append({**(body.get("usage") or {}), "vectors": len(body["data"])})

    embedder = OpenAIEmbedder(
        MODEL,
        base_url=base_url,
        api_key="none",
        timeout=300.0,
        max_retries=0,
        http_client=httpx.AsyncClient(event_hooks={"response": [record]}, timeout=300.0),
    )
    return CountingEmbedder(embedder, calls)


@pytest.fixture
async def embedder(embed_base_url: str) -> AsyncIterator[CountingEmbedder]:
    counted = counting_embedder(embed_base_url)
    try:
        yield counted
    finally:
        await counted.embedder.aclose()


@pytest.fixture
async def judge(base_url: str) -> AsyncIterator[CountingJudge]:
    counted = counting_judge(base_url)
    try:
        yield counted
    finally:
        await counted.judge.aclose()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("e2e_llm: what the real model's judgements became")
    for line in OUTCOMES:
        terminalreporter.write_line(line)
