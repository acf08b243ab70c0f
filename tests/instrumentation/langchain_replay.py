"""Shared pieces of the LangChain tests: recorded cassettes, the handler registered for one test, span lookups."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from cassettes import FIXTURES, ReplayServer, load_cassette

LANGCHAIN_CASSETTES = FIXTURES / "langchain-cassettes"
CHAT = LANGCHAIN_CASSETTES / "otel-contrib" / "test_chat_openai_gpt_3_5_turbo_model_llm_call.yaml"
CHAT_401 = LANGCHAIN_CASSETTES / "otel-contrib" / "test_chat_openai_gpt_3_5_turbo_model_llm_call_with_error.yaml"
AGENT = LANGCHAIN_CASSETTES / "openinference" / "test_raw_dict_message" / "test_agent_with_raw_dict_messages.yaml"
STREAM = (
    LANGCHAIN_CASSETTES
    / "openinference"
    / "test_instrumentor"
    / "test_records_token_counts_for_streaming_openai_llm.yaml"
)
RESPONSES = LANGCHAIN_CASSETTES / "logfire" / "test_instrument_langchain.yaml"
TOKENS = LANGCHAIN_CASSETTES / "openinference" / "test_instrumentor" / "test_token_counts.yaml"


@contextmanager
def replay(path: Path) -> Iterator[ReplayServer]:
    """Serve the cassette at ``path`` on 127.0.0.1 for the ``with`` block."""
    with ReplayServer(load_cassette(path)) as server:
        yield server


def chat_openai(server: ReplayServer, **kwargs: Any) -> Any:
    """A real ``ChatOpenAI`` talking to the replay server (no retries: a recorded error is the answer)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, **kwargs)


@contextmanager
def langchain_instrumented(restored: bool = True) -> Iterator[Any]:
    """``instrument_langchain()`` for the block; the registered handler is yielded.

    After the block no run is left open, and (``restored``) every context a run made current was restored;
    async runs end in a copy of the caller's context, where that cannot be done: there every run left behind has
    ended, so its context stands for the one before it.
    """
    import evaltrace

    handler = evaltrace.instrument_langchain()
    try:
        yield handler
    finally:
        evaltrace.uninstrument_langchain()
    assert not handler._runs, f"runs never ended: {handler._runs}"
    left = handler._contexts.runs()
    if restored:
        assert not left, f"contexts never restored: {[(r.kind, r.span and r.span.name) for r in left]}"
    assert all(r.ended for r in left)


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def parent_of(spans: Sequence[ReadableSpan], span: ReadableSpan) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def kind(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get("evaltrace.span.kind")
