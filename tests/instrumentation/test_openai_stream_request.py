"""A stream's request attributes: taken when the call returns, written with the response when the stream ends."""

from __future__ import annotations

import json
import math

import pytest
from openai_replay import client, load
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests_paths import cassette

from evaltrace._internal.jsonutil import capped_json
from evaltrace._internal.openai.encode import scalars_json
from evaltrace._internal.openai.registry import EndpointKind
from evaltrace._internal.openai.request import model_parameters
from evaltrace.instrumentation.openai import OpenAIInstrumentor

_STREAM = cassette("test_chat_completion_streaming.yaml")


@pytest.mark.usefixtures("cassettes")
def test_history_changed_during_the_stream_is_recorded_as_sent(
    instrumented: OpenAIInstrumentor, exporter: InMemorySpanExporter
) -> None:
    interactions = load(_STREAM)
    api, _ = client(interactions, False)
    messages = [dict(m) for m in interactions[0].request["messages"]]
    sent = json.loads(json.dumps(messages))
    stream = api.chat.completions.create(model="gpt-4", messages=messages, stream=True, temperature=0.5)
    first = next(stream)
    # Changed before the stream has ended (the span is still open): what was sent is what gets recorded.
    messages.append({"role": "assistant", "content": "(streaming)"})
    chunks = [first, *stream]
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    recorded = json.loads(str(attrs["gen_ai.input.messages"]))
    assert [m["parts"][0]["content"] for m in recorded] == [m["content"] for m in sent]
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert json.loads(str(attrs["gen_ai.output.messages"]))[0]["parts"][0]["content"] == answer
    assert attrs["evaltrace.stream.completed"] is True


def test_model_parameters_keep_their_order_whatever_order_the_call_gave() -> None:
    given = {"stream": True, "seed": 7, "max_tokens": 20, "temperature": 0.5, "stop": ["a", "b"], "n": None}
    params = model_parameters(EndpointKind.CHAT, given)
    assert list(params) == ["temperature", "max_tokens", "seed", "stop", "stream"]
    assert params["stop"] == '["a", "b"]'
    assert model_parameters(EndpointKind.CHAT, {"max_tokens": True, "stream": 1}) == {}  # wrong types dropped


@pytest.mark.parametrize(
    "values",
    [
        {"max_tokens": 20, "stream": True},
        {"temperature": 0.7, "top_p": 1, "stop": '["\\u00e9", "\\n"]', "seed": 3, "reasoning_effort": "low"},
        {"temperature": math.nan},
        {"service_tier": 'é\u2028\x00"quoted"'},
        {"temperature": 1e300, "top_p": -0.0},
    ],
)
@pytest.mark.parametrize("max_len", [0, 8, 10_000])
def test_scalars_json_is_capped_json(values: dict[str, object], max_len: int) -> None:
    assert scalars_json(values, max_len) == capped_json(values, max_len)
