"""``evaltrace worker``'s own judge calls: traced to the worker's exporters, never evaluated, named by the result.

Over real sockets on 127.0.0.1: an OTLP/HTTP exporter sends a span to the worker, whose LLM judge asks the scripted
judge server through the real openai client.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, TraceFlags
from otlp_receivers import poll

from evaltrace._internal import semconv, tracing
from evaltrace.evaluation import EvaluatorSpec
from evaltrace.evaluators import LLMJudge
from evaltrace.evaluators.judge import Judge
from evaltrace.worker import EvaluationWorker
from judge_server import JudgeServer, serve_judge

TRACE_ID = 0x5B8AA5A2D2C872E8321CF37308D69DF2
ROOT_ID = 0x051581BF3CB55C13


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    with serve_judge(lambda body: {"score": 1.0, "reason": "it answers"}) as server:
        yield server


def _agent_span() -> ReadableSpan:
    return ReadableSpan(
        name="invoke_agent remote",
        context=SpanContext(TRACE_ID, ROOT_ID, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=Resource({"service.name": "remote-app"}),
        attributes={
            semconv.EVALTRACE_SPAN_KIND: semconv.KIND_AGENT,
            semconv.INPUT_VALUE: "Weather in Paris?",
            semconv.OUTPUT_VALUE: "It is sunny.",
        },
        start_time=1_700_000_000_000_000_000,
        end_time=1_700_000_001_000_000_000,
    )


def test_the_workers_judge_calls_are_traces_of_their_own_in_its_exporters(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVALTRACE_TRACE_JUDGES", raising=False)
    tracing.set_tracer_provider(None)  # as in the `evaltrace worker` process: nothing configured
    judge = Judge("judge-model", base_url=judge_server.url, api_key="test-key", max_retries=0)
    spec = EvaluatorSpec(LLMJudge("Answers the question", judge=judge), span_kinds={semconv.KIND_AGENT})
    catch_all = EvaluatorSpec(LLMJudge("Is polite", judge=judge, name="polite"))  # would judge any span it saw
    exported = InMemorySpanExporter()
    options = {"dead_letter_dir": None, "emit_log_events": False}
    with EvaluationWorker([spec, catch_all], [], [exported], port=0, batch=False, evaluation_options=options) as w:
        assert HttpExporter(endpoint=w.url + "/v1/traces").export([_agent_span()]) is SpanExportResult.SUCCESS
        poll(lambda: any(s.name == "invoke_agent remote" for s in exported.get_finished_spans()))
        poll(lambda: len([s for s in exported.get_finished_spans() if s.name.startswith("judge ")]) == 2)
    assert tracing.get_tracer_provider() is not w._judges  # put back once the worker stopped
    spans = exported.get_finished_spans()
    (agent,) = [s for s in spans if s.name == "invoke_agent remote"]
    events = {e.attributes["gen_ai.evaluation.name"]: e.attributes for e in agent.events if e.attributes}
    roots = {s.attributes[semconv.EVALTRACE_JUDGE_EVALUATOR]: s for s in spans if s.name.startswith("judge ")}
    assert set(roots) == {"llm_judge", "polite"}  # judged once each: the judge spans were never judged
    for name, root in roots.items():
        assert root.parent is None and root.context.trace_id != TRACE_ID
        assert events[name]["evaltrace.judge.trace_id"] == format(root.context.trace_id, "032x")
        assert root.resource.attributes["service.name"] == "evaltrace-worker"
        (chat,) = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
        assert chat.name == "chat judge-model" and "It is sunny." in chat.attributes["gen_ai.input.messages"]
    assert judge_server.count() == 2
    assert not any(k.startswith("evaltrace.eval.") for s in spans if s is not agent for k in s.attributes or {})
