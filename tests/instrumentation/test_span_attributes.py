"""LLM span attributes: built once the call returned, stored by ``set_built`` exactly as the SDK would store them."""

from __future__ import annotations

import json
import logging
import operator
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai_replay import client, json_interaction
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from evaltrace._internal import deferred_attributes, tracing
from evaltrace._internal.deferred_attributes import set_built
from evaltrace._internal.openai import build

CHAT = "/v1/chat/completions"

# What our builders make: stored without the SDK's cleaning.
CLEAN: dict[str, Any] = {"s": "text", "i": 3, "f": 0.5, "b": True, "strs": ["a", "b"], "ints": (1, 2), "empty": []}
# Scalars and tuples of one scalar type (the builders' own output): stored by one type check, no per-value loop.
AS_IS: dict[str, Any] = {"s": "text", "i": 3, "f": 0.5, "b": True, "strs": ("a", "b"), "empty": ()}
# Anything else makes the whole write go through the SDK's setter.
VALUES: dict[str, Any] = {
    **CLEAN,
    "mixed": [1, "a"],
    "with.none": ["a", None],
    "none": None,
    "obj": object(),
    "long": "x" * 50,
}


def _spans(limits: SpanLimits | None = None) -> tuple[Any, Any]:
    tracer = TracerProvider(span_limits=limits).get_tracer("t") if limits else TracerProvider().get_tracer("t")
    return tracer.start_span("ours", attributes={"a": 1}), tracer.start_span("sdk", attributes={"a": 1})


@pytest.mark.parametrize("values", [AS_IS, CLEAN, VALUES], ids=["as-is", "clean", "needs-cleaning"])
@pytest.mark.parametrize(
    "limits",
    [None, SpanLimits(max_span_attribute_length=10), SpanLimits(max_span_attributes=5)],
    ids=["no-limits", "value-length", "count"],
)
def test_set_built_stores_what_set_attributes_stores(limits: SpanLimits | None, values: dict[str, Any]) -> None:
    ours, sdk = _spans(limits)
    for span in (ours, sdk):
        span.set_attribute("late", "user")  # set during the call: a re-set moves to the end, as in the SDK
    set_built(ours, {**values, "late": "ours", "a": 2})
    sdk.set_attributes({**values, "late": "ours", "a": 2})
    assert list(ours.attributes.items()) == list(sdk.attributes.items())
    assert ours._attributes.dropped == sdk._attributes.dropped  # type: ignore[attr-defined]
    assert type(ours._attributes) is BoundedAttributes  # type: ignore[attr-defined]  # no subclass switched in


@pytest.mark.parametrize("values", [AS_IS, CLEAN], ids=["as-is", "clean"])
def test_set_built_stores_clean_values_without_the_sdk_setter(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, Any]
) -> None:
    ours, _ = _spans()
    monkeypatch.setattr(type(ours), "set_attributes", lambda *_: pytest.fail("took the SDK's setter"))
    set_built(ours, values)
    assert dict(ours.attributes) == {"a": 1, **{k: tuple(v) if type(v) is list else v for k, v in values.items()}}


def test_set_built_on_an_ended_span_changes_nothing() -> None:
    ours, _ = _spans()
    ours.end()
    set_built(ours, {"late": 1})
    assert dict(ours.attributes) == {"a": 1}


def test_set_built_falls_back_to_the_sdk_when_its_shape_is_unexpected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deferred_attributes, "_SDK_SHAPE_OK", False)
    ours, sdk = _spans()
    set_built(ours, VALUES)
    sdk.set_attributes(VALUES)
    assert dict(ours.attributes) == dict(sdk.attributes)


def _completion() -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        }
    )


def _traced_chat(messages: list[dict[str, Any]]) -> Any:
    api, _ = client([json_interaction(CHAT, _completion())], False)
    return api.chat.completions.create(model="gpt-4o", messages=messages, temperature=0.5)  # type: ignore[arg-type]


