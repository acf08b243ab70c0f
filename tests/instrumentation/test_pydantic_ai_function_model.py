"""pydantic-ai runs that wait for approval (paused, deferred by the tool, failing on resume) and structured outputs.

Real pydantic-ai agents on pydantic-ai's ``FunctionModel`` (the model's responses written in the test, no network),
traced by ``instrument_pydantic_ai()`` and mapped as the pipeline maps them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunContext,
    ToolOutput,
)
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

import evaltrace
from evaltrace._internal import settings
from evaltrace.evaluators import ToolErrorRate
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import Trace
from evaltrace.testing import TraceCapture, capture_traces, evaluate

CALL = ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c1")


@pytest.fixture
def capture() -> Iterator[TraceCapture]:
    previous = settings.replace(settings.CaptureSettings(capture_content=True))
    try:
        with capture_traces() as capture:
            yield capture
    finally:
        evaltrace.uninstrument_pydantic_ai()
        settings.replace(previous)


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for the weather, with a preamble (as Anthropic models often write); answers once the tool answered."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(p.part_kind in ("tool-return", "retry-prompt") for p in last.parts):
        return ModelResponse(parts=[TextPart("Done.")])
    return ModelResponse(parts=[TextPart("Let me check the weather for you."), CALL])


def _turns(capture: TraceCapture) -> list[Trace]:
    by_trace: dict[int, list[Any]] = {}
    for span in capture.spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    return sorted((trace_from_spans(s) for s in by_trace.values()), key=lambda t: t.started_at)


def test_a_run_paused_for_approval_has_no_answer_even_with_text_beside_the_call(capture: TraceCapture) -> None:
    evaltrace.instrument_pydantic_ai()
    agent = Agent(FunctionModel(_model), output_type=[str, DeferredToolRequests])
    agent.tool_plain(name="get_weather", requires_approval=True)(_sunny)
    output = asyncio.run(agent.run("Weather in Paris?")).output
    assert isinstance(output, DeferredToolRequests)
    trace = trace_from_spans(list(capture.spans))
    assert trace.output.final_answer is None  # the preamble is not an answer: the run waits for an approval
    assert trace.output.structured is not None and [
        c["tool_call_id"] for c in trace.output.structured["approvals"]
    ] == ["c1"]
    assert [c.name for c in trace.tool_calls] == ["get_weather"] and trace.tool_results == []


def _sunny(city: str) -> str:
    return f"Sunny in {city}."


@pytest.mark.filterwarnings("ignore:Instrumentation format versions:UserWarning")
@pytest.mark.parametrize("version", [2, 3, 4, 5])
def test_a_tool_deferring_itself_is_not_a_failed_call_on_any_instrumentation_version(
    capture: TraceCapture, version: int
) -> None:
    """``ApprovalRequired`` raised by the tool: versions below 5 end its span in error, but nothing failed."""
    evaltrace.instrument_pydantic_ai(version=version)
    agent = Agent(FunctionModel(_model), output_type=[str, DeferredToolRequests])

    @agent.tool
    def get_weather(ctx: RunContext[None], city: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        return _sunny(city)

    assert isinstance(asyncio.run(agent.run("Weather in Paris?")).output, DeferredToolRequests)
    trace = trace_from_spans(list(capture.spans))
    assert [c.name for c in trace.tool_calls] == ["get_weather"]
    assert trace.tool_results == []  # deferred: no result yet, and not an error
    (rate,) = evaluate(trace, ToolErrorRate(threshold=0.0))
    assert rate.status == "skipped"  # no result to rate, rather than one failed call


def _retry(city: str) -> str:
    raise ModelRetry("City not found, try again with the country")


def _fails(city: str) -> str:
    raise ToolFailed("weather service down")


@pytest.mark.parametrize(
    ("tool", "error"),
    [(_retry, "City not found, try again with the country"), (_fails, "weather service down")],
    ids=["model_retry", "tool_failed"],
)
def test_an_approved_call_failing_on_resume_is_a_failed_call(
    capture: TraceCapture, tool: Callable[[str], str], error: str
) -> None:
    evaltrace.instrument_pydantic_ai()
    agent = Agent(FunctionModel(_model), output_type=[str, DeferredToolRequests])
    agent.tool_plain(name="get_weather", requires_approval=True)(tool)

    async def run() -> str:
        first = await agent.run("Weather in Paris?")
        assert isinstance(first.output, DeferredToolRequests)
        approvals = DeferredToolResults(approvals={c.tool_call_id: True for c in first.output.approvals})
        second = await agent.run(message_history=first.all_messages(), deferred_tool_results=approvals)
        return str(second.output)

    assert asyncio.run(run()) == "Done."
    paused, resumed = _turns(capture)
    assert [(c.id, c.name) for c in resumed.tool_calls] == [("c1", "get_weather")]
    assert resumed.tool_calls[0].started_at is not None
    assert [(r.tool_call_id, r.content) for r in resumed.tool_results] == [("c1", {"error": error})]
    (rate,) = evaluate(resumed, ToolErrorRate(threshold=0.0))
    assert rate.passed is False
    assert resumed.output.final_answer == "Done."


class _Timeout(Exception):
    pass


def test_a_tool_raising_an_exception_without_a_message_gives_its_class_name(capture: TraceCapture) -> None:
    """pydantic-ai records the exception's full dotted type; the result names it as with a message: its class."""
    evaltrace.instrument_pydantic_ai()
    agent = Agent(FunctionModel(_model))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        raise _Timeout

    with pytest.raises(_Timeout):
        asyncio.run(agent.run("Weather in Paris?"))
    assert [r.content for r in trace_from_spans(list(capture.spans)).tool_results] == [{"error": "_Timeout"}]


