"""Ollama's own fold batch size (s16-ollconv: 16, not the proxy's 64), or Converse's, changes nothing recorded.

(Converse keeps the proxy's 64: the 16 it had on the s16-ollconv branch read +2.75% on its smoke row.)

A long stream (150 content chunks with text and thinking, then the last) goes through the real client and the
stream proxy, with no meter provider (so the proxy holds chunks and folds them in batches). The span's attributes,
timing ones aside, must be the same whatever the accumulator's ``batch_size`` (16, 64 and 1), and the proxy must
have folded batches of that size, so the comparison ran the batch path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import Recorded, ReplayServer

# Attributes that differ run to run: clock readings (and rates from them), and each replay server's own port.
TIMING = ("time", "duration", "ttf", "per_second", "server.port")


def _recorded_attributes(exporter: InMemorySpanExporter) -> dict[str, Any]:
    (span,) = exporter.get_finished_spans()
    exporter.clear()
    return {k: v for k, v in (span.attributes or {}).items() if not any(word in k for word in TIMING)}


def _sizes(monkeypatch: pytest.MonkeyPatch, cls: type, size: int) -> list[int]:
    """Set ``cls.batch_size`` to ``size``; the lengths of the batches folded from then on."""
    monkeypatch.setattr(cls, "batch_size", size, raising=False)  # Converse has none of its own
    folded: list[int] = []
    original = cls.add_batch  # type: ignore[attr-defined]

    def add_batch(self: Any, chunks: list[Any]) -> None:
        folded.append(len(chunks))
        original(self, chunks)

    monkeypatch.setattr(cls, "add_batch", add_batch)
    return folded


# --- Ollama -----------------------------------------------------------------------------------------------------


@pytest.fixture
def ollama_instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    pytest.importorskip("ollama")
    from evaltrace.instrumentation.ollama import OllamaInstrumentor

    instrumentor = OllamaInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def _ollama_stream() -> Recorded:
    head = {"model": "qwen3:latest", "created_at": "2026-08-07T06:08:14Z"}
    lines = [{**head, "message": {"role": "assistant", "content": "", "thinking": "Hm"}, "done": False}]
    for n in range(150):
        message = {"role": "assistant", "content": f" w{n}"}
        if n % 7 == 0:
            message["thinking"] = f" t{n}"
        lines.append({**head, "message": message, "done": False})
    lines.append({**head, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                  "prompt_eval_count": 12, "eval_count": 151})  # fmt: skip
    return Recorded(
        method="POST",
        uri="http://127.0.0.1:11434/api/chat",
        request_body=b"",
        status=200,
        reason="OK",
        headers=[("content-type", "application/x-ndjson")],
        body=b"\n".join(json.dumps(line).encode() for line in lines),
    )


@pytest.mark.usefixtures("ollama_instrumented")
def test_ollama_records_the_same_whatever_its_batch_size(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ollama

    from evaltrace.instrumentation.ollama.stream import OllamaStreamAccumulator

    assert OllamaStreamAccumulator.batch_size == 16
    recorded = []
    for size in (16, 64, 1):
        folded = _sizes(monkeypatch, OllamaStreamAccumulator, size)
        with ReplayServer([_ollama_stream()]) as server:
            client = ollama.Client(host=server.url)
            try:
                text = "".join(c.message.content or "" for c in client.chat(model="qwen3", messages=[], stream=True))
            finally:
                client.close()
        assert text == "".join(f" w{n}" for n in range(150))
        assert max(folded) == size, folded
        recorded.append(_recorded_attributes(exporter))
    assert recorded[0] == recorded[1] == recorded[2]
    assert " w149" in recorded[0]["gen_ai.output.messages"]


# --- Bedrock Converse -------------------------------------------------------------------------------------------


@pytest.fixture
def bedrock_instrumented(provider: TracerProvider, capture: None) -> Iterator[None]:
    pytest.importorskip("boto3")
    from evaltrace.instrumentation.bedrock import BedrockInstrumentor

    instrumentor = BedrockInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


@pytest.mark.usefixtures("bedrock_instrumented")
def test_converse_records_the_same_whatever_its_batch_size(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bedrock_replay import client, converse_frame, read_stream, synthetic

    from evaltrace.instrumentation.bedrock.converse_stream import ConverseStreamAccumulator

    frames = [converse_frame("messageStart", {"role": "assistant"})]
    frames += [
        converse_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hm"}}}),
        converse_frame("contentBlockStop", {"contentBlockIndex": 0}),
    ]
    frames += [
        converse_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": f" w{n}"}}) for n in range(150)
    ]
    frames += [
        converse_frame("contentBlockStop", {"contentBlockIndex": 1}),
        converse_frame("messageStop", {"stopReason": "end_turn"}),
        converse_frame(
            "metadata",
            {"usage": {"inputTokens": 5, "outputTokens": 151, "totalTokens": 156}, "metrics": {"latencyMs": 9}},
        ),  # fmt: skip
    ]
    body = b"".join(frames)
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    assert not hasattr(ConverseStreamAccumulator, "batch_size")  # the proxy's default, 64
    recorded = []
    for size in (16, 64, 1):
        folded = _sizes(monkeypatch, ConverseStreamAccumulator, size)
        item = synthetic(f"{model}/converse-stream", body, [("content-type", "application/vnd.amazon.eventstream")])
        with ReplayServer([item]) as server:
            api = client(server)
            events = read_stream(
                api.converse_stream(modelId=model, messages=[{"role": "user", "content": [{"text": "hi"}]}])
            )
        assert len(events) == len(frames)
        assert max(folded) == size, folded
        recorded.append(_recorded_attributes(exporter))
    assert recorded[0] == recorded[1] == recorded[2]
    assert " w149" in recorded[0]["gen_ai.output.messages"]
