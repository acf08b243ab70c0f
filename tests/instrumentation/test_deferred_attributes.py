"""Deferred span attributes: built once, on first read, by whichever thread reads first; never lost."""

from __future__ import annotations

import copy
import json
import logging
import operator
import pickle
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai_replay import client, json_interaction
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from evaltrace._internal import deferred_attributes, tracing
from evaltrace._internal.deferred_attributes import DeferredAttributes, defer, install
from evaltrace._internal.openai import build

KEYS = frozenset({"late.a", "late.b", "late.end"})
CHAT = "/v1/chat/completions"


class Counting:
    """A builder that counts its runs."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)
        self.calls = 0

    def __call__(self) -> Mapping[str, Any]:
        self.calls += 1
        return self.values


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp


def _span(tp: TracerProvider, start: Counting, end: Counting | None = None) -> ReadableSpan:
    span = tp.get_tracer("t").start_span("s", attributes={"eager.kind": "llm"})
    assert install(span, KEYS, start)
    if end is not None:
        assert defer(span, end, overwrite=True)
    span.end()
    return span  # type: ignore[return-value]


def test_builds_once_on_first_read(tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    start, end = Counting({"late.a": 1, "late.b": "x"}), Counting({"late.end": [1, 2]})
    _span(tracer_provider, start, end)
    (span,) = exporter.get_finished_spans()
    assert start.calls == end.calls == 0  # ending the span built nothing
    attributes = span.attributes
    assert attributes is not None and dict(attributes) == {
        "eager.kind": "llm",
        "late.a": 1,
        "late.b": "x",
        "late.end": (1, 2),
    }
    assert len(attributes) == 4 and attributes["late.a"] == 1 and "late.b" in attributes
    assert sorted(attributes.items()) == sorted(dict(attributes).items())
    assert start.calls == end.calls == 1


def test_eager_and_unknown_keys_do_not_build(tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    start = Counting({"late.a": 1})
    _span(tracer_provider, start)
    (span,) = exporter.get_finished_spans()
    attributes = span.attributes or {}  # ReadableSpan.attributes truth-tests the mapping
    assert attributes.get("eager.kind") == "llm"
    assert attributes["eager.kind"] == "llm"
    assert "eager.kind" in attributes
    assert attributes.get("evaltrace.evaluators.ref") is None and "other" not in attributes
    assert start.calls == 0
    assert attributes.get("late.a") == 1  # a key a builder may produce does build
    assert start.calls == 1


def test_other_spans_attributes_are_the_sdks_own_view(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _span(tracer_provider, Counting({"late.a": 1}))  # installs the non-building view for deferred spans
    plain = tracer_provider.get_tracer("t").start_span("plain", attributes={"k": "v"})
    live = plain.attributes
    plain.end()
    deferred, ended = exporter.get_finished_spans()
    assert type(deferred.attributes) is not MappingProxyType  # the view that truth-tests without building
    for attributes in (live, ended.attributes):
        assert type(attributes) is MappingProxyType  # every other span: exactly what the SDK returns
        assert dict(attributes) == {"k": "v"}
    assert tracer_provider.get_tracer("t").start_span("empty").attributes == {}


def test_the_view_behaves_like_mappingproxytype(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _span(tracer_provider, Counting({"late.a": 1}))
    (span,) = exporter.get_finished_spans()
    view = span.attributes
    assert view | {"x": 2} == {"eager.kind": "llm", "late.a": 1, "x": 2}
    assert {"late.a": 0, "x": 2} | view == {"late.a": 1, "x": 2, "eager.kind": "llm"}
    assert list(reversed(view)) == list(reversed(list(view)))
    assert view.copy() == dict(view) and len(view) == 2


def test_concurrent_readers_build_once_and_all_see_everything(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    readers = 8
    entered, release = threading.Event(), threading.Event()

    class Slow(Counting):
        def __call__(self) -> Mapping[str, Any]:
            entered.set()
            release.wait()  # every other reader is now blocked on the build or about to be
            return super().__call__()

    start = Slow({"late.a": 1, "late.b": "x"})
    _span(tracer_provider, start)
    (span,) = exporter.get_finished_spans()
    barrier = threading.Barrier(readers + 1)
    seen: list[dict[str, Any]] = []

    def read() -> None:
        barrier.wait()
        seen.append(dict(span.attributes or {}))

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    assert entered.wait(10)
    release.set()
    for thread in threads:
        thread.join(10)
    assert start.calls == 1
    assert seen == [{"eager.kind": "llm", "late.a": 1, "late.b": "x"}] * readers


def test_builder_registered_after_a_read_applies_at_once(tracer_provider: TracerProvider) -> None:
    span = tracer_provider.get_tracer("t").start_span("s", attributes={"eager.kind": "llm"})
    start, end = Counting({"late.a": 1}), Counting({"late.end": 2})
    assert install(span, KEYS, start)
    assert span.attributes["late.a"] == 1  # type: ignore[attr-defined]  # read mid-call: builds the start half
    assert defer(span, end, overwrite=True)
    assert end.calls == 1
    assert span.attributes["late.end"] == 2  # type: ignore[attr-defined]


def test_later_writes_win_over_start_builders_and_end_builders_win_over_them(tracer_provider: TracerProvider) -> None:
    span = tracer_provider.get_tracer("t").start_span("s")
    assert install(span, KEYS, Counting({"late.a": "ours", "late.b": "ours"}))
    span.set_attribute("late.a", "user")  # after start, as a processor or the user would
    span.set_attribute("late.end", "user")
    assert defer(span, Counting({"late.end": "ours"}), overwrite=True)
    span.end()
    assert dict(span.attributes or {}) == {"late.a": "user", "late.b": "ours", "late.end": "ours"}  # type: ignore[attr-defined]


def test_values_are_cleaned_and_limited_like_set_attributes(exporter: InMemorySpanExporter) -> None:
    tp = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=4))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    _span(tp, Counting({"late.a": "abcdefgh", "late.b": ["x", "yyyyyy"]}))
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {}) == {"eager.kind": "llm", "late.a": "abcd", "late.b": ("x", "yyyy")}


def test_copies_and_pickles_are_plain_and_complete(
    tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _span(tracer_provider, Counting({"late.a": 1}))
    (span,) = exporter.get_finished_spans()
    attributes = span._attributes  # type: ignore[attr-defined]
    assert type(attributes) is DeferredAttributes
    expected = {"eager.kind": "llm", "late.a": 1}
    for clone in (copy.copy(attributes), copy.deepcopy(attributes), pickle.loads(pickle.dumps(attributes))):
        assert type(clone) is BoundedAttributes
        assert dict(clone) == expected
    assert attributes == expected and repr(attributes) == repr(expected) and attributes.copy() == expected
    assert '"late.a": 1' in span.to_json()


def test_fallback_when_the_sdk_shape_is_unexpected(
    tracer_provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer = tracer_provider.get_tracer("t")
    non_recording = TracerProvider(sampler=ALWAYS_OFF).get_tracer("t").start_span("s")
    assert not install(non_recording, KEYS, Counting({}))  # no _attributes at all
    span = tracer.start_span("s")
    span._attributes = dict(span._attributes)  # type: ignore[attr-defined]  # not a BoundedAttributes
    assert not install(span, KEYS, Counting({}))
    assert not defer(span, Counting({}), overwrite=True)
    monkeypatch.setattr(deferred_attributes, "_SDK_SHAPE_OK", False)
    assert not install(tracer.start_span("s"), KEYS, Counting({}))


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


def _traced_chat(messages: list[dict[str, Any]]) -> None:
    api, _ = client([json_interaction(CHAT, _completion())], False)
    api.chat.completions.create(model="gpt-4o", messages=messages, temperature=0.5)  # type: ignore[arg-type]


@pytest.mark.usefixtures("instrumented")
def test_llm_spans_are_the_same_deferred_or_eager(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    _traced_chat([{"role": "user", "content": "hi"}])
    monkeypatch.setattr(deferred_attributes, "_SDK_SHAPE_OK", False)
    _traced_chat([{"role": "user", "content": "hi"}])
    deferred, eager = exporter.get_finished_spans()
    assert type(deferred._attributes) is DeferredAttributes  # type: ignore[attr-defined]
    assert type(eager._attributes) is BoundedAttributes  # type: ignore[attr-defined]
    assert dict(deferred.attributes or {}) == dict(eager.attributes or {})
    assert (deferred.attributes or {})["evaltrace.cost_usd"] > 0
    assert len(dict(eager.attributes or {})) >= 20


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
    embed(api.embeddings)  # raised TypeError (missing 'input') when the snapshot popped it from the dict
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


def test_builder_errors_are_logged_not_raised_in_production(
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> Mapping[str, Any]:
        raise RuntimeError("bug in a builder")

    span = tracer_provider.get_tracer("t").start_span("s", attributes={"eager.kind": "llm"})
    assert install(span, KEYS, broken)
    assert defer(span, Counting({"late.end": 1}), overwrite=True)
    span.end()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # the boundary re-raises under pytest; act as production
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        assert dict(span.attributes or {}) == {"eager.kind": "llm", "late.end": 1}  # type: ignore[attr-defined]
    assert "bug in a builder" in caplog.text


def test_builder_errors_and_undeclared_keys_surface_under_tests(tracer_provider: TracerProvider) -> None:
    def broken() -> Mapping[str, Any]:
        raise RuntimeError("bug in a builder")

    span = tracer_provider.get_tracer("t").start_span("s")
    assert install(span, KEYS, broken)
    with pytest.raises(RuntimeError, match="bug in a builder"):
        dict(span.attributes or {})  # type: ignore[attr-defined]
    assert dict(span.attributes or {}) == {}  # type: ignore[attr-defined]  # built once, even when it failed
    other = tracer_provider.get_tracer("t").start_span("s")
    assert install(other, KEYS, Counting({"not.declared": 1}))
    with pytest.raises(AssertionError, match="not.declared"):
        len(other.attributes or {})  # type: ignore[attr-defined]
