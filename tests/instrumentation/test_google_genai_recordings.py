"""Every copied Google Gen AI recording, each response on its own, replayed through the instrumented real client.

For each recorded exchange the call is derived from the recorded URI (plain or streamed generate, embed, caches.create;
Developer API or Vertex AI; an Interactions API request is made with the recorded request body), made sync and async, and the span is checked against the recorded response JSON read
independently of the codec: response id and model, finish reasons verbatim, usage (prompt + tool-use prompt in,
candidates + thoughts out, thoughts as reasoning, cached content as cache reads), the answer text without the
thoughts, and the function calls by name. No internal error may be logged.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from google_genai_replay import AIOHTTP_WARNING, GENAI, client_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cassettes import Recorded, ReplayServer, load_cassette
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor


def _cases() -> list[Any]:
    cases = []
    for path in sorted(GENAI.rglob("*.yaml")):
        for index in range(len(load_cassette(path))):
            name = f"{path.relative_to(GENAI)}#{index}"
            cases.append(pytest.param(path, index, id=name))
    return cases


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Any:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]


def _events(item: Recorded) -> list[dict[str, Any]]:
    text = item.body.decode()
    if text.lstrip().startswith("data:"):
        blocks = text.replace("\r\n", "\n").split("\n\n")
        return [json.loads(b.strip()[len("data:") :]) for b in blocks if b.strip()]
    return [json.loads(text)]


def _expected(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the span must say, read from the recorded JSON (camelCase, as the API sent it)."""
    reasons: dict[int, str] = {}
    text: list[str] = []
    calls: list[str] = []
    usage: dict[str, Any] = {}
    for event in events:
        usage = event.get("usageMetadata") or usage
        for candidate in event.get("candidates", []):
            if candidate.get("finishReason"):
                reasons[candidate.get("index", 0)] = candidate["finishReason"]
            for part in (candidate.get("content") or {}).get("parts", []):
                if "text" in part and not part.get("thought"):
                    text.append(part["text"])
                if "functionCall" in part:
                    calls.append(part["functionCall"]["name"])
    last = events[-1]
    expected: dict[str, Any] = {
        "gen_ai.response.id": last.get("responseId"),
        "gen_ai.response.model": last.get("modelVersion"),
        "finish_reasons": [reasons[i] for i in sorted(reasons)],
        "text": "".join(text),
        "calls": calls,
    }
    if "promptTokenCount" in usage or "toolUsePromptTokenCount" in usage:
        expected["gen_ai.usage.input_tokens"] = usage.get("promptTokenCount", 0) + usage.get(
            "toolUsePromptTokenCount", 0
        )
    if "candidatesTokenCount" in usage or "thoughtsTokenCount" in usage:
        expected["gen_ai.usage.output_tokens"] = usage.get("candidatesTokenCount", 0) + usage.get(
            "thoughtsTokenCount", 0
        )
    if "thoughtsTokenCount" in usage:
        expected["gen_ai.usage.reasoning.output_tokens"] = usage["thoughtsTokenCount"]
    if "cachedContentTokenCount" in usage:
        expected["gen_ai.usage.cache_read.input_tokens"] = usage["cachedContentTokenCount"]
    return expected


async def _call(item: Recorded, is_async: bool) -> None:
    uri = item.uri
    model = uri.rsplit("/", 1)[1].split(":", 1)[0]
    vertex = "aiplatform" in uri
    with ReplayServer([item]) as server:
        client = client_for(server, vertex)
        models = client.aio.models if is_async else client.models
        if uri.endswith("/interactions") or uri.endswith("/cachedContents"):
            await _call_other(item, client, is_async)
        elif ":streamGenerateContent" in uri:
            if is_async:
                async for _ in await models.generate_content_stream(model=model, contents="x"):
                    pass
            else:
                for _ in models.generate_content_stream(model=model, contents="x"):
                    pass
        elif "mbedContents" in uri or ":embedContent" in uri:
            result = models.embed_content(model=model, contents=["x"])
            if is_async:
                await result
        else:
            result = models.generate_content(model=model, contents="x")
            if is_async:
                await result
        if is_async:
            await client.aio.aclose()


