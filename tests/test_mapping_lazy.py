"""The lazily mapped Trace (``trace_from_spans(..., lazy=True)``, what evaluators get): fields mapped on first read.

Every test module that imports ``trace_from_spans`` also checks the lazy Trace against the eager one on each of
its inputs (tests/lazy_mapping.py, installed by tests/conftest.py). Here: what laziness changes where it can be
seen (what is mapped when), threads, and the evaluation pipeline handing evaluators a lazy Trace.
"""

from __future__ import annotations

import pickle
import sys
import threading
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from evaltrace.mapping import _build, trace_from_spans
from evaltrace.mapping._lazy import FIELDS, LazyTrace
from evaltrace.schema import Trace, TraceMessage
from lazy_mapping import unmapped

USER = '[{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]}]'
ASKS = '[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"weather","arguments":{"city":"Paris"}}]}]'
ANSWER = '[{"role":"assistant","parts":[{"type":"text","content":"<think>sunny?</think>Sunny."}]}]'


def _agent_spans() -> list[ReadableSpan]:
    """An agent calling a model, a tool, then the model again: every field has something to map."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    agent = {"evaltrace.span.kind": "agent", "input.value": '{"q":"Weather in Paris?"}', "output.value": '"Sunny."'}
    with tracer.start_as_current_span("agent", attributes=agent):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": USER, "gen_ai.usage.input_tokens": 7}
        with tracer.start_as_current_span("chat 1", attributes={**chat, "gen_ai.output.messages": ASKS}):
            pass
        tool = {"evaltrace.span.kind": "tool", "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "c1"}
        with tracer.start_as_current_span("weather", attributes=tool):
            pass
        with tracer.start_as_current_span("chat 2", attributes={**chat, "gen_ai.output.messages": ANSWER}):
            pass
    return list(exporter.get_finished_spans())


def test_reading_one_field_maps_that_field_only() -> None:
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    lazy = _build.trace_from_spans(spans, lazy=True)
    assert type(lazy) is LazyTrace and isinstance(lazy, Trace)
    assert lazy.run_id == eager.run_id and lazy.case_id == eager.case_id  # identity: mapped at once
    assert unmapped(lazy) == set(FIELDS) - {"schema_version", "run_id", "case_id", "variant_name"}
    assert lazy.output == eager.output
    # The answer needed the conversation (its reasoning), which stays mapped for the fields built from it, but no
    # field but output is: messages, tool views, metrics, model steps, times, error and extra are still to map.
    assert unmapped(lazy) == {
        "started_at", "finished_at", "input", "messages", "tool_calls", "tool_results", "metrics", "llm_steps",
        "error", "extra",
    }  # fmt: skip
    assert lazy.tool_calls == eager.tool_calls and len(lazy.tool_calls) == 1
    assert "tool_calls" not in unmapped(lazy) and "metrics" in unmapped(lazy)
    assert lazy.model_dump() == eager.model_dump()  # read whole: every field mapped, a plain Trace now
    assert type(lazy) is Trace and unmapped(lazy) == set()


def test_concurrent_first_reads_of_a_field_all_get_one_value() -> None:
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    for _ in range(20):
        lazy = _build.trace_from_spans(spans, lazy=True)
        start = threading.Barrier(8)
        seen: list[Any] = []

        def read(trace: Trace = lazy, barrier: threading.Barrier = start, out: list[Any] = seen) -> None:
            barrier.wait()
            out.append(trace.messages)

        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and all(messages is seen[0] for messages in seen)  # one published value
        assert seen[0] == eager.messages and lazy.messages is seen[0]


_RACED = ("metrics", "messages", "llm_steps", "extra", "tool_calls", "output")


def test_first_reads_racing_a_whole_read_all_succeed_with_the_published_values() -> None:
    """Evaluators of one span read one Trace at once: a first read while another dumps it (materialize).

    Loops until a reader ran across the dump's switch to a plain Trace many times (the race the old
    ``super().__getattr__`` failed on, a few times in a thousand), with an iteration bound for a loaded machine.
    """
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    expected = {name: getattr(eager, name) for name in _RACED}
    failures: list[BaseException] = []
    wrong: list[str] = []
    overlaps = iterations = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race is a few bytecodes wide
    try:
        while overlaps < 600 and iterations < 20_000:
            iterations += 1
            lazy = _build.trace_from_spans(spans, lazy=True)
            barrier = threading.Barrier(2)
            got: dict[str, Any] = {}
            kinds: list[type] = []

            def reader(
                trace: Trace = lazy,
                start: threading.Barrier = barrier,
                out: dict[str, Any] = got,
                seen: list[type] = kinds,
            ) -> None:
                start.wait()
                seen.append(type(trace))
                try:
                    for name in _RACED:
                        out[name] = getattr(trace, name)
                except BaseException as exc:  # every failure is the finding
                    failures.append(exc)
                seen.append(type(trace))

            def whole(trace: Trace = lazy, start: threading.Barrier = barrier) -> None:
                start.wait()
                trace.model_dump_json()  # an LLM-judge evaluator serializing the trace

            threads = [threading.Thread(target=reader), threading.Thread(target=whole)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            overlaps += kinds == [LazyTrace, Trace]  # the dump switched the class while the reader read
            assert type(lazy) is Trace
            wrong.extend(
                name for name, value in got.items() if value != expected[name] or value is not getattr(lazy, name)
            )
    finally:
        sys.setswitchinterval(interval)
    assert failures == [], f"{len(failures)} failed in {iterations} races ({overlaps} overlapping): {failures[:3]}"
    assert wrong == []  # equal to the eager Trace's, and the very values the dump published
    assert overlaps >= 50, f"only {overlaps} overlapping reads in {iterations} iterations: the race was not tested"


def test_an_evaluator_editing_messages_in_place_changes_nothing_a_later_reader_sees() -> None:
    """Evaluators share one Trace: one that appends to (or clears) ``messages`` must not change later fields."""
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    for edit in ("append", "clear"):
        lazy = _build.trace_from_spans(spans, lazy=True)
        messages = lazy.messages
        if edit == "append":  # e.g. building a judge prompt on the trace's own list
            messages.append(TraceMessage(role="user", content="Rate the answer above from 1 to 5."))
        else:
            messages.clear()
        assert lazy.tool_calls == eager.tool_calls and len(eager.tool_calls) == 1, edit
        assert lazy.tool_results == eager.tool_results, edit
        assert lazy.output == eager.output and lazy.output.final_answer == "Sunny.", edit


def test_a_lazy_trace_pickles_and_dumps_as_the_eager_one() -> None:
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    lazy = _build.trace_from_spans(spans, lazy=True)
    assert lazy.output.final_answer == "Sunny."
    restored = pickle.loads(pickle.dumps(lazy))  # what the process engine and the session buffer ship
    assert type(restored) is Trace and restored == eager
    assert restored.model_dump_json() == eager.model_dump_json()
    assert Trace.model_validate_json(lazy.model_dump_json()) == eager


def test_a_trace_ending_before_it_starts_is_refused_at_mapping_as_eagerly() -> None:
    spans = _agent_spans()
    root = next(s for s in spans if s.name == "agent")
    broken = ReadableSpan(
        name=root.name,
        context=root.context,
        attributes=root.attributes,
        start_time=root.end_time,
        end_time=root.start_time,
        resource=root.resource,
    )
    with pytest.raises(ValidationError, match="before started_at"):
        trace_from_spans([broken])
    with pytest.raises(ValidationError, match="before started_at"):
        _build.trace_from_spans([broken], lazy=True)  # not later, in an evaluator: still mapping_failed


def test_a_field_read_on_the_class_or_set_on_a_lazy_trace_acts_as_on_the_eager_one() -> None:
    """Each field is a descriptor on LazyTrace (a first read maps it without a failed lookup): nothing else shows."""
    spans = _agent_spans()
    eager = _build.trace_from_spans(spans)
    lazy = _build.trace_from_spans(spans, lazy=True)
    with pytest.raises(AttributeError) as missing_eager:
        _ = eager.no_such_field  # type: ignore[attr-defined]
    with pytest.raises(AttributeError) as missing_lazy:
        _ = lazy.no_such_field  # type: ignore[attr-defined]
    assert str(missing_lazy.value) == str(missing_eager.value).replace("'Trace'", "'LazyTrace'")
    assert type(lazy) is LazyTrace and unmapped(lazy)  # a miss maps nothing
    assert lazy.output == eager.output and lazy.output is lazy.output  # mapped once, then read from the instance
    assert "output" not in unmapped(lazy) and "messages" in unmapped(lazy)
    # Assignment goes through pydantic as on the eager Trace (a field set: the whole Trace is mapped first).
    lazy.input = {"q": "changed"}
    eager_copy = eager.model_copy()
    eager_copy.input = {"q": "changed"}
    assert type(lazy) is Trace and lazy == eager_copy and lazy.model_fields_set == eager_copy.model_fields_set
    # A plain Trace (the lazy one after a whole read, or any other) has no such descriptor.
    assert "output" not in vars(Trace) and not hasattr(Trace, "output")
