"""Golden spans: every recorded OpenAI cassette and Anthropic fixture, sync and async, through the real clients.

Each case's spans (name, kind, status, every attribute with its exact type, events) are compared with
tests/snapshots/instrumentation_golden.json, generated from the instrumentation as it was before it moved onto the
engine (issue 26): the move must not change one byte. Only values that differ from run to run are normalised:
stream timings (time to first/last chunk, tokens per second, the completion start stamp) and exception stack
traces (they name our own source lines). Regenerate, deliberately, with ``EVALTRACE_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_replay import Interaction, drain, load, method_for, resource_for, skip_unless_accepts
from openai_replay import client as openai_client
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import CASSETTES

from evaltrace.instrumentation.anthropic import AnthropicInstrumentor
from evaltrace.instrumentation.openai import OpenAIInstrumentor

anthropic = pytest.importorskip("anthropic")

from anthropic_replay import FIXTURES, MODEL, Reply  # noqa: E402
from anthropic_replay import client as anthropic_client  # noqa: E402
from pydantic import BaseModel  # noqa: E402

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "instrumentation_golden.json"
_UPDATE = os.environ.get("EVALTRACE_UPDATE_GOLDEN") == "1"
_VARIABLE = frozenset(
    (
        "gen_ai.response.time_to_first_chunk",
        "evaltrace.stream.time_to_last_chunk",
        "evaltrace.stream.output_tokens_per_second",
        "langfuse.observation.completion_start_time",
        "exception.stacktrace",
    )
)
_TOOL_TURNS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "openai_tool_turns").glob("*.yaml"))
_OPENAI = [*CASSETTES, *_TOOL_TURNS]
_ANTHROPIC = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".json", ".sse") and p.stem != "count_tokens")

_ANTHROPIC_REQUEST: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 1024,
    "system": "Be brief.",
    "stop_sequences": ["\n\nHuman:"],
    "tools": [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }
    ],
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny, 21C"}]},
    ],
}


class Contact(BaseModel):
    name: str
    email: str
    plan_interest: str
    demo_requested: bool


def _value(key: str, value: Any) -> str:
    return "<variable>" if key in _VARIABLE else repr(value)  # repr: a tuple stays a tuple, 1 stays apart from 1.0


def _span_record(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": span.kind.name,
        "status": [span.status.status_code.name, span.status.description],
        "attributes": {k: _value(k, v) for k, v in sorted((span.attributes or {}).items())},
        "events": [
            {"name": e.name, "attributes": {k: _value(k, v) for k, v in sorted((e.attributes or {}).items())}}
            for e in span.events
        ],
    }


@pytest.fixture(scope="module")
def golden() -> Iterator[dict[str, Any]]:
    expected: dict[str, Any] = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.is_file() else {}
    seen: dict[str, Any] = {}
    yield seen if _UPDATE else expected
    if _UPDATE:
        merged = {**expected, **seen}
        SNAPSHOT.write_text(json.dumps(dict(sorted(merged.items())), indent=1, sort_keys=True) + "\n")


def _compare(golden: dict[str, Any], case: str, exporter: InMemorySpanExporter) -> None:
    records = [_span_record(span) for span in exporter.get_finished_spans()]
    assert records, case
    if _UPDATE:
        golden[case] = records
        return
    assert case in golden, f"{case}: no snapshot (regenerate with EVALTRACE_UPDATE_GOLDEN=1 on the old code)"
    assert json.dumps(records, sort_keys=True) == json.dumps(golden[case], sort_keys=True)


@pytest.fixture
def both(provider: TracerProvider, capture: None) -> Iterator[None]:
    instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in instrumentors:
        instrumentor.uninstrument()


async def _openai_call(api: Any, item: Interaction, is_async: bool) -> None:
    import openai

    try:
        result = method_for(api, item.path)(**item.request)
        if is_async:
            result = await result
        if item.request.get("stream"):
            await drain(result, is_async)
    except openai.APIStatusError:
        pass


@pytest.mark.usefixtures("both")
@pytest.mark.parametrize("path", _OPENAI, ids=[f"{p.parent.name}/{p.stem}" for p in _OPENAI])
async def test_openai_recordings_replay_to_the_golden_spans(
    path: Path, is_async: bool, exporter: InMemorySpanExporter, golden: dict[str, Any]
) -> None:
    interactions = load(path)
    for item in interactions:
        skip_unless_accepts(f"{resource_for(item.path)}.create", *item.request)
    api, server = openai_client(interactions, is_async)
    for item in interactions:
        await _openai_call(api, item, is_async)
    assert not server.pending
    _compare(golden, f"openai/{path.parent.name}/{path.stem}/{'async' if is_async else 'sync'}", exporter)


def _status(name: str) -> int:
    return int(name.split("_")[1].split(".")[0]) if name.startswith("error_") else 200


async def _anthropic_call(name: str, how: str, is_async: bool) -> None:
    api, _ = anthropic_client([Reply(name, _status(name))], is_async)
    try:
        if how == "parse":
            result = api.messages.parse(**{**_ANTHROPIC_REQUEST, "tools": []}, output_format=Contact)
            if is_async:
                await result
        elif how in ("create", "beta"):
            resource = api.beta.messages if how == "beta" else api.messages
            result = resource.create(**_ANTHROPIC_REQUEST, stream=name.endswith(".sse"))
            result = await result if is_async else result
            if name.endswith(".sse"):
                await drain(result, is_async)
        elif is_async:  # the stream() helper
            async with api.messages.stream(**_ANTHROPIC_REQUEST) as stream:
                async for _ in stream.text_stream:
                    pass
        else:
            with api.messages.stream(**_ANTHROPIC_REQUEST) as stream:
                for _ in stream.text_stream:
                    pass
    except anthropic.APIError:
        pass


def _anthropic_cases() -> list[tuple[str, str]]:
    cases = []
    for name in _ANTHROPIC:
        if name == "parse.json":
            cases.append((name, "parse"))
        elif name.endswith(".sse"):
            cases += [(name, "create"), (name, "stream")]
        else:
            cases += [(name, "create"), (name, "beta")] if name == "text.json" else [(name, "create")]
    return cases


@pytest.mark.usefixtures("both")
@pytest.mark.parametrize(("name", "how"), _anthropic_cases(), ids=[f"{n}-{h}" for n, h in _anthropic_cases()])
async def test_anthropic_recordings_replay_to_the_golden_spans(
    name: str, how: str, is_async: bool, exporter: InMemorySpanExporter, golden: dict[str, Any]
) -> None:
    await _anthropic_call(name, how, is_async)
    _compare(golden, f"anthropic/{name}/{how}/{'async' if is_async else 'sync'}", exporter)
