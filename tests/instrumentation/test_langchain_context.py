"""The contexts LangChain runs make current: restored in any order, harmless where they cannot be restored."""

from __future__ import annotations

import contextvars

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider

from evaltrace.instrumentation.langchain import _context
from evaltrace.instrumentation.langchain._context import Contexts, Run, RunSpan


def _run(provider: TracerProvider, contexts: Contexts, name: str) -> Run:
    from evaltrace._internal.fast_context import get_current

    span = provider.get_tracer("test").start_span(name)
    current = get_current()
    run = Run(span, span, current, current, "task")
    contexts.enter(run, current)
    return run


def _end(contexts: Contexts, run: Run) -> None:
    run.ended = True
    contexts.leave(run)
    assert run.span is not None
    run.span.end()


def test_a_context_left_behind_stands_for_the_span_before_the_run(provider: TracerProvider) -> None:
    """The run ends in a copy of its context (as async LangChain ends runs): the original keeps the RunSpan,
    which then stands for what was current before, so a later span there is not parented to the ended run."""
    contexts = Contexts()
    outer = provider.get_tracer("test").start_span("outer")
    with otel_trace.use_span(outer):
        run = _run(provider, contexts, "run")
        current = otel_trace.get_current_span()
        assert isinstance(current, RunSpan) and run.span is not None
        assert current.get_span_context() == run.span.get_span_context()
        contextvars.copy_context().run(_end, contexts, run)
        assert otel_trace.get_current_span() is current  # not restorable from the copy
        assert current.get_span_context() == outer.get_span_context() and current.is_recording()
        later = provider.get_tracer("test").start_span("later")
        assert later.parent is not None and later.parent.span_id == outer.get_span_context().span_id
        later.end()
        current.end()  # ending the current span through it never ends the run's or the outer span
        assert outer.is_recording()
    outer.end()


def test_runs_ended_in_start_order_restore_the_context_once_all_have_ended(provider: TracerProvider) -> None:
    contexts = Contexts()
    before = otel_trace.get_current_span()
    first, second = _run(provider, contexts, "first"), _run(provider, contexts, "second")
    _end(contexts, first)  # not on top: waits
    assert len(contexts) == 2
    _end(contexts, second)  # restores both
    assert otel_trace.get_current_span() is before and len(contexts) == 0


def test_contexts_left_behind_are_bounded(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_context, "_MAX_ATTACHED", 8)
    contexts = Contexts()

    def run_and_end_elsewhere() -> None:
        run = _run(provider, contexts, "run")
        contextvars.copy_context().run(_end, contexts, run)

    for _ in range(50):
        contextvars.copy_context().run(run_and_end_elsewhere)
    assert len(contexts) <= 8


def test_contexts_left_in_contexts_that_are_gone_are_released(provider: TracerProvider) -> None:
    """Runs started in contexts that are gone (tasks that ended), each ending elsewhere: no entry stays."""
    import gc

    contexts = Contexts()

    def run_and_end_elsewhere() -> None:
        run = _run(provider, contexts, "run")
        contextvars.copy_context().run(_end, contexts, run)

    for _ in range(50):
        contextvars.copy_context().run(run_and_end_elsewhere)
    gc.collect()  # a run and the context it made current refer to each other
    assert len(contexts._attached) == 0


def test_runs_left_behind_in_a_living_context_are_released_by_the_next_run(provider: TracerProvider) -> None:
    """The caller's context across ``ainvoke`` calls: each run ends elsewhere; the next run started there
    releases the one before, which then stands for the span before both (no chain of every run before)."""
    contexts = Contexts()

    def caller() -> None:  # in a context of its own: what it leaves current stays out of the other tests
        before = otel_trace.get_current_span()
        for _ in range(50):
            run = _run(provider, contexts, "run")
            contextvars.copy_context().run(_end, contexts, run)
        assert len(contexts._attached) == 1  # only the last one, left current here
        current = otel_trace.get_current_span()
        assert isinstance(current, RunSpan) and current.target() is before
        assert not isinstance(run.previous.get(_context.SPAN_KEY), RunSpan)  # the run before it is not kept

    contextvars.copy_context().run(caller)