def _answers_with(value: Any) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    """A model answering ``value`` as the output mode asks: ``final_result``'s arguments, or JSON text."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.output_tools:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, value)])
        return ModelResponse(parts=[TextPart(json.dumps(value))])

    return model


class _City(BaseModel):
    city: str
    country: str


@pytest.mark.parametrize("mode", [ToolOutput, NativeOutput, PromptedOutput])
@pytest.mark.parametrize(
    ("output_type", "written", "answer"),
    [
        (list[str], {"response": ["Chicago", "Paris"]}, '["Chicago","Paris"]'),
        (int, {"response": 42}, "42"),
        (_City, {"city": "Chicago", "country": "USA"}, '{"city":"Chicago","country":"USA"}'),
    ],
    ids=["list", "number", "object"],
)
def test_a_structured_output_in_every_output_mode_is_its_json(
    capture: TraceCapture, mode: Any, output_type: Any, written: Any, answer: str
) -> None:
    """A list or number is wrapped as ``{"response": ...}`` for the model; the run's output is the value itself."""
    evaltrace.instrument_pydantic_ai()
    profile = ModelProfile(supports_json_schema_output=True, supports_json_object_output=True)
    agent = Agent(FunctionModel(_answers_with(written), profile=profile), output_type=mode(output_type))
    asyncio.run(agent.run("Name the windy city."))
    output = trace_from_spans(list(capture.spans)).output
    assert output.final_answer == answer
    value = json.loads(answer)
    assert output.structured == (value if isinstance(value, dict) else None)  # an object only


def _per_response_ids(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A server numbering call ids per response: every turn's call is ``call_0``, for the city the user asked."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(p.part_kind in ("tool-return", "retry-prompt") for p in last.parts):
        return ModelResponse(parts=[TextPart("Done.")])
    asked = next(p.content for p in reversed(last.parts) if isinstance(p, UserPromptPart))
    city = str(asked).split()[-1].rstrip("?")
    return ModelResponse(parts=[ToolCallPart("get_weather", {"city": city}, tool_call_id="call_0")])


def _only_paris(city: str) -> str:
    if city != "Paris":
        raise ModelRetry(f"No weather for {city}")
    return _sunny(city)


def test_a_follow_up_turn_under_a_reused_call_id_judges_its_own_call_only(capture: TraceCapture) -> None:
    """Turn 2 is sent turn 1's call_0 and its result again; its verdicts are about its own call_0, which failed."""
    evaltrace.instrument_pydantic_ai()
    agent = Agent(FunctionModel(_per_response_ids))
    agent.tool_plain(name="get_weather")(_only_paris)

    async def run() -> None:
        first = await agent.run("Weather in Paris?")
        await agent.run("And in London?", message_history=first.all_messages())

    asyncio.run(run())
    paris, london = _turns(capture)
    assert [(c.id, c.arguments) for c in paris.tool_calls] == [("call_0", {"city": "Paris"})]
    assert [r.content for r in paris.tool_results] == ["Sunny in Paris."]
    assert [(c.id, c.arguments) for c in london.tool_calls] == [("call_0", {"city": "London"})]
    assert [(r.tool_call_id, r.content) for r in london.tool_results] == [
        ("call_0", {"error": "No weather for London"})
    ]
    (rate,) = evaluate(london, ToolErrorRate(threshold=0.0))
    assert rate.score == 1.0  # one result judged, this turn's: turn 1's success is not counted again
