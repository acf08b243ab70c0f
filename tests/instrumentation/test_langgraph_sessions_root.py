"""A LangGraph thread run under the user's own span: the session is found on the run's spans, not on the root.

The user's span (a web request's, an ``@evaltrace.trace`` function's) is the trace's root and carries no
``session.id``; the handler stamps the thread on the graph's spans under it. ``end_session(thread)`` and session
sampling must still see the thread. Replayed through the real LangGraph ReAct agent and ``ChatOpenAI``
(OpenInference's ``test_agent_with_raw_dict_messages`` recording, served once per turn) on 127.0.0.1, into a real
``EvaluationSpanProcessor`` with a session-scope evaluator.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_replay import AGENT, chat_openai, langchain_instrumented
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from cassettes import ReplayServer, load_cassette
from evaltrace._internal import tracing
from evaltrace.evaluation import EvaluationSpanProcessor, EvaluatorSpec, evaluator
from evaltrace.evaluation.trace_sampling import session_fraction, trace_fraction
from evaltrace.schema import EvaluationResult
from evaltrace.schema.conversation import Conversation

pytestmark = [
    pytest.mark.usefixtures("capture"),
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]

QUESTIONS = ["What's the weather in London?", "And now?"]
RATE = 0.5


class _TraceIds(RandomIdGenerator):
    """Random trace ids, each drawn until trace sampling at ``RATE`` puts it in (``inside``) or out."""

    def __init__(self, inside: bool) -> None:
        self._inside = inside

    def generate_trace_id(self) -> int:
        while True:
            trace_id = random.getrandbits(128)
            if (trace_fraction(trace_id) < RATE) == self._inside:
                return trace_id


class _Pipeline:
    def __init__(
        self, dead_letter: Path, *, trace_quiet_s: float, session_quiet_s: float, sample_rate: float, inside: bool
    ) -> None:
        self.seen: list[Conversation] = []

        @evaluator(name="coherent")
        def coherent(conversation: Conversation) -> EvaluationResult:
            self.seen.append(conversation)
            return EvaluationResult(evaluator="coherent", passed=True, score=1.0)

        self.exporter = InMemorySpanExporter()
        self.processor = EvaluationSpanProcessor(
            downstream=[SimpleSpanProcessor(self.exporter)],
            evaluators=[EvaluatorSpec(coherent, scope="session", sample_rate=sample_rate)],
            trace_quiet_period_s=trace_quiet_s,
            session_quiet_period_s=session_quiet_s,
            dead_letter_dir=dead_letter,
        )
        self.provider = TracerProvider(id_generator=_TraceIds(inside))
        self.provider.add_span_processor(self.processor)


MakePipeline = Callable[..., _Pipeline]


@pytest.fixture
def make_pipeline(tmp_path: Path) -> Iterator[MakePipeline]:
    made: list[tuple[_Pipeline, Any]] = []

    def make(
        *, trace_quiet_s: float = 0.0, session_quiet_s: float = 0.3, sample_rate: float = 1.0, inside: bool = True
    ) -> _Pipeline:
        p = _Pipeline(
            tmp_path / "dead-letter",
            trace_quiet_s=trace_quiet_s,
            session_quiet_s=session_quiet_s,
            sample_rate=sample_rate,
            inside=inside,
        )
        made.append((p, tracing.set_tracer_provider(p.provider)))
        return p

    yield make
    for p, previous in reversed(made):
        tracing.set_tracer_provider(previous)
        p.provider.shutdown()


def _wait(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.01)
    return bool(predicate())


def _agent(server: ReplayServer) -> Any:
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    @tool
    def get_weather(location: str) -> str:
        """Get the weather for a location."""
        return f"The weather in {location} is sunny."

    model = chat_openai(server, model="gpt-4o-mini", temperature=0.0, streaming=True)
    return create_react_agent(model, [get_weather], prompt="You are a helpful assistant.", checkpointer=InMemorySaver())


def _turns_under_requests(p: _Pipeline, thread: str, *, end_in_last: bool = False) -> None:
    """Each turn inside a request span of the user's own (the trace's root); optionally end_session() in the last."""
    tracer = p.provider.get_tracer("app")
    with ReplayServer(load_cassette(AGENT) * 2) as server, langchain_instrumented():
        agent = _agent(server)
        for index, question in enumerate(QUESTIONS):
            with tracer.start_as_current_span("request"):
                agent.invoke(
                    {"messages": [{"role": "user", "content": question}]},
                    config={"configurable": {"thread_id": thread}},
                )
                if end_in_last and index == len(QUESTIONS) - 1:
                    p.processor.end_session(thread)  # what evaltrace.end_session(thread) tells configure()'s pipeline
                    time.sleep(0.5)  # the request goes on: the timer sees the end asked while this turn runs


def _roots(p: _Pipeline) -> list[Any]:
    return [s for s in p.exporter.get_finished_spans() if s.parent is None]


def test_end_session_finds_a_thread_run_under_the_users_span(make_pipeline: MakePipeline) -> None:
    """The quiet periods are far beyond the test: only end_session(thread) can make the finished turns (waiting for
    their trace's quiet period) and the session due, and it must know the turns are the thread's although their
    roots (the user's spans) carry no session."""
    p = make_pipeline(trace_quiet_s=600.0, session_quiet_s=600.0)
    _turns_under_requests(p, "thread-root")
    assert [(s.name, (s.attributes or {}).get("session.id")) for s in _roots(p)] == [("request", None)] * 2
    p.processor.end_session("thread-root")
    assert _wait(lambda: len(p.seen) == 1, timeout=10.0)
    assert p.seen[0].session_id == "thread-root"
    assert len(p.seen[0].turns) == 2


def test_end_session_inside_the_last_turn_under_the_users_span_waits_for_that_turn(
    make_pipeline: MakePipeline,
) -> None:
    """Called in the user's request span after the graph returned: that turn is still running (its root has not
    ended), and it is the thread's (its graph spans carry it), so the session is judged once, with both turns."""
    p = make_pipeline(session_quiet_s=600.0)
    _turns_under_requests(p, "thread-last", end_in_last=True)
    assert _wait(lambda: len(p.seen) >= 1, timeout=10.0)
    time.sleep(0.5)  # a second judgement (the session re-judged with the turn it missed) would come by now
    assert [len(c.turns) for c in p.seen] == [2]


@pytest.mark.parametrize("inside", [True, False], ids=["session-in-traces-out", "session-out-traces-in"])
def test_session_sampling_draws_by_a_thread_run_under_the_users_span(make_pipeline: MakePipeline, inside: bool) -> None:
    """A sampled session-scope evaluator takes or leaves the whole thread by its id: the trace ids are chosen to
    draw the other way, so sampling each turn by its trace (the root carrying no session) gives the wrong answer."""
    thread = next(f"thread-{n}" for n in range(1000) if (session_fraction(f"thread-{n}") < RATE) == inside)
    p = make_pipeline(sample_rate=RATE, inside=not inside)
    _turns_under_requests(p, thread)
    p.processor.force_flush()
    if inside:
        assert _wait(lambda: len(p.seen) == 1, timeout=10.0)
        assert [len(c.turns) for c in p.seen] == [2]
    else:
        time.sleep(0.6)  # past the session's quiet period
        assert p.seen == []
        assert p.processor.stats()["sampled_out"] == 2
