"""A Gemini call whose history holds a function call the application ran itself (a resumed or approved run).

The real google-genai client, replaying the recorded second request of an automatic-function-calling exchange
(``test_generate_content_with_automatic_tool_calling.yaml``: the request that carries the function call and its
response, answered with the recorded text). Gemini function calls carry no id; the application ran the tool
(an ``@evaltrace.tool`` span) before asking the model, which is sent the call and the function's response. The
trace holds that call once, where the model was sent it, with the span's start time; the response answers it
whether or not it names the function (``FunctionResponse.name`` is optional in the SDK).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("google.genai")

from google.genai import types
from google_genai_replay import AIOHTTP_WARNING, OI, client_for
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from cassettes import ReplayServer, load_cassette
from evaltrace.evaluators import ToolCalled
from evaltrace.instrumentation.google_genai import GoogleGenAIInstrumentor
from evaltrace.mapping import trace_from_spans
from evaltrace.schema import EvalCase

AFC = OI / "test_generate_content_with_automatic_tool_calling.yaml"
QUESTION = "What's the weather like in San Francisco?"
WEATHER = {
    "location": "San Francisco",
    "temperature": 65,
    "unit": "fahrenheit",
    "condition": "foggy",
    "humidity": "85%",
}


@pytest.fixture
def instrumented(provider: TracerProvider, capture: None) -> Any:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


pytestmark = [pytest.mark.usefixtures("instrumented"), AIOHTTP_WARNING]


@evaltrace.tool
def get_weather(location: str) -> dict[str, Any]:
    """Return the current weather at a location."""
    return {**WEATHER, "location": location}


@pytest.mark.parametrize("names_function", [True, False], ids=["named_response", "anonymous_response"])
async def test_a_call_the_app_ran_before_asking_gemini_is_one_call_where_gemini_was_sent_it(
    is_async: bool, names_function: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    response_part = types.FunctionResponse(name="get_weather" if names_function else None, response={"result": WEATHER})
    contents = [
        types.Content(role="user", parts=[types.Part(text=QUESTION)]),
        types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="get_weather", args={"location": "San Francisco"}))
            ],
        ),
        types.Content(role="user", parts=[types.Part(function_response=response_part)]),
    ]
    answer_only = load_cassette(AFC)[1:]  # the recorded answer to the request carrying the call and its response
    with ReplayServer(answer_only) as server, provider.get_tracer("app").start_as_current_span("app"):
        get_weather("San Francisco")  # the run resumed: the approved call runs before the model is asked
        client = client_for(server)
        models = client.aio.models if is_async else client.models
        call = models.generate_content(model="gemini-2.0-flash", contents=contents)
        response = await call if is_async else call
    assert len(server.received) == 1
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["app", "execute_tool get_weather", "generate_content gemini-2.0-flash"]
    for trace in (trace_from_spans(spans), trace_from_spans(spans, lazy=True)):
        assert trace.output.final_answer == response.text
        assert [(c.name, c.arguments, c.started_at is not None, c.from_tool_span) for c in trace.tool_calls] == [
            ("get_weather", {"location": "San Francisco"}, True, False)  # the span's call, which Gemini was sent
        ]
        assert [r.content for r in trace.tool_results] == [{"result": WEATHER}]  # as Gemini was sent it
        # the conversation as it happened: the question, the call once, its response, the answer
        assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant"]
        assert ToolCalled().evaluate(trace, EvalCase(id="c", expected={"must_call_tools": ["get_weather"]})).passed
