"""The LLM span is the current span while the client works (so HTTP and retry spans nest under it), and only then.

The wrappers make it current through ``fast_context``: OTel's own ContextVar when the default runtime context is
in use, the public API otherwise. Both must behave exactly like ``attach(set_span_in_context(...))``.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
from typing import Any

import httpx
import openai
import pytest
from openai_replay import Server, json_interaction
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.context import Context, _RuntimeContext
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context
from test_preset_start import _completion

from evaltrace._internal import fast_context

CHAT = "/v1/chat/completions"


class Watching(Server):
    """Serves the recording, and on each request notes the current span and starts a child span (as httpx
    instrumentation would)."""

    def __init__(self, tracer: trace.Tracer, *args: Any) -> None:
        super().__init__(*args)
        self.tracer = tracer
        self.current: list[trace.Span] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.current.append(trace.get_current_span())
        with self.tracer.start_as_current_span("HTTP POST"):
            return super().__call__(request)


@pytest.mark.usefixtures("instrumented")
def test_the_llm_span_is_current_during_the_call_only(
    provider: TracerProvider, exporter: InMemorySpanExporter, is_async: bool
) -> None:
    tracer = provider.get_tracer("app")
    watching = Watching(tracer, [json_interaction(CHAT, _completion())], is_async)
    transport = httpx.MockTransport(watching)
    api: Any
    if is_async:
        api = openai.AsyncOpenAI(api_key="test", http_client=httpx.AsyncClient(transport=transport), max_retries=0)
    else:
        api = openai.OpenAI(api_key="test", http_client=httpx.Client(transport=transport), max_retries=0)

    messages = [{"role": "user", "content": "hi"}]
    with tracer.start_as_current_span("outer") as outer:
        if is_async:

            async def run() -> None:
                await api.chat.completions.create(model="gpt-4o", messages=messages)
                assert trace.get_current_span() is outer  # restored in the coroutine's own context

            asyncio.run(run())  # runs in a copy of this context: the check must be inside
        else:
            api.chat.completions.create(model="gpt-4o", messages=messages)
            assert trace.get_current_span() is outer  # restored after the call

    spans = {span.name: span for span in exporter.get_finished_spans()}
    llm, http = spans["chat gpt-4o"], spans["HTTP POST"]
    assert [span.get_span_context().span_id for span in watching.current] == [llm.context.span_id]
    assert llm.parent is not None and llm.parent.span_id == outer.get_span_context().span_id
    assert http.parent is not None and http.parent.span_id == llm.context.span_id


def test_fast_context_is_the_public_api() -> None:
    span = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
    parent = otel_context.set_value("k", "v")
    assert Context({**parent, fast_context.SPAN_KEY: span}) == set_span_in_context(span, parent)
    token = fast_context.attach(parent)
    try:
        assert otel_context.get_current() is parent and fast_context.get_current() is parent
    finally:
        fast_context.detach(token)
    assert otel_context.get_current() is fast_context.get_current()
    assert otel_context.get_value("k") is None


class _DictRuntime(_RuntimeContext):
    """A runtime context that is not OTel's ContextVar one (as OTEL_PYTHON_CONTEXT may select)."""

    def __init__(self) -> None:
        self._var: contextvars.ContextVar[Context] = contextvars.ContextVar("other")
        self._empty = Context()

    def attach(self, context: Context) -> object:
        return self._var.set(context)

    def get_current(self) -> Context:
        return self._var.get(self._empty)

    def detach(self, token: object) -> None:
        self._var.reset(token)  # type: ignore[arg-type]


def test_another_runtime_context_gets_the_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", _DictRuntime())
    try:
        importlib.reload(fast_context)  # what an import under OTEL_PYTHON_CONTEXT=<another runtime> decides
        assert fast_context.get_current is otel_context.get_current
        assert fast_context.attach is otel_context.attach and fast_context.detach is otel_context.detach
        test_fast_context_is_the_public_api()
    finally:
        monkeypatch.undo()
        importlib.reload(fast_context)
    assert fast_context.get_current is not otel_context.get_current  # the ContextVar's own method again
