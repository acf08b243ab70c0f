"""A decorator-only agent (``@evaltrace.agent`` and tools, no LLM span) still gives a conversation: a user turn and
a final assistant message, around its tool calls; a trace whose spans recorded the conversation is left alone."""

from __future__ import annotations

import json
import textwrap

from evaltrace.runner import run_eval

from .conftest import Project

LLM_SHAPED = """
import evaltrace


@evaltrace.agent(name="chatty")
def chat(question: str) -> str:
    with evaltrace.llm_call(model="m", provider="openai") as call:
        call.record(messages=[{"role": "user", "content": question}], output="final words")
    return "final words"
"""


def test_a_decorator_only_agents_trace_has_a_user_turn_and_a_final_assistant_message(project: Project) -> None:
    path = project.write({
        "name": "deco",
        "variants": [{"name": "v", "adapter": "python_function", "config": {"target": project.target("answer")}}],
        "evaluators": [{"name": "tool_called"}],
    })  # fmt: skip
    outcome = run_eval(path, runs_dir=project.runs_dir)
    by_case = {t.case_id: t for t in outcome.traces}
    trace = by_case["c1"]  # answer("q1", key="a"): one tool call, no LLM span
    roles = [(m.role, m.content if m.tool_call is None else m.tool_call.name) for m in trace.messages]
    assert roles == [("user", "q1"), ("assistant", "lookup"), ("tool", "alpha"), ("assistant", "q1: alpha")]
    assert [c.name for c in trace.tool_calls] == ["lookup"]  # the tool views are unchanged
    lines = [json.loads(line) for line in (outcome.run.path / "traces.jsonl").read_text().splitlines()]
    stored = next(line for line in lines if line["case_id"] == "c1")  # persisted so, not only in memory
    assert [(m["role"], m["content"]) for m in stored["messages"]][::3] == [("user", "q1"), ("assistant", "q1: alpha")]
    failed = by_case["c3"]  # the system raised: the user's turn is there, no answer is made up
    assert [m.role for m in failed.messages] == ["user"] and failed.output.final_answer is None


def test_a_trace_that_recorded_its_conversation_is_not_given_a_second_one(project: Project) -> None:
    module = f"chatty_{project.module}"
    (project.root / f"{module}.py").write_text(textwrap.dedent(LLM_SHAPED))
    path = project.write(
        {
            "name": "llm",
            "variants": [{"name": "v", "adapter": "python_function", "config": {"target": f"{module}:chat"}}],
            "evaluators": [],
        },
        cases=[{"id": "one", "input": {"question": "hello?"}}],
    )
    (trace,) = run_eval(path, runs_dir=project.runs_dir).traces
    assert [(m.role, m.content) for m in trace.messages] == [("user", "hello?"), ("assistant", "final words")]