@pytest.mark.usefixtures("instrumented")
def test_llm_spans_are_the_same_through_set_built_or_the_sdk(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    _traced_chat([{"role": "user", "content": "hi"}])
    monkeypatch.setattr(deferred_attributes, "_SDK_SHAPE_OK", False)
    _traced_chat([{"role": "user", "content": "hi"}])
    fast, sdk = exporter.get_finished_spans()
    assert dict(fast.attributes or {}) == dict(sdk.attributes or {})
    assert (fast.attributes or {})["evaltrace.cost_usd"] > 0
    assert (fast.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert len(dict(fast.attributes or {})) >= 20


@pytest.mark.usefixtures("instrumented")
def test_messages_appended_after_the_call_are_not_captured(exporter: InMemorySpanExporter) -> None:
    messages = [{"role": "user", "content": "hi"}]
    _traced_chat(messages)
    messages.append({"role": "assistant", "content": "appended later"})
    (span,) = exporter.get_finished_spans()
    captured = (span.attributes or {})["gen_ai.input.messages"]
    assert "hi" in captured and "appended later" not in captured


@pytest.mark.usefixtures("instrumented")
def test_the_callers_kwargs_dict_is_never_written(exporter: InMemorySpanExporter) -> None:
    """operator.methodcaller hands the wrapper the very dict it stores: calling it again must send the same."""
    history = [{"role": "user", "content": "hi"}]
    ask = operator.methodcaller("create", model="gpt-4o", messages=history)
    embed = operator.methodcaller("create", model="text-embedding-3-small", input=["a"])
    embedding = {
        "object": "list",
        "model": "text-embedding-3-small",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1]}],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }
    interactions = [json_interaction(CHAT, _completion()) for _ in range(2)]
    interactions += [json_interaction("/v1/embeddings", embedding) for _ in range(2)]
    api, server = client(interactions, False)
    ask(api.chat.completions)
    history.append({"role": "user", "content": "again"})
    ask(api.chat.completions)
    embed(api.embeddings)
    embed(api.embeddings)
    bodies = [json.loads(request.content) for request in server.requests]
    assert [len(body["messages"]) for body in bodies[:2]] == [1, 2]
    assert [body["input"] for body in bodies[2:]] == [["a"], ["a"]]
    first, second = (span.attributes or {} for span in exporter.get_finished_spans()[:2])
    assert "again" not in first["gen_ai.input.messages"] and "again" in second["gen_ai.input.messages"]


@pytest.mark.usefixtures("instrumented")
def test_sampled_out_llm_spans_build_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def request_attributes(*args: Any) -> dict[str, Any]:
        built.append("request")
        return {}

    def response_attributes(*args: Any) -> dict[str, Any]:
        built.append("response")
        return {}

    monkeypatch.setattr(build, "request_attributes", request_attributes)
    monkeypatch.setattr(build, "response_attributes", response_attributes)
    previous = tracing.set_tracer_provider(TracerProvider(sampler=ALWAYS_OFF))
    try:
        _traced_chat([{"role": "user", "content": "hi"}])
    finally:
        tracing.set_tracer_provider(previous)
    assert built == []


def _broken(*args: Any) -> dict[str, Any]:
    raise RuntimeError("bug in a builder")


@pytest.mark.usefixtures("instrumented")
def test_builder_errors_are_logged_not_raised_in_production(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(build, "request_attributes", _broken)
    monkeypatch.delenv("EVALTRACE_RAISE_INTERNAL_ERRORS")  # our suite re-raises our errors; act as production
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        completion = _traced_chat([{"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "ok"  # the application's call is unaffected
    assert "bug in a builder" in caplog.text
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["gen_ai.request.model"] == "gpt-4o"  # the start attributes are kept


@pytest.mark.usefixtures("instrumented")
def test_builder_errors_surface_under_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "request_attributes", _broken)
    with pytest.raises(RuntimeError, match="bug in a builder"):
        _traced_chat([{"role": "user", "content": "hi"}])
