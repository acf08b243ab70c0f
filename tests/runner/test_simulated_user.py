"""Multi-turn cases with a simulated user: a scripted judge model plays the user over real HTTP on 127.0.0.1."""

from __future__ import annotations

import html
import itertools
import json
import sys
import textwrap
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from evaltrace.report.run_report import write_run_report
from evaltrace.runner import RunConfigError, re_evaluate, resume_run, run_eval
from judge_server import JudgeServer, serve_judge

from .conftest import HttpSystem, Project

CHAT_SOURCE = """
import evaltrace
from evaltrace.context import current_context_attributes

SESSIONS = []
HISTORIES = []


@evaltrace.tool
def lookup_order(order: str) -> str:
    return f"order {order}: blender, broken"


@evaltrace.agent(name="shop")
def chat(message: str, history: list, shop: str = "acme") -> str:
    SESSIONS.append(current_context_attributes().get("session.id"))
    HISTORIES.append([dict(m) for m in history])
    turn = len(history) // 2 + 1
    if turn == 2:
        lookup_order("1234")
    done = " Your refund is done." if turn == 4 else ""
    return f"[{shop}] answer {turn} to: {message}.{done}"


def forgetful(message: str) -> str:
    return f"no memory: {message}"


def verbose(message: str, history: list) -> str:
    return "blah " * 4000 + f"(re: {message})"


def flaky(message: str, history: list, shop: str) -> str:
    if history:
        raise RuntimeError("backend down")
    return "first answer"
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
    {"name": "refunded", "type": "contains_text", "args": ["refund is done"]},  # trace scope: the last answer
    {"name": "looked_up", "type": "tool_called", "args": ["lookup_order"]},  # trace scope: every turn's calls
    {"name": "sequence", "type": "tool_sequence", "expected": ["lookup_order"], "scope": "session"},
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
    # Each turn stores the case input and its message; the history it was sent is the earlier turns.
    assert [t["input"] for t in turns] == [{"shop": "blendco", "message": m} for m in messages]
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
    assert set(by_name) == {"turns", "complete", "refunded", "looked_up", "sequence"}
    assert by_name["looked_up"].passed is True  # called in turn 2, judged on the case trace
    assert [c["name"] for c in case_trace["tool_calls"]] == ["lookup_order"]
    assert [c["name"] for c in turns[1]["tool_calls"]] == ["lookup_order"]
    for result in by_name.values():
        assert result.case_id == "refund" and result.variant_name == "v1"
    for name in ("turns", "complete", "sequence"):  # conversation-only ones, and one told `scope: session`
        metadata = by_name[name].metadata or {}
        # (a judge's result also names its judge call's trace: judge_trace_id / judge_span_id)
        assert {k: metadata.get(k) for k in ("session_id", "scope")} == {"session_id": session, "scope": "session"}
        assert set(metadata) - {"session_id", "scope"} <= {"judge_trace_id", "judge_span_id"}
    assert by_name["sequence"].passed is True
    assert by_name["refunded"].metadata is None and by_name["refunded"].passed is True
    assert by_name["looked_up"].metadata is None
    assert (by_name["turns"].passed, by_name["turns"].detail["turns"]) == (True, 4)
    assert (by_name["complete"].passed, by_name["complete"].score) == (True, 1.0)
    judged = by_name["complete"].detail["judge"]["prompt"]
    assert judged.startswith("conversation_completeness")
    completeness_prompt = judge.requests[3]["body"]["messages"][-1]["content"]
    assert all(f"User: {m}" in completeness_prompt for m in messages)
    saved = [json.loads(line) for line in (outcome.run.path / "results.jsonl").read_text().splitlines()]
    assert [r["metadata"]["session_id"] for r in saved if r["evaluator"] in {"turns", "complete", "sequence"}] == [
        session
    ] * 3
    variant = outcome.summary.variants[0]
    assert (variant.cases_total, variant.cases_passed) == (1, 1)

    # The run report shows the case as a chat: the four user messages and answers, in order.
    page = write_run_report(outcome.run, chat_project.root / "run.html").read_text()
    chat = page[page.index('<section class="conversation">') :]
    chat = chat[: chat.index("</section>")]
    assert "ended: max_turns reached" in chat and session in chat
    positions = [chat.index(html.escape(text)) for pair in zip(messages, answers, strict=True) for text in pair]
    assert positions == sorted(positions)
    assert chat.count('data-role="user"') == 4
    assert chat.count('data-role="assistant"') == 5  # the four answers and turn 2's tool call
    assert chat.index('data-turn="2"') < chat.index('data-tool="lookup_order"') < chat.index('data-turn="3"')


def _only_line(outcome: Any) -> dict[str, Any]:
    lines = (outcome.run.path / "traces.jsonl").read_text().splitlines()
    assert len(lines) == 1
    return dict(json.loads(lines[0]))


def test_a_stop_phrase_in_an_answer_ends_the_conversation_early(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        cases = [_case(max_turns=10, stop_when="ANSWER 2 to")]  # a bare string is a phrase, matched ignoring case
        outcome = run_eval(chat_project.write(_config(chat_project, judge, SESSION_EVALUATORS[:1]), cases))
    facts = _only_line(outcome)["extra"]["simulated_user"]
    assert (facts["turns"], facts["stop_reason"], facts["simulator_calls"]) == (2, "phrase", 1)
    assert _kinds(judge) == ["simulator"]  # asked for turn 2's message only; nothing after the phrase
    said, answered = "My blender arrived broken.", "[blendco] answer 1 to: My blender arrived broken.."
    history = [{"role": "user", "content": said}, {"role": "assistant", "content": answered}]
    assert _chat(chat_project).HISTORIES == [[], history]
    turns = outcome.results[0]
    assert (turns.passed, turns.detail["turns"]) == (False, 2)  # turn_count wanted 4


def test_the_goal_judge_ends_the_conversation_and_writes_the_first_message(chat_project: Project) -> None:
    with serve_judge(Script(goal_met_at=2)) as judge:
        user = {"persona": PERSONA, "goal": GOAL, "max_turns": 5, "stop_when": {"goal_met": True}}
        cases = [{"id": "refund", "simulated_user": user}]
        outcome = run_eval(chat_project.write(_config(chat_project, judge, []), cases))
    line = _only_line(outcome)
    facts = line["extra"]["simulated_user"]
    assert (facts["turns"], facts["stop_reason"], facts["goal_reason"]) == (2, "goal_met", "check 2")
    # No first_message: the simulator wrote it, told that the conversation has not started.
    assert _kinds(judge) == ["simulator", "goal", "simulator", "goal"]
    first = judge.requests[0]["body"]["messages"][-1]["content"]
    assert "has not started yet" in first and PERSONA in first
    assert [t["input"]["message"] for t in line["extra"]["turns"]] == ["follow-up 1", "follow-up 2"]
    goal_prompt = judge.requests[1]["body"]["messages"][-1]["content"]
    assert GOAL in goal_prompt and "User: follow-up 1" in goal_prompt
    assert judge.requests[0]["body"]["response_format"] == {"type": "json_object"}


def test_a_simulator_failure_is_an_error_of_the_case_never_a_pass(chat_project: Project) -> None:
    with serve_judge(lambda body: {"text": "I am not JSON of the asked shape"}) as judge:
        cases = [_case(max_turns=4)]
        outcome = run_eval(chat_project.write(_config(chat_project, judge, SESSION_EVALUATORS[:1]), cases))
    line = _only_line(outcome)
    assert line["extra"]["simulated_user"]["stop_reason"] == "simulator_error"
    assert line["error"]["message"].startswith("simulated user failed after turn 1: unparseable judge reply")
    assert len(judge.requests) == 2  # one retry, then given up
    variant = outcome.summary.variants[0]
    assert (variant.cases_passed, variant.cases_errored) == (0, 1)


def test_each_turn_asks_the_simulator_afresh(chat_project: Project) -> None:
    # Two variants get identical answers, so their simulator prompts are identical: no reply comes from a cache.
    with serve_judge(Script()) as judge:
        config = _config(chat_project, judge, [])
        config["systems"].append({**config["systems"][0], "name": "v2"})
        run_eval(chat_project.write(config, [_case(max_turns=2)]))
    prompts = [r["body"]["messages"][-1]["content"] for r in judge.requests]
    assert len(prompts) == 2 and prompts[0] == prompts[1]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            {"type": "contains_text", "args": ["x"], "scope": "session"},
            "judges one trace only; it cannot take scope session",
        ),
        (
            {"type": "turn_count", "max_turns": 3, "scope": "trace"},
            "judges a conversation only; it cannot take scope trace",
        ),
        ({"type": "turn_count", "max_turns": 3, "scope": "sessions"}, "evaluators[0].scope"),
    ],
)
def test_a_scope_the_evaluator_cannot_take_is_a_config_error(
    chat_project: Project, entry: dict[str, Any], problem: str
) -> None:
    with serve_judge(Script()) as judge, pytest.raises(RunConfigError, match="evaluators\\[0\\].scope") as raised:
        run_eval(chat_project.write(_config(chat_project, judge, [entry]), [_case()]))
    assert problem in str(raised.value)
    assert _chat_calls(chat_project) == 0


def _chat_calls(project: Project) -> int:
    module = sys.modules.get(f"{project.module}_chat")
    return 0 if module is None else len(module.SESSIONS)


def test_a_simulated_case_with_a_workspace_system_is_refused(chat_project: Project) -> None:
    (chat_project.root / "repo").mkdir()
    with serve_judge(Script()) as judge:
        config = _config(chat_project, judge, [])
        config["systems"][0]["workspace"] = {"kind": "tempdir_snapshot", "path": "repo"}
        with pytest.raises(RunConfigError, match=r"systems\[0\].workspace: a simulated_user case"):
            run_eval(chat_project.write(config, [_case()]))
    assert len(judge.requests) == 0


def test_resume_redoes_an_unfinished_conversation_whole_and_keeps_finished_ones(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        cases = [_case(max_turns=3), {**_case(max_turns=3), "id": "second"}]
        outcome = run_eval(chat_project.write(_config(chat_project, judge, SESSION_EVALUATORS[:1]), cases))
        traces = outcome.run.path / "traces.jsonl"
        # As if killed mid-way through the second conversation: only the first case's line was written.
        first_line = traces.read_text().splitlines()[0]
        traces.chmod(0o600)
        traces.write_text(first_line + "\n")
        for name in ("results.jsonl", "summary.yaml"):
            (outcome.run.path / name).unlink()
        calls_before = _chat_calls(chat_project)
        resumed = resume_run(outcome.run)
    assert _chat_calls(chat_project) - calls_before == 3  # the unfinished case, all three turns again
    assert sorted(t.case_id for t in resumed.traces) == ["refund", "second"]
    assert {len(t.extra["turns"]) for t in resumed.traces} == {3}
    assert {r.case_id: r.metadata["session_id"] for r in resumed.results} == {
        "refund": f"{outcome.run.run_id}:refund:v1",
        "second": f"{outcome.run.run_id}:second:v1",
    }


def test_an_http_system_gets_each_message_and_the_history(chat_project: Project, http_system: HttpSystem) -> None:
    with serve_judge(Script()) as judge:
        body = {"question": "{{input.message}}", "past": "{{input.history}}", "shop": "{{input.shop}}"}
        system = {"name": "api", "adapter": "http", "config": {"url": f"{http_system.url}/chat", "body_template": body}}
        config = {**_config(chat_project, judge, SESSION_EVALUATORS[:1]), "systems": [system]}
        outcome = run_eval(chat_project.write(config, [_case(max_turns=3)]))
    sent = [r["body"] for r in http_system.requests]
    messages = ["My blender arrived broken.", "follow-up 1", "follow-up 2"]
    assert [b["question"] for b in sent] == messages
    assert [len(b["past"]) for b in sent] == [0, 2, 4]
    assert sent[2]["past"][3] == {"role": "assistant", "content": "follow-up 1: alpha"}
    assert {b["shop"] for b in sent} == {"blendco"}
    turns = _only_line(outcome)["extra"]["turns"]
    assert [t["extra"]["session_id"] for t in turns] == [f"{outcome.run.run_id}:refund:api"] * 3
    assert [t["output"]["final_answer"] for t in turns] == [f"{m}: alpha" for m in messages]
    assert (outcome.results[0].passed, outcome.results[0].detail["turns"]) == (False, 3)


def _target(config: dict[str, Any], project: Project, function: str) -> dict[str, Any]:
    config["systems"][0]["config"]["target"] = f"{project.module}_chat:{function}"
    return config


def test_a_function_without_a_history_parameter_gets_the_message_only(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        config = _target(_config(chat_project, judge, []), chat_project, "forgetful")
        outcome = run_eval(
            chat_project.write(
                config,
                [{"id": "c", "simulated_user": {"persona": "p", "goal": "g", "first_message": "hi", "max_turns": 2}}],
            )
        )
    turns = _only_line(outcome)["extra"]["turns"]
    assert [t["input"] for t in turns] == [{"message": "hi"}, {"message": "follow-up 1"}]
    assert [t["output"]["final_answer"] for t in turns] == ["no memory: hi", "no memory: follow-up 1"]
    assert [t["error"] for t in turns] == [None, None]


def test_a_system_failure_ends_the_conversation_as_the_case_error(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        config = _target(_config(chat_project, judge, SESSION_EVALUATORS[:1]), chat_project, "flaky")
        outcome = run_eval(chat_project.write(config, [_case(max_turns=4)]))
    line = _only_line(outcome)
    assert line["extra"]["simulated_user"]["stop_reason"] == "system_error"
    assert len(line["extra"]["turns"]) == 2
    assert line["error"]["type"] == "exception" and "backend down" in line["error"]["message"]
    assert _kinds(judge) == ["simulator"]  # nothing asked after the failed turn
    assert (outcome.summary.variants[0].cases_errored, outcome.summary.variants[0].cases_passed) == (1, 0)


def test_re_evaluate_judges_the_stored_conversation_without_calling_anything(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:
        outcome = run_eval(
            chat_project.write(_config(chat_project, judge, SESSION_EVALUATORS[:1]), [_case(max_turns=3)])
        )
        asked, called = len(judge.requests), _chat_calls(chat_project)
        again = re_evaluate(outcome.run)
        assert (len(judge.requests), _chat_calls(chat_project)) == (asked, called)
    result = again.results[0]
    assert (result.passed, result.detail["turns"]) == (False, 3)
    assert result.metadata == {"session_id": f"{outcome.run.run_id}:refund:v1", "scope": "session"}


@pytest.mark.parametrize(
    ("simulated", "where", "problem"),
    [
        ({"max_turns": 0}, "simulated_user.max_turns", "expected a whole number from 1 to 50, got 0"),
        ({"max_turns": 51}, "simulated_user.max_turns", "expected a whole number from 1 to 50, got 51"),
        ({"max_turns": "4"}, "simulated_user.max_turns", "expected a whole number from 1 to 50, got '4'"),
        ({"persona": " "}, "simulated_user.persona", "expected a non-empty text"),
        ({"goal": None}, "simulated_user.goal", "expected a non-empty text"),
        ({"stop_when": {}}, "simulated_user.stop_when", "expected exactly one of {phrase: <text>} or {goal_met: true}"),
        ({"stop_when": {"phrase": "bye", "goal_met": True}}, "simulated_user.stop_when", "exactly one of"),
        ({"stop_when": {"goal_met": False}}, "simulated_user.stop_when", "exactly one of"),
        ({"stop_when": {"phrse": "bye"}}, "simulated_user.stop_when.phrse", "unknown key; did you mean phrase?"),
        ({"stop_when": ""}, "simulated_user.stop_when.phrase", "expected a non-empty phrase"),
        ({"mood": "angry"}, "simulated_user.mood", "unknown key"),
        ({"stop_when": "goal_met"}, "simulated_user.stop_when", "for the judge's verdict write {goal_met: true}"),
    ],
)
def test_a_malformed_simulated_user_is_named(
    chat_project: Project, simulated: dict[str, Any], where: str, problem: str
) -> None:
    user = {"persona": PERSONA, "goal": GOAL, **simulated}
    with serve_judge(Script()) as judge, pytest.raises(RunConfigError) as raised:
        run_eval(chat_project.write(_config(chat_project, judge, []), [{"id": "c", "simulated_user": user}]))
    message = str(raised.value)
    assert f"cases.yaml: cases[0].{where}: " in message and problem in message
    assert len(judge.requests) == 0


@pytest.mark.parametrize("key", ["message", "history", "question", "query", "input"])
def test_a_simulated_case_input_may_not_hold_what_the_turns_set(chat_project: Project, key: str) -> None:
    case = {**_case(), "input": {key: "x"}}
    with serve_judge(Script()) as judge, pytest.raises(RunConfigError, match=rf"cases\[0\]\.input\.{key}: a simulated"):
        run_eval(chat_project.write(_config(chat_project, judge, []), [case]))


def test_a_one_turn_case_at_session_scope_is_a_one_turn_conversation(project: Project) -> None:
    system = {"name": "v1", "adapter": "python_function", "config": {"target": project.target("answer")}}
    evaluators = [{"name": "turns", "type": "turn_count", "max_turns": 1}]
    cases = [{"id": "c1", "input": {"question": "q1"}}]
    outcome = run_eval(project.write({"name": "plain", "systems": [system], "evaluators": evaluators}, cases))
    result = outcome.results[0]
    assert (result.passed, result.detail["turns"]) == (True, 1)
    assert result.metadata == {"session_id": f"{outcome.run.run_id}:c1:v1", "scope": "session"}
    assert "turns" not in outcome.traces[0].extra  # no simulator, no judge needed


def test_each_turn_keeps_its_message_when_the_history_outgrows_the_attribute_cap(chat_project: Project) -> None:
    # 20,000-character answers: from turn 3 the history sent is past the 32 KiB cap of the span's input.value.
    with serve_judge(Script()) as judge:
        config = _target(_config(chat_project, judge, SESSION_EVALUATORS[1:2]), chat_project, "verbose")
        cases = [{"id": "c", "simulated_user": {"persona": "p", "goal": "g", "first_message": "hi", "max_turns": 3}}]
        outcome = run_eval(chat_project.write(config, cases))
    turns = _only_line(outcome)["extra"]["turns"]
    assert [t["input"] for t in turns] == [{"message": m} for m in ("hi", "follow-up 1", "follow-up 2")]
    judged = judge.requests[-1]["body"]["messages"][-1]["content"]
    assert "[Turn 3]\nUser: follow-up 2\nAssistant: blah" in judged
    assert outcome.results[0].passed is True


def test_a_simulator_that_cannot_write_the_first_message_leaves_an_errored_case_without_turns(
    chat_project: Project,
) -> None:
    with serve_judge(lambda body: {"message": ""}) as judge:
        user = {"persona": PERSONA, "goal": GOAL, "max_turns": 3}
        config = _config(chat_project, judge, SESSION_EVALUATORS[:1])
        outcome = run_eval(chat_project.write(config, [{"id": "c", "simulated_user": user}]))
    line = _only_line(outcome)
    assert line["extra"]["turns"] == [] and _chat_calls(chat_project) == 0
    assert line["error"]["message"].startswith("simulated user failed before the first turn: unparseable")
    assert outcome.results[0].status == "skipped"  # no turns to count: not evaluated, never a verdict
    assert outcome.summary.variants[0].cases_errored == 1
    page = write_run_report(outcome.run, chat_project.root / "run.html").read_text()
    assert "ended: the simulated user failed" in page


def test_the_goal_judge_is_not_asked_after_the_last_turn(chat_project: Project) -> None:
    with serve_judge(Script()) as judge:  # the goal is never met
        user = {**_case(max_turns=3)["simulated_user"], "stop_when": {"goal_met": True}}
        outcome = run_eval(
            chat_project.write(_config(chat_project, judge, []), [{"id": "refund", "simulated_user": user}])
        )
    facts = _only_line(outcome)["extra"]["simulated_user"]
    assert (facts["turns"], facts["stop_reason"], facts["simulator_calls"]) == (3, "max_turns", 4)
    # After turns 1 and 2: a goal verdict, then the next message; after turn 3 (max_turns) nothing could follow.
    assert _kinds(judge) == ["goal", "simulator", "goal", "simulator"]
