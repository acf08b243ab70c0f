"""Spans of the real peer OpenAI instrumentations map to the Trace evaltrace's own spans of the same calls give.

Each recorded conversation is replayed twice through the real openai client: once under evaltrace's
instrumentation (the reference Trace), once under a peer (OpenLLMetry, OpenInference, the official OTel
``openai-v2``), whose spans are then mapped by ``trace_from_spans``. Only one instrumentation wraps the client
at a time. The peers come from the ``peers`` extra; a test skips, naming the package, when one is missing
(under CI=true, .ci/run installs the extra, so they run there).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import wrapt
from openai_replay import Interaction, client, drain, load
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace.instrumentation.openai import OpenAIInstrumentor
from evaltrace.mapping import trace_from_spans
from evaltrace.mapping.conventions import span_kind
from evaltrace.schema import Trace

pytestmark = pytest.mark.usefixtures("cassettes", "capture")


@dataclass(frozen=True)
class Peer:
    """A peer instrumentation: where it lives, the environment that makes it record message content."""

    name: str
    module: str
    env: dict[str, str] = field(default_factory=dict)
    # Trace fields this peer does not record (compared for every other field).
    unrecorded: frozenset[str] = frozenset()


PEERS = [
    Peer("openllmetry", "opentelemetry.instrumentation.openai", {"TRACELOOP_TRACE_CONTENT": "true"}),
    Peer("openinference", "openinference.instrumentation.openai"),
    Peer(
        "otel-openai-v2",
        "opentelemetry.instrumentation.openai_v2",
        {
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
        },
    ),
]

CONVERSATIONS = [
    "test_chat_completion_with_content.yaml",
    "test_chat_completion_tool_calls_with_content.yaml",
    "test_chat_completion_streaming.yaml",
    "test_chat_completion_multiple_tools_streaming_with_content.yaml",
]


def peer_instrumentor(peer: Peer) -> Any:
    """The peer's ``OpenAIInstrumentor``, or a skip naming the missing package (install ``.[peers]``)."""
    if os.environ.get("CI") == "true":
        module = importlib.import_module(peer.module)  # CI installs the peers extra: missing is a failure
    else:
        module = pytest.importorskip(peer.module, reason=f"{peer.name} not installed (pip install -e '.[peers]')")
    return module.OpenAIInstrumentor()


@pytest.fixture
def peer_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Environment changes and the semconv opt-in cache, both undone after the test."""
    from opentelemetry.instrumentation import _semconv

    stability = _semconv._OpenTelemetrySemanticConventionStability
    # The opt-in is read once per process; start from unread so this test's variable counts, and restore after.
    monkeypatch.setattr(stability, "_initialized", False)
    monkeypatch.setattr(stability, "_OTEL_SEMCONV_STABILITY_SIGNAL_MAPPING", {})
    yield monkeypatch


async def replay(interactions: list[Interaction], provider: TracerProvider, is_async: bool) -> None:
    """Send every recorded request through the real client, inside one application span."""
    api, _ = client(interactions, is_async)
    with provider.get_tracer("app").start_as_current_span("answer"):
        for item in interactions:
            result = api.chat.completions.create(**item.request)
            if is_async:
                result = await result
            if item.request.get("stream"):
                await drain(result, is_async)


async def own_trace(name: str, provider: TracerProvider, exporter: InMemorySpanExporter, is_async: bool) -> Trace:
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        await replay(load(cassette(name)), provider, is_async)
    finally:
        instrumentor.uninstrument()
    return trace_from_spans(exporter.get_finished_spans())


def unwrap_leftovers() -> None:
    """Restore openai methods a peer left wrapped after ``uninstrument()``.

    OpenLLMetry 0.62's ``uninstrument()`` goes through a second instrumentor singleton that was never marked
    instrumented, so its wrappers stay; evaltrace's instrumentor then (rightly) refuses to wrap over them.
    """
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("openai.resources") or module is None:
            continue
        for cls in [v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module_name]:
            for attr, value in list(vars(cls).items()):
                if isinstance(value, wrapt.FunctionWrapper):
                    setattr(cls, attr, value.__wrapped__)


@contextmanager
def peer_recording(peer: Peer, env: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """``peer`` instrumenting the openai client for the block, into a provider of its own and its exporter."""
    for key, value in peer.env.items():
        env.setenv(key, value)
    instrumentor = peer_instrumentor(peer)
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        yield tracer_provider, exporter
    finally:
        instrumentor.uninstrument()
        unwrap_leftovers()


async def peer_spans(peer: Peer, name: str, env: pytest.MonkeyPatch, is_async: bool) -> list[ReadableSpan]:
    with peer_recording(peer, env) as (tracer_provider, exporter):
        await replay(load(cassette(name)), tracer_provider, is_async)
    return list(exporter.get_finished_spans())


def fields(trace: Trace) -> dict[str, Any]:
    """What a Trace says about the calls, field by field."""
    return {
        "messages": [
            (
                m.role,
                m.content,
                m.tool_call and (m.tool_call.id, m.tool_call.name, m.tool_call.arguments),
                m.tool_call_id,
                m.name,
            )
            for m in trace.messages
        ],
        "final_answer": trace.output.final_answer,
        "token_input": trace.metrics.token_input,
        "token_output": trace.metrics.token_output,
    }


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
@pytest.mark.parametrize("name", CONVERSATIONS, ids=lambda n: n.removeprefix("test_").removesuffix(".yaml"))
async def test_peer_spans_map_to_the_trace_of_our_own_spans(
    peer: Peer,
    name: str,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    peer_env: pytest.MonkeyPatch,
) -> None:
    expected = fields(await own_trace(name, provider, exporter, is_async=False))
    spans = await peer_spans(peer, name, peer_env, is_async=False)
    got = fields(trace_from_spans(spans))

    assert expected["messages"], "the reference Trace must hold the conversation"
    for key in expected:
        if key not in peer.unrecorded:
            assert got[key] == expected[key], f"{peer.name}: {key}"
    llm = [s for s in spans if s.name != "answer"]
    assert llm and all(span_kind(s.attributes or {}) == "llm" for s in llm)


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
async def test_async_tool_conversation(
    peer: Peer, provider: TracerProvider, exporter: InMemorySpanExporter, peer_env: pytest.MonkeyPatch
) -> None:
    name = "test_async_chat_completion_tool_calls_with_content.yaml"
    expected = fields(await own_trace(name, provider, exporter, is_async=True))
    got = fields(trace_from_spans(await peer_spans(peer, name, peer_env, is_async=True)))
    assert got == expected
    assert [m[0] for m in got["messages"]] == ["system", "user", "assistant", "assistant", "tool", "tool", "assistant"]
