"""Fixtures of the evaluator tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .factories import build_case, build_trace


@pytest.fixture
def make_trace() -> Callable[..., Any]:
    return build_trace


@pytest.fixture
def make_case() -> Callable[..., Any]:
    return build_case


@pytest.fixture
def fake_openai() -> Any:
    from .fake_openai import FakeOpenAI

    server = FakeOpenAI()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def judge(fake_openai: Any) -> Any:
    from evaltrace.evaluators import Judge

    judge = Judge(
        "judge-model",
        base_url=fake_openai.url,
        api_key="test-key",
        max_retries=0,
        price_per_million_tokens=(1.0, 2.0),
    )
    try:
        yield judge
    finally:
        await judge.aclose()


@pytest.fixture
async def embedder(fake_openai: Any) -> Any:
    from evaltrace.evaluators import OpenAIEmbedder

    embedder = OpenAIEmbedder("embed-model", base_url=fake_openai.url, api_key="test-key", max_retries=0)
    try:
        yield embedder
    finally:
        await embedder.aclose()
