"""A live trace (what online evaluators see) reads as its offline twin does: a decorator-only agent gets a user turn
and a final assistant message, and the mapping's notes are structured ``{enricher, error}`` entries.

Through the public API: ``configure()`` with an in-memory exporter and an evaluator that keeps the Trace it is
given, and ``run_eval`` on the same agent for the offline side.
"""

from __future__ import annotations

import importlib
import itertools
import re
import textwrap
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, evaluator
from evaltrace.runner import run_eval
from evaltrace.schema import Trace

# configure() undone after each test (the shared fixture also keeps judge tracing at its default).
pytestmark = pytest.mark.usefixtures("judge_tracing_defaults")

_counter = itertools.count()

AGENT_SOURCE = """
import evaltrace


@evaltrace.tool
def lookup(key: str) -> str:
    return {"a": "alpha"}.get(key, "unknown")


@evaltrace.agent(name="deco")
def answer(question: str) -> str:
    if question == "boom":
        raise RuntimeError("system exploded")
    return f"{question}: {lookup('a')}"


@evaltrace.agent(name="deco")
def structured(question: str) -> dict:
    return {"weather": lookup("a")}


@evaltrace.tool
def fetch(question: str) -> str:
    return question * 4


@evaltrace.agent(name="deco")
def verbose(question: str) -> str:
    return f"read {len(fetch(question))} characters"
"""


class Seen:
    """An evaluator that keeps every Trace it judges (it runs on the evaluation worker's thread)."""

    def __init__(self, span_kinds: set[str]) -> None:
        self.traces: list[Trace] = []
        self._lock = threading.Lock()

        @evaluator(name="keeps_trace")
        def keep(trace: Trace) -> bool:
            with self._lock:
                self.traces.append(trace)
            return True

        self.spec = EvaluatorSpec(keep, span_kinds=span_kinds)


def _agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    name = f"live_conv_sut_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(AGENT_SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(name)


def _live(seen: Seen, **options: Any) -> Any:
    return evaltrace.configure(
        service_name="live-conv",
        exporters=[InMemorySpanExporter()],
        local_store=False,
        batch=False,
        evaluators=[seen.spec],
        evaluation_options={"dead_letter_dir": None},
        **options,
    )


def _offline(tmp_path: Path, module: ModuleType, function: str, questions: list[str], **options: Any) -> list[Trace]:
    eval_path = tmp_path / f"eval_{function}.yaml"
    eval_path.write_text(
        yaml.safe_dump(
            {
                "name": f"offline-{function}",
                "cases": f"cases_{function}.yaml",
                "variants": [
                    {"name": "v", "adapter": "python_function", "config": {"target": f"{module.__name__}:{function}"}}
                ],
                "evaluators": [],
            }
        )  # fmt: skip
    )
    cases = [{"id": f"c{i}", "input": {"question": q}} for i, q in enumerate(questions)]
    (tmp_path / f"cases_{function}.yaml").write_text(yaml.safe_dump(cases))
    traces = run_eval(eval_path, runs_dir=tmp_path / "runs", **options).traces
    return sorted(traces, key=lambda t: t.case_id)


def _turns(trace: Trace) -> list[tuple[str, Any]]:
    return [(m.role, m.content if m.tool_call is None else ("call", m.tool_call.name)) for m in trace.messages]


def test_a_decorator_only_agents_live_trace_has_the_conversation_its_offline_trace_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _agent_module(tmp_path, monkeypatch)
    offline = _offline(tmp_path, module, "answer", ["q1", "boom"])
    seen = Seen({"agent"})
    handle = _live(seen)
    assert module.answer("q1") == "q1: alpha"
    with pytest.raises(RuntimeError, match="system exploded"):
        module.answer("boom")
    assert handle.force_flush(10_000)

    live = sorted(seen.traces, key=lambda t: t.input["question"], reverse=True)  # "q1", then "boom"
    assert [t.input["question"] for t in live] == ["q1", "boom"]
    expected = [("user", "q1"), ("assistant", ("call", "lookup")), ("tool", "alpha"), ("assistant", "q1: alpha")]
    assert _turns(live[0]) == expected
    assert [c.name for c in live[0].tool_calls] == ["lookup"]  # the tool views are those of the spans
    assert _turns(live[0]) == _turns(offline[0])  # the same conversation either way
    # The agent raised: the user's turn is there, and no answer is made up.
    assert _turns(live[1]) == [("user", "boom")] == _turns(offline[1])
    assert live[1].output.final_answer is None


def test_an_agent_without_a_text_answer_gets_only_the_user_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _agent_module(tmp_path, monkeypatch)
    (offline,) = _offline(tmp_path, module, "structured", ["weather?"])
    seen = Seen({"agent"})
    handle = _live(seen)
    assert module.structured("weather?") == {"weather": "alpha"}
    assert handle.force_flush(10_000)

    (live,) = seen.traces
    assert live.output.final_answer is None and live.output.structured == {"weather": "alpha"}
    assert _turns(live) == [("user", "weather?"), ("assistant", ("call", "lookup")), ("tool", "alpha")]
    assert _turns(live) == _turns(offline)


def test_a_tool_spans_own_trace_is_one_step_not_a_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _agent_module(tmp_path, monkeypatch)
    seen = Seen({"tool"})
    handle = _live(seen)
    module.answer("q1")
    assert handle.force_flush(10_000)

    (tool_trace,) = seen.traces
    # Its arguments are no user's turn and its result answers no one: no turns are added around the call.
    assert _turns(tool_trace) == [("assistant", ("call", "lookup")), ("tool", "alpha")]


def test_live_mapping_notes_are_structured_like_an_offline_enrichers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _agent_module(tmp_path, monkeypatch)
    question = "why " * 30  # its tool's result, four times as long, is over the 300-character cap

    def broken(trace: Trace) -> Trace:
        raise LookupError("upstream has no such trace")

    seen = Seen({"agent"})
    handle = _live(seen, max_attribute_length=300)
    assert module.verbose(question) == "read 480 characters"
    assert handle.force_flush(10_000)
    (live,) = seen.traces
    (note,) = live.extra["enrichment_errors"]
    assert set(note) == {"enricher", "error"}
    assert note["enricher"] == "evaltrace.mapping"
    assert note["error"].startswith("gen_ai.tool.call.result of span 'execute_tool fetch'")
    assert "truncated at capture" in note["error"]

    # Offline, with the same cap and an enricher that fails: one list, every entry of the same shape.
    (offline,) = _offline(tmp_path, module, "verbose", [question], enrichers=[broken])
    errors = offline.extra["enrichment_errors"]
    assert [e["enricher"] for e in errors] == ["evaltrace.mapping", "broken"]
    assert all(set(e) == {"enricher", "error"} for e in errors)
    assert _without_span_id(errors[0]["error"]) == _without_span_id(note["error"])  # the same note, same span
    assert errors[1]["error"] == "LookupError: upstream has no such trace"


def _without_span_id(note: str) -> str:
    return re.sub(r" \([0-9a-f]{16}\)", "", note)
