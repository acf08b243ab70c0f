"""End to end through the real decorators and configure(): the path users take."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace._internal import settings, tracing
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.schema import Trace

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def reset_configuration() -> Iterator[None]:
    saved = settings.current
    yield
    from evaltrace import config

    handle = config.current_handle()
    if handle is not None:
        handle.shutdown()
    tracing.set_tracer_provider(None)
    settings.replace(saved)


@evaluator(name="said_hello")
def said_hello(trace: Trace) -> bool:
    return "hello" in (trace.output.final_answer or "")


@evaltrace.tool
def lookup(name: str) -> str:
    return name.upper()


@evaltrace.agent(evaluators=[said_hello])
def greet(name: str) -> str:
    return f"hello {lookup(name)}"


def test_agent_evaluators_and_global_specs(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    handle = evaltrace.configure(
        service_name="decorated",
        exporters=[exporter],
        local_store=False,
        batch=False,
        evaluators=[EvaluatorSpec(evaluator(name="tool_ok")(lambda t: True), span_kinds={"tool"})],
        sinks=[JsonlScoreSink(tmp_path / "scores.jsonl")],
        evaluation_options={"dead_letter_dir": None, "sink_schedule_delay_s": 0.01},
    )
    assert greet("ada") == "hello ADA"
    assert handle.force_flush(10_000)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    agent = next(s for name, s in spans.items() if name.startswith("invoke_agent"))
    tool = next(s for name, s in spans.items() if name.startswith("execute_tool"))
    assert agent.attributes["evaltrace.eval.said_hello.passed"] is True
    assert "evaltrace.eval.tool_ok.passed" not in agent.attributes
    assert tool.attributes["evaltrace.eval.tool_ok.passed"] is True
    names = sorted(json.loads(line)["name"] for line in (tmp_path / "scores.jsonl").read_text().splitlines())
    assert names == ["said_hello", "tool_ok"]


def test_example_runs_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["live_evaluation.py", str(tmp_path)])
    runpy.run_path(str(REPO / "examples" / "live_evaluation.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert f"scores written to {tmp_path / 'scores.jsonl'}" in out
    assert len((tmp_path / "scores.jsonl").read_text().splitlines()) == 6
