from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pydantic
import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import evaltrace
from evaltrace._internal import settings
from evaltrace._internal.evaluator_registry import resolve_evaluators
from evaltrace._internal.tracing import suppress_instrumentation

pytestmark = pytest.mark.usefixtures("provider")


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def only(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = spans_named(exporter, name)
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# --- kinds, names, attributes ---------------------------------------------------------------------------


def test_task_span_has_name_kind_input_and_output(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def summarise(text: str, limit: int = 3) -> dict[str, int]:
        return {"len": len(text)}

    assert summarise("hello", limit=2) == {"len": 5}
    span = only(exporter, "summarise")
    assert span.kind is SpanKind.INTERNAL
    a = attrs(span)
    assert a["evaltrace.span.kind"] == "task"
    assert a["langfuse.observation.type"] == "chain"
    assert json.loads(a["input.value"]) == {"text": "hello", "limit": 2}
    assert json.loads(a["output.value"]) == {"len": 5}
    assert "gen_ai.operation.name" not in a
    assert span.status.status_code is StatusCode.UNSET


def test_tool_agent_workflow_llm_follow_genai_conventions(exporter: InMemorySpanExporter) -> None:
    @evaltrace.tool
    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city.

        Longer description that is not part of the attribute.
        """
        return {"city": city, "temp_c": 11}

    @evaltrace.llm(name="my-model-call")
    def call_model(prompt: str) -> str:
        return "ok"

    @evaltrace.agent(name="weather-agent")
    def run_agent(question: str) -> str:
        call_model(question)
        return str(get_weather("Paris")["temp_c"])

    @evaltrace.workflow
    def pipeline(question: str) -> str:
        return run_agent(question)

    assert pipeline("weather?") == "11"
    tool_span = only(exporter, "execute_tool get_weather")
    agent_span = only(exporter, "invoke_agent weather-agent")
    workflow_span = only(exporter, "invoke_workflow pipeline")
    llm_span = only(exporter, "my-model-call")

    t = attrs(tool_span)
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "get_weather"
    assert t["gen_ai.tool.description"] == "Current weather for a city."
    assert json.loads(t["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    assert json.loads(t["gen_ai.tool.call.result"]) == {"city": "Paris", "temp_c": 11}
    assert t["evaltrace.span.kind"] == "tool"
    assert "input.value" not in t

    a = attrs(agent_span)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "weather-agent"
    assert a["evaltrace.span.kind"] == "agent"
    assert agent_span.kind is SpanKind.INTERNAL

    w = attrs(workflow_span)
    assert w["gen_ai.operation.name"] == "invoke_workflow"
    assert w["gen_ai.workflow.name"] == "pipeline"

    assert llm_span.kind is SpanKind.CLIENT
    assert attrs(llm_span)["evaltrace.span.kind"] == "llm"
    assert attrs(llm_span)["langfuse.observation.type"] == "generation"

    # parents: workflow > agent > (llm, tool)
    assert workflow_span.parent is None
    assert agent_span.parent is not None and agent_span.parent.span_id == workflow_span.context.span_id
    assert tool_span.parent is not None and tool_span.parent.span_id == agent_span.context.span_id
    assert llm_span.parent is not None and llm_span.parent.span_id == agent_span.context.span_id
    assert len({s.context.trace_id for s in exporter.get_finished_spans()}) == 1


def test_decorator_arguments_name_attributes_and_capture_flags(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace(name="custom", attributes={"team": "search"}, capture_input=False, capture_output=False)
    def secret(password: str) -> str:
        return password[::-1]

    assert secret("hunter2") == "2retnuh"
    a = attrs(only(exporter, "custom"))
    assert a["team"] == "search"
    assert "input.value" not in a and "output.value" not in a


def test_capture_content_setting_turns_capture_off(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def f(x: int) -> int:
        return x

    previous = settings.replace(settings.CaptureSettings(capture_content=False))
    try:
        f(1)
    finally:
        settings.replace(previous)
    a = attrs(only(exporter, "f"))
    assert "input.value" not in a and "output.value" not in a


def test_evaluators_are_reachable_from_the_span(exporter: InMemorySpanExporter) -> None:
    marker = object()

    @evaltrace.agent(evaluators=[marker])
    def answer() -> str:
        return "x"

    answer()
    ref = attrs(only(exporter, "invoke_agent answer"))["evaltrace.evaluators.ref"]
    assert resolve_evaluators(ref) == (marker,)


# --- async, exceptions -------------------------------------------------------------------------------------


async def test_async_function_nests_and_records(exporter: InMemorySpanExporter) -> None:
    @evaltrace.tool
    async def lookup(key: str) -> str:
        await asyncio.sleep(0)
        return key.upper()

    @evaltrace.agent
    async def agent_main(key: str) -> str:
        return await lookup(key)

    assert await agent_main("k") == "K"
    parent = only(exporter, "invoke_agent agent_main")
    child = only(exporter, "execute_tool lookup")
    assert child.parent is not None and child.parent.span_id == parent.context.span_id
    assert json.loads(attrs(parent)["output.value"]) == "K"


class CustomError(Exception):
    pass


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_exception_is_recorded_and_reraised_unchanged(exporter: InMemorySpanExporter, is_async: bool) -> None:
    error = CustomError("boom")

    if is_async:

        @evaltrace.trace
        async def failing() -> None:
            raise error

        with pytest.raises(CustomError) as info:
            asyncio.run(failing())
    else:

        @evaltrace.trace
        def failing() -> None:
            raise error

        with pytest.raises(CustomError) as info:
            failing()
    assert info.value is error
    span = only(exporter, "failing")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "CustomError: boom"
    assert attrs(span)["error.type"] == f"{__name__}.CustomError"
    assert [e.name for e in span.events] == ["exception"]
    assert "output.value" not in attrs(span)


def test_builtin_exception_error_type_has_no_module(exporter: InMemorySpanExporter) -> None:
    @evaltrace.tool
    def parse(text: str) -> int:
        return int(text)

    with pytest.raises(ValueError):
        parse("x")
    assert attrs(only(exporter, "execute_tool parse"))["error.type"] == "ValueError"


# --- generators ------------------------------------------------------------------------------------------


def test_sync_generator_span_covers_iteration_and_is_current_only_inside(exporter: InMemorySpanExporter) -> None:
    seen_inside: list[int] = []

    @evaltrace.trace
    def numbers(n: int) -> Iterator[int]:
        for i in range(n):
            seen_inside.append(otel_trace.get_current_span().get_span_context().span_id)
            yield i

    gen = numbers(3)
    assert spans_named(exporter, "numbers") == []  # not ended before iteration
    collected = []
    for item in gen:
        collected.append(item)
        # between items the consumer runs: the generator's span is not current here
        assert otel_trace.get_current_span().get_span_context().span_id not in seen_inside
    assert collected == [0, 1, 2]
    span = only(exporter, "numbers")
    assert set(seen_inside) == {span.context.span_id}
    assert json.loads(attrs(span)["output.value"]) == [0, 1, 2]
    assert span.status.status_code is StatusCode.UNSET


def test_sync_generator_break_then_close_ends_once(exporter: InMemorySpanExporter) -> None:
    closed = []

    @evaltrace.trace
    def stream() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            closed.append(True)

    gen = stream()
    for item in gen:
        if item == 2:
            break
    gen.close()
    gen.close()
    assert closed == [True]
    span = only(exporter, "stream")
    assert attrs(span)["evaltrace.generator.end_reason"] == "closed_early"


def test_sync_generator_garbage_collected_mid_iteration_ends_once(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def stream() -> Iterator[int]:
        yield from range(10)

    gen = stream()
    next(gen)
    del gen
    gc.collect()
    assert len(spans_named(exporter, "stream")) == 1


def test_sync_generator_never_iterated_ends_on_gc(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def stream() -> Iterator[int]:
        yield 1

    gen = stream()
    del gen
    gc.collect()
    span = only(exporter, "stream")
    assert attrs(span)["evaltrace.generator.end_reason"] == "garbage_collected"


def test_sync_generator_error_and_throw(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def failing() -> Iterator[int]:
        yield 1
        raise CustomError("mid-stream")

    gen = failing()
    assert next(gen) == 1
    with pytest.raises(CustomError):
        next(gen)
    span = only(exporter, "failing")
    assert span.status.status_code is StatusCode.ERROR

    @evaltrace.trace
    def echo() -> Iterator[str]:
        try:
            yield "first"
        except KeyError:
            yield "handled"

    gen2 = echo()
    assert next(gen2) == "first"
    assert gen2.throw(KeyError("k")) == "handled"
    with pytest.raises(StopIteration):
        next(gen2)
    assert json.loads(attrs(only(exporter, "echo"))["output.value"]) == ["first", "handled"]


def test_sync_generator_send_and_return_value(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def accumulator() -> Any:
        total = 0
        while True:
            value = yield total
            if value is None:
                return total
            total += value

    gen = accumulator()
    next(gen)
    assert gen.send(5) == 5
    assert gen.send(2) == 7
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == 7
    assert json.loads(attrs(only(exporter, "accumulator"))["output.value"]) == 7


def test_generator_output_is_capped_by_item_count(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def many() -> Iterator[int]:
        yield from range(1000)

    assert sum(many()) == sum(range(1000))
    output = json.loads(attrs(only(exporter, "many"))["output.value"])
    assert output["total_items"] == 1000 and len(output["items"]) == 100 and output["truncated"] is True


async def test_async_generator_exhaustion_aclose_and_error(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    async def tokens() -> AsyncIterator[str]:
        for t in ["a", "b"]:
            await asyncio.sleep(0)
            yield t

    assert [t async for t in tokens()] == ["a", "b"]
    assert json.loads(attrs(only(exporter, "tokens"))["output.value"]) == ["a", "b"]

    @evaltrace.trace
    async def endless() -> AsyncIterator[int]:
        i = 0
        while True:
            yield i
            i += 1

    agen = endless()
    assert await agen.__anext__() == 0
    await agen.aclose()
    await agen.aclose()
    assert attrs(only(exporter, "endless"))["evaltrace.generator.end_reason"] == "closed_early"

    @evaltrace.trace
    async def broken() -> AsyncIterator[int]:
        yield 1
        raise CustomError("x")

    with pytest.raises(CustomError):
        async for _ in broken():
            pass
    assert only(exporter, "broken").status.status_code is StatusCode.ERROR


def test_async_generator_never_iterated_ends_on_gc(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    async def never() -> AsyncIterator[int]:
        yield 1

    agen = never()
    del agen
    gc.collect()
    assert attrs(only(exporter, "never"))["evaltrace.generator.end_reason"] == "garbage_collected"


# --- methods ---------------------------------------------------------------------------------------------


def test_methods_classmethods_staticmethods_do_not_capture_self(exporter: InMemorySpanExporter) -> None:
    class Bot:
        def __init__(self) -> None:
            self.name = "bot"

        @evaltrace.trace
        def reply(self, text: str) -> str:
            return f"{self.name}: {text}"

        @evaltrace.trace
        @classmethod
        def build(cls, size: int) -> int:
            return size

        @classmethod
        @evaltrace.trace
        def build2(cls, size: int) -> int:
            return size * 2

        @evaltrace.tool
        @staticmethod
        def helper(x: int) -> int:
            return x + 1

    bot = Bot()
    assert bot.reply("hi") == "bot: hi"
    assert Bot.build(3) == 3
    assert Bot.build2(3) == 6
    assert Bot.helper(1) == 2 and bot.helper(1) == 2
    assert json.loads(attrs(only(exporter, "reply"))["input.value"]) == {"text": "hi"}
    assert json.loads(attrs(only(exporter, "build"))["input.value"]) == {"size": 3}
    assert json.loads(attrs(only(exporter, "build2"))["input.value"]) == {"size": 3}
    assert len(spans_named(exporter, "execute_tool helper")) == 2


# --- arguments that are hard to serialise ----------------------------------------------------------------


class Model(pydantic.BaseModel):
    name: str
    tags: list[str]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque thing>"


def test_unserialisable_arguments_get_a_bounded_representation(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def handle(model: Model, point: Point, raw: bytes, labels: set[str], thing: Opaque, nested: Any) -> Opaque:
        return thing

    circular: list[Any] = []
    circular.append(circular)
    handle(Model(name="m", tags=["a"]), Point(1, 2), b"\x00\x01binary", {"b", "a"}, Opaque(), circular)
    a = attrs(only(exporter, "handle"))
    captured = json.loads(a["input.value"])
    assert captured["model"] == {"name": "m", "tags": ["a"]}
    assert captured["point"] == {"x": 1, "y": 2}
    assert captured["raw"]["type"] == "bytes" and captured["raw"]["length"] == 8
    assert captured["labels"] == ["a", "b"]
    assert captured["thing"] == "<Opaque thing>"
    assert "circular" in json.dumps(captured["nested"])
    assert json.loads(a["output.value"]) == "<Opaque thing>"


def test_huge_arguments_are_capped_with_valid_json_marker(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def big(text: str) -> int:
        return len(text)

    previous = settings.replace(settings.CaptureSettings(max_attribute_length=1000))
    try:
        big("é" * 50_000)
    finally:
        settings.replace(previous)
    raw = attrs(only(exporter, "big"))["input.value"]
    assert len(raw) <= 1000
    marker = json.loads(raw)
    assert marker["evaltrace.truncated"] is True
    assert marker["original_length"] > 50_000


# --- context propagation ----------------------------------------------------------------------------------


def test_context_propagates_into_threads_and_tasks(exporter: InMemorySpanExporter) -> None:
    @evaltrace.tool
    def work(i: int) -> int:
        return i * 2

    @evaltrace.agent
    def fan_out() -> list[int]:
        with evaltrace.ContextThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(work, [1, 2]))
        thread_result: list[int] = []
        t = threading.Thread(target=evaltrace.wrap_context(lambda: thread_result.append(work(3))))
        t.start()
        t.join()

        async def run_tasks() -> list[int]:
            async def one(i: int) -> int:
                return work(i)

            return list(await asyncio.gather(*(asyncio.create_task(one(i)) for i in (4, 5))))

        return results + thread_result + asyncio.run(run_tasks())

    assert fan_out() == [2, 4, 6, 8, 10]
    parent = only(exporter, "invoke_agent fan_out")
    children = spans_named(exporter, "execute_tool work")
    assert len(children) == 5
    assert all(c.parent is not None and c.parent.span_id == parent.context.span_id for c in children)


def test_context_block_stamps_every_span_including_foreign_ones(
    exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    from evaltrace.context import ContextAttributesProcessor

    provider.add_span_processor(ContextAttributesProcessor())

    @evaltrace.trace
    def step() -> None:
        otel_trace.get_tracer("other-instrumentation", tracer_provider=provider).start_span("foreign").end()

    with evaltrace.context(session_id="s-1", user_id="u-9", tags=["beta"], metadata={"plan": "pro", "n": 2}):
        with evaltrace.context(tags=["inner"], user_id="u-10"):
            step()
    step()  # outside: no stamps

    stamped = [s for s in exporter.get_finished_spans()][:2]
    for span in stamped:
        a = attrs(span)
        assert a["session.id"] == "s-1"
        assert a["user.id"] == "u-10"
        assert list(a["langfuse.trace.tags"]) == ["beta", "inner"]
        assert a["langfuse.trace.metadata.plan"] == "pro"
        assert a["langfuse.trace.metadata.n"] == 2
    for span in exporter.get_finished_spans()[2:]:
        assert "session.id" not in attrs(span)


def test_suppression_creates_no_spans(exporter: InMemorySpanExporter) -> None:
    @evaltrace.trace
    def f() -> int:
        return 1

    with suppress_instrumentation():
        assert f() == 1
    assert exporter.get_finished_spans() == ()


def test_decorating_a_non_callable_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="decorates functions"):
        evaltrace.trace(42)