async def _call_other(item: Recorded, client: Any, is_async: bool) -> None:
    """An Interactions API request (made with the recorded request body) or a ``caches.create``."""
    body = json.loads(item.request_body or b"{}")
    if item.uri.endswith("/cachedContents"):  # the model is in the request body
        caches = client.aio.caches if is_async else client.caches
        result = caches.create(model=body.get("model", "models/x").rsplit("/", 1)[1], config={"contents": ["x"]})
        if is_async:
            await result
    elif is_async:
        result = await client.aio.interactions.create(**body)
        if body.get("stream"):
            async for _ in result:
                pass
    else:
        result = client.interactions.create(**body)
        if body.get("stream"):
            for _ in result:
                pass


@pytest.mark.parametrize(("path", "index"), _cases())
async def test_every_recorded_response(
    path: Path, index: int, is_async: bool, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    item = load_cassette(path)[index]
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        await _call(item, is_async)
    assert not [r for r in caplog.records if r.name.startswith("evaltrace")], caplog.text
    spans = exporter.get_finished_spans()
    if item.uri.endswith("/interactions"):
        _check_interaction(item, spans)
        return
    assert len(spans) == 1, [s.name for s in spans]
    a = spans[0].attributes
    assert a["gen_ai.provider.name"] == ("gcp.vertex_ai" if "aiplatform" in item.uri else "gcp.gemini")
    body = _events(item)
    if item.uri.endswith("/cachedContents"):
        assert a["gen_ai.operation.name"] == "create_cache"
        assert a["gen_ai.response.id"] == body[0]["name"]
        assert a["gen_ai.response.model"] == body[0]["model"]
        tokens = body[0].get("usageMetadata", {}).get("totalTokenCount")
        assert a.get("gen_ai.usage.input_tokens") == tokens
        assert a.get("gen_ai.usage.cache_creation.input_tokens") == tokens
        return
    if "embeddings" in body[0]:
        assert a["gen_ai.operation.name"] == "embeddings"
        assert a["gen_ai.embeddings.dimension.count"] == len(body[0]["embeddings"][0]["values"])
        return
    expected = _expected(body)
    assert a["gen_ai.operation.name"] == "generate_content"
    assert tuple(a.get("gen_ai.response.finish_reasons", ())) == tuple(expected.pop("finish_reasons"))
    text, calls = expected.pop("text"), expected.pop("calls")
    for key, value in expected.items():
        assert a.get(key) == value, key
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert (key in a) == (key in expected), key
    messages = json.loads(a["gen_ai.output.messages"])
    parts = [p for m in messages for p in m["parts"]]
    assert "".join(p["content"] for p in parts if p["type"] == "text") == text
    assert [p["name"] for p in parts if p["type"] == "tool_call"] == calls


def _sse_data(item: Recorded) -> list[dict[str, Any]]:
    """The JSON ``data:`` of each event of an ``event:`` / ``data:`` SSE body (the ``[DONE]`` sentinel left out)."""
    out = []
    for block in item.body.decode().replace("\r\n", "\n").split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                out.append(json.loads(line[5:]))
    return out


def _check_interaction(item: Recorded, spans: Any) -> None:
    """An Interactions API exchange: one ``chat`` span read against the recorded body (none for an agent's)."""
    if "agent" in item.request_json():
        assert spans == ()  # an agent interaction runs server-side: not traced
        return
    assert len(spans) == 1, [s.name for s in spans]
    a = spans[0].attributes
    streamed = item.body.lstrip().startswith(b"event:")
    if streamed:
        events = _sse_data(item)
        final = [e["interaction"] for e in events if e.get("event_type") == "interaction.completed"][-1]
        text = "".join(e["delta"].get("text", "") for e in events
                       if e.get("event_type") == "step.delta" and e["delta"].get("type") == "text")  # fmt: skip
    else:
        final = json.loads(item.body)
        text = "".join(c.get("text", "") for step in final.get("steps", []) if step["type"] == "model_output"
                       for c in step.get("content", []))  # fmt: skip
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.response.id"] == final["id"]
    assert a["gen_ai.response.model"] == final["model"]
    assert a["gen_ai.response.finish_reasons"] == (final["status"],)
    usage = final["usage"]
    assert a["gen_ai.usage.input_tokens"] == usage["total_input_tokens"] + usage.get("total_tool_use_tokens", 0)
    thoughts = usage.get("total_thought_tokens", 0)
    assert a["gen_ai.usage.output_tokens"] == usage.get("total_output_tokens", 0) + thoughts
    if thoughts:
        assert a["gen_ai.usage.reasoning.output_tokens"] == thoughts
    messages = json.loads(a["gen_ai.output.messages"])
    assert "".join(p["content"] for m in messages for p in m["parts"] if p["type"] == "text") == text
