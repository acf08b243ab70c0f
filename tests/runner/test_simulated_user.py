"""Multi-turn cases with a simulated user: a scripted judge model plays the user over real HTTP on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
import sys
import textwrap
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from evaltrace.runner import run_eval
from judge_server import JudgeServer, serve_judge

from .conftest import Project

CHAT_SOURCE = """
import evaltrace
from evaltrace.context import current_context_attributes

SESSIONS = []
HISTORIES = []


@evaltrace.agent(name="shop")
def chat(message: str, history: list, shop: str = "acme") -> str:
    SESSIONS.append(current_context_attributes().get("session.id"))
    HISTORIES.append([dict(m) for m in history])
    turn = len(history) // 2 + 1
    done = " Your refund is done." if turn == 4 else ""
    return f"[{shop}] answer {turn} to: {message}.{done}"


def forgetful(message: str) -> str:
    return f"no memory: {message}"
"""

PERSONA = "Dana, a customer whose blender arrived broken"
GOAL = "get a refund for order 1234"


class Script:
    """The scripted model: the simulator's follow-ups, the goal verdicts and the completeness verdict."""

    def __init__(self, goal_met_at: int | None = None) -> None:
        self.follow_ups = itertools.count(1)
        self.goal_checks = itertools.count(1)
        self.goal_met_at = goal_met_at

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith("You play the user"):
            return {"message": f"follow-up {next(self.follow_ups)}"}
        if user.startswith("The user wanted this"):
            check = next(self.goal_checks)
            return {"goal_met": check == self.goal_met_at, "reason": f"check {check}"}
        return {"requests": [{"request": "a refund", "turn": 1, "fulfilled": True, "reason": "refund done"}]}


def _kinds(judge: JudgeServer) -> list[str]:
    kinds = []
    for request in judge.requests:
        system = request["body"]["messages"][0]["content"]
        user = request["body"]["messages"][-1]["content"]
        if system.startswith("You play the user"):
            kinds.append("simulator")
        elif user.startswith("The user wanted this"):
            kinds.append("goal")
        else:
            kinds.append("judge")
    return kinds


@pytest.fixture
def chat_project(project: Project) -> Iterator[Project]:
    (project.root / f"{project.module}_chat.py").write_text(textwrap.dedent(CHAT_SOURCE))
    yield project
    sys.modules.pop(f"{project.module}_chat", None)


def _chat(project: Project) -> ModuleType:
    return sys.modules[f"{project.module}_chat"]


def _config(project: Project, judge: JudgeServer, evaluators: list[dict[str, Any]]) -> dict[str, Any]:
    system = {"name": "v1", "adapter": "python_function", "config": {"target": f"{project.module}_chat:chat"}}
    block = {"model": "sim-model", "base_url": judge.url, "api_key": "none"}
    return {"name": "simulated", "systems": [system], "judge": block, "evaluators": evaluators}


def _case(**simulated: Any) -> dict[str, Any]:
    user = {"persona": PERSONA, "goal": GOAL, "first_message": "My blender arrived broken.", **simulated}
    return {"id": "refund", "input": {"shop": "blendco"}, "simulated_user": user}


SESSION_EVALUATORS = [
    {"name": "turns", "type": "turn_count", "min_turns": 4, "max_turns": 4},
    {"name": "complete", "type": "conversation_completeness"},
]


def test_four_turn_conversation_is_one_session_judged_at_session_scope(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        path = chat_project.write(_config(chat_project, judge, SESSION_EVALUATORS), [_case(max_turns=4)])
        outcome = run_eval(path, runs_dir=chat_project.runs_dir)

    lines = (outcome.run.path / "traces.jsonl").read_text().splitlines()
    assert len(lines) == 1  # the case is one unit: one line holding its turns
    case_trace = json.loads(lines[0])
    turns = case_trace["extra"]["turns"]
    session = f"{outcome.run.run_id}:refund:v1"
    assert [t["extra"]["session_id"] for t in turns] == [session] * 4
    assert [t["extra"]["turn"] for t in turns] == [0, 1, 2, 3]
    assert len({t["extra"]["trace_id"] for t in turns}) == 4  # four traces, one session
    messages = ["My blender arrived broken.", "follow-up 1", "follow-up 2", "follow-up 3"]
    assert [t["input"]["message"] for t in turns] == messages
    assert [t["input"]["shop"] for t in turns] == ["blendco"] * 4  # the case input goes with every turn
    answers = [f"[blendco] answer {n} to: {m}." for n, m in enumerate(messages, 1)]
    answers[3] += " Your refund is done."
    assert [t["output"]["final_answer"] for t in turns] == answers
    assert case_trace["extra"]["simulated_user"]["stop_reason"] == "max_turns"
    assert case_trace["output"]["final_answer"] == answers[3]

    sut = _chat(chat_project)
    assert sut.SESSIONS == [session] * 4  # session.id stamped inside the system's own spans
    assert sut.HISTORIES[3] == [
        {"role": role, "content": text}
        for pair in zip(messages[:3], answers[:3], strict=True)
        for role, text in zip(("user", "assistant"), pair, strict=True)
    ]

    # The simulator was asked three times (turn 1 had first_message), each time with persona, goal and transcript.
    assert _kinds(judge) == ["simulator", "simulator", "simulator", "judge"]
    simulator_prompts = [r["body"]["messages"][-1]["content"] for r in judge.requests[:3]]
    for asked, prompt in enumerate(simulator_prompts, 1):
        assert PERSONA in prompt and GOAL in prompt
        assert f"[Turn {asked}]\nUser: {messages[asked - 1]}\nAssistant: {answers[asked - 1]}" in prompt
        assert f"[Turn {asked + 1}]" not in prompt

    by_name = {r.evaluator: r for r in outcome.results}
    assert set(by_name) == {"turns", "complete"}
    for result in by_name.values():
        assert result.case_id == "refund" and result.variant_name == "v1"
        assert result.metadata == {"session_id": session, "scope": "session"}
    assert (by_name["turns"].passed, by_name["turns"].detail["turns"]) == (True, 4)
    assert (by_name["complete"].passed, by_name["complete"].score) == (True, 1.0)
    saved = [json.loads(line) for line in (outcome.run.path / "results.jsonl").read_text().splitlines()]
    assert {r["metadata"]["session_id"] for r in saved} == {session}
    variant = outcome.summary.variants[0]
    assert (variant.cases_total, variant.cases_passed) == (1, 1)
