"""Judge calls made in the evaluation process (``evaluation="process"``) are traced as in the application's.

Real components: ``configure()`` with the process engine (a spawned child), the local store (its writer process),
an LLMJudge in the child talking to the scripted judge server on 127.0.0.1 through the real openai client, and a
JSONL score sink. The judge's trace is made in the child and exported by the application.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink
from evaltrace.exporters.store_reader import LocalTraceStore
from judge_server import serve_judge

from .process_evaluators import JUDGE_URL_ENV, judged_in_child

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="spawns the evaluation process"),
    pytest.mark.usefixtures("judge_tracing_defaults"),
]


@evaltrace.agent(name="support")
def support(question: str) -> str:
    return "Write to help@example.com for a refund."


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple[Path, list[dict], dict]:
    store, scores = tmp_path / "store", tmp_path / "scores.jsonl"
    with serve_judge(lambda body: {"score": 0.9, "reason": "answers with a contact"}) as server:
        monkeypatch.setenv(JUDGE_URL_ENV, server.url)  # the child is spawned with the parent's environment
        handle = evaltrace.configure(
            "judged-app",
            local_store=str(store),
            evaluators=[EvaluatorSpec(judged_in_child, span_kinds={"agent"})],
            sinks=[JsonlScoreSink(scores)],
            evaluation="process",
            evaluation_options={"dead_letter_dir": None, "sink_schedule_delay_s": 0.01},
            **options,
        )
        assert support("How do I get a refund?").startswith("Write")
        assert handle.force_flush(60_000)
        stats = handle.evaluation_processor.stats()
        handle.shutdown()
    written = [json.loads(line) for line in scores.read_text().splitlines()] if scores.exists() else []
    return store, written, stats


def test_a_judge_call_in_the_evaluation_process_is_exported_as_its_own_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, scores, stats = _run(tmp_path, monkeypatch)
    (score,) = [s for s in scores if s["name"] == "llm_judge"]
    assert score["value"] == 0.9
    judge_trace_id = score["metadata"]["judge_trace_id"]
    assert judge_trace_id != score["trace_id"]

    spans = LocalTraceStore(store).spans(judge_trace_id)
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"judge llm_judge", "chat judge-model"}
    root, chat = by_name["judge llm_judge"], by_name["chat judge-model"]
    assert root.parent is None
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert format(root.context.span_id, "016x") == score["metadata"]["judge_span_id"]
    (link,) = root.links  # back to the evaluated span, across the process boundary
    assert format(link.context.trace_id, "032x") == score["trace_id"]
    assert format(link.context.span_id, "016x") == score["observation_id"]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 50 and attributes["evaltrace.judge"] is True
    assert "How do I get a refund?" in attributes["gen_ai.input.messages"]  # the application's capture setting
    assert "answers with a contact" in attributes["gen_ai.output.messages"]
    assert chat.resource.attributes["service.name"] == "judged-app"  # the application's resource, not the child's
    # Exported once, never evaluated: no evaluation attribute on a judge span, and counted.
    assert not any(key.startswith("evaltrace.eval.") for span in spans for key in span.attributes or {})
    process = stats["process"]
    assert process["judge_spans"] == 2 and process["judge_spans_dropped"] == 0


def test_judge_calls_in_the_evaluation_process_follow_the_applications_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, scores, stats = _run(tmp_path, monkeypatch, trace_judges=False)
    (score,) = [s for s in scores if s["name"] == "llm_judge"]
    assert "judge_trace_id" not in score["metadata"]  # trace_judges=False reached the child
    assert stats["process"]["judge_spans"] == 0
    reader = LocalTraceStore(store)
    traces = reader.list_traces()
    assert [t.trace_id for t in traces] == [score["trace_id"]]  # the application's trace, and no judge trace
    names = {span.name for span in reader.spans(score["trace_id"])}
    assert not any(name.startswith("judge") or name == "chat judge-model" for name in names)
