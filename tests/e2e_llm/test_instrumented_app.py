"""An application's real chat completions, traced by evaltrace.instrument_openai() and mapped to a Trace.

The llama-cpp-python server differs from OpenAI where instrumentation is fragile: streams carry no usage even
when asked, and streamed tool calls repeat the id and the name in every chunk. The judge's own calls must never
be traced, also when the judge evaluates the application's spans live.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace import config
from evaltrace._internal import semconv as sc
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink
from evaltrace.evaluators import BYOP, Faithfulness
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace

from .conftest import MODEL, CountingJudge, counting_judge
from .report import OUTCOMES

pytestmark = pytest.mark.e2e_llm

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
SAY_HELLO = [{"role": "user", "content": "Say hello to Ada in one short sentence."}]


@contextlib.contextmanager
def configured(**options: Any) -> Iterator[InMemorySpanExporter]:
    """evaltrace configured with an in-memory exporter and the OpenAI instrumentation, undone afterwards."""
    saved = settings.current
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(exporters=[exporter], local_store=False, batch=False, **options)
    evaltrace.instrument_openai()
    try:
        yield exporter
    finally:
        evaltrace.uninstrument_openai()
        handle.shutdown()
        tracing.set_tracer_provider(None)
        settings.replace(saved)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    with configured(service_name="e2e-llm") as exporter:
        yield exporter


@pytest.fixture(params=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "async")


async def create(base_url: str, is_async: bool, **request: Any) -> Any:
    """One chat completion with the real openai client; a stream is drained into a list of chunks."""
    import openai

    if is_async:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="none", timeout=300.0, max_retries=0) as client:
            response = await client.chat.completions.create(model=MODEL, **request)
            return [chunk async for chunk in response] if request.get("stream") else response
    with openai.OpenAI(base_url=base_url, api_key="none", timeout=300.0, max_retries=0) as client:
        response = client.chat.completions.create(model=MODEL, **request)
        return list(response) if request.get("stream") else response


def llm_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get(sc.EVALTRACE_SPAN_KIND) == "llm"]


def only_trace(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, Trace]:
    (span,) = llm_spans(exporter)
    assert span.attributes is not None and span.attributes[sc.GEN_AI_RESPONSE_MODEL] == MODEL
    return span, trace_from_spans(exporter.get_finished_spans())


async def test_chat_completion_records_the_servers_usage(
    base_url: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    response = await create(base_url, is_async, messages=SAY_HELLO, max_tokens=24, temperature=0)
    span, trace = only_trace(exporter)
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert trace.metrics.token_input == response.usage.prompt_tokens
    assert trace.metrics.token_output == response.usage.completion_tokens
    assert trace.output.final_answer == response.choices[0].message.content
    assert [m.role for m in trace.messages] == ["user", "assistant"]
    assert trace.messages[0].content == SAY_HELLO[0]["content"]
    assert trace.metrics.cost_usd is None  # a local model has no price: unknown, not zero


async def test_stream_without_usage_records_no_token_counts(
    base_url: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    chunks = await create(
        base_url,
        is_async,
        messages=SAY_HELLO,
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert chunks and all(chunk.usage is None for chunk in chunks)  # the server ignores include_usage
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    span, trace = only_trace(exporter)
    assert span.attributes is not None
    assert sc.GEN_AI_USAGE_INPUT_TOKENS not in span.attributes and sc.GEN_AI_USAGE_OUTPUT_TOKENS not in span.attributes
    assert (trace.metrics.token_input, trace.metrics.token_output, trace.metrics.cost_usd) == (None, None, None)
    assert trace.output.final_answer == text and text
    assert trace.metrics.stream_chunks == len(chunks) and trace.metrics.stream_completed is True


async def test_forced_tool_call_streamed_with_repeated_names(
    base_url: str, is_async: bool, exporter: InMemorySpanExporter
) -> None:
    chunks = await create(
        base_url,
        is_async,
        messages=ASK_WEATHER,
        tools=[WEATHER_TOOL],
        tool_choice=FORCE_WEATHER,
        max_tokens=48,
        temperature=0,
        stream=True,
    )
    deltas = [call for chunk in chunks if chunk.choices for call in chunk.choices[0].delta.tool_calls or []]
    names = [d.function.name for d in deltas if d.function and d.function.name]
    assert len(names) > 1 and set(names) == {"get_weather"}  # the quirk under test: the name in every chunk
    ids = {d.id for d in deltas if d.id}
    assert len(ids) == 1
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    _, trace = only_trace(exporter)
    (call,) = trace.tool_calls
    assert call.name == "get_weather"  # not "get_weatherget_weather..."
    assert call.id == ids.pop()
    assert call.arguments == json.loads(arguments)
    assert set(call.arguments) == {"city"} and isinstance(call.arguments["city"], str)
    OUTCOMES.append(f"streamed forced tool call ({len(names)} chunks naming it): get_weather({arguments.strip()})")


async def test_forced_tool_call(base_url: str, exporter: InMemorySpanExporter) -> None:
    response = await create(
        base_url, False, messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice=FORCE_WEATHER, max_tokens=48
    )
    (expected,) = response.choices[0].message.tool_calls
    _, trace = only_trace(exporter)
    (call,) = trace.tool_calls
    assert (call.id, call.name) == (expected.id, "get_weather")
    assert call.arguments == json.loads(expected.function.arguments) and set(call.arguments) == {"city"}
    assert trace.metrics.token_input == response.usage.prompt_tokens


async def test_judge_calls_are_not_traced(exporter: InMemorySpanExporter, judge: CountingJudge) -> None:
    for evaluator in (Faithfulness(judge.judge), BYOP("Is {actual_answer} polite? true or false", judge=judge.judge)):
        trace = Trace.model_validate(
            {
                "run_id": "e2e",
                "case_id": "c",
                "variant_name": "v",
                "started_at": "2026-01-01T00:00:00Z",
                "finished_at": "2026-01-01T00:00:01Z",
                "input": {"question": "Who are you?", "contexts": ["Ada is a mathematician."]},
                "output": {"final_answer": "I am Ada, a mathematician."},
            }
        )
        await evaluator.evaluate(trace)
    assert len(judge.calls) >= 2  # the judge did talk to the server, with the instrumentation active ...
    assert exporter.get_finished_spans() == ()  # ... and none of it was traced


async def test_live_evaluation_of_an_app_call_traces_only_the_app(base_url: str, tmp_path: Path) -> None:
    counted = counting_judge(base_url)
    greeting = BYOP("Is this a greeting? {actual_answer}\nReply true or false.", judge=counted.judge)
    scores = tmp_path / "scores.jsonl"
    with configured(
        service_name="e2e-live",
        evaluators=[EvaluatorSpec(greeting, span_kinds={"llm"}, timeout_s=300)],
        sinks=[JsonlScoreSink(scores)],
        evaluation_options={"hold_timeout_s": 300, "dead_letter_dir": None, "sink_schedule_delay_s": 0.01},
    ) as exporter:
        await create(base_url, False, messages=SAY_HELLO, max_tokens=24, temperature=0)
        handle = config.current_handle()
        assert handle is not None and handle.force_flush(300_000)
        (span,) = llm_spans(exporter)  # the app's call only: the judge evaluating it left no LLM span
    assert len(counted.calls) in (1, 2)  # the judge did call the server (once, or twice after a bad reply)
    records = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [r["name"] for r in records] == ["byop"]
    assert records[0]["metadata"]["span_id"] == format(span.context.span_id, "016x")
    assert span.attributes is not None
    evaluated = {k: v for k, v in span.attributes.items() if k.startswith(sc.EVALTRACE_EVAL_PREFIX)}
    assert any(key.startswith("evaltrace.eval.byop.") for key in evaluated), evaluated
    OUTCOMES.append(f"live evaluation of the app's span ({len(counted.calls)} judge call(s)): {evaluated}")
