"""Multi-turn cases: a judge-block model plays the user, the system answers, turn by turn, as one session.

A case with ``simulated_user`` is run as a conversation. Turn 1 sends ``first_message`` (or one the simulator
writes); after each answer the runner checks ``stop_when`` (a phrase in the answer, or the judge's verdict that the
goal was met), else asks the simulator for the next message, until ``stop_when`` holds or ``max_turns`` is reached.
The goal judge is not asked after the last turn ``max_turns`` allows: no turn could follow, whatever it said.

Each turn is its own trace (its own root span and trace id); every span of every turn carries the same
``session.id`` (``<run_id>:<case_id>:<variant>``). The case is one unit: its line in traces.jsonl is the *case
trace* (:mod:`evaltrace.runner.case_turns`), which holds the turn traces, so a killed run redoes an unfinished
conversation whole.

A simulator or goal-judge failure ends the conversation with an error of the case (never a pass).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaltrace.evaluators._prompts import load_prompt
from evaltrace.evaluators._transcript import render_turns
from evaltrace.evaluators.judge import Judge, JudgeCall, JudgeError, extract_json
from evaltrace.runner.adapters import Adapter, FunctionAdapter
from evaltrace.runner.capture import CaseCapture
from evaltrace.runner.case_turns import HISTORY_KEY, MESSAGE_KEY, SESSION_KEY, TURN_KEY, case_trace, session_id_of
from evaltrace.runner.config import EvalConfig
from evaltrace.runner.errors import RunConfigError
from evaltrace.runner.evaluator_entries import build_judge
from evaltrace.schema import EvalCase, SimulatedUser, Trace, TraceError, Turn

__all__ = ["UserSimulator", "build_simulator", "run_conversation"]

_NOT_STARTED = "(the conversation has not started yet: write the user's first message)"


@dataclass
class _Spent:
    """What the simulator's model calls cost over one conversation."""

    calls: int = 0
    cost_usd: float | None = None

    def add(self, call: JudgeCall) -> None:
        self.calls += 1
        if call.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + call.cost_usd


class UserSimulator:
    """Asks the judge-block model for the user's next message and for the goal verdict (never from a cache).

    Args:
        judge: The judge built from the run's ``judge:`` block, with its cache off (each turn asks afresh).
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge

    async def next_message(self, user: SimulatedUser, turns: Sequence[Trace], spent: _Spent) -> str:
        """The user's next message given the persona, goal and transcript.

        Raises:
            JudgeError: The model could not be reached or replied without a usable message (after one retry).
        """

        def parse(text: str) -> str:
            value = extract_json(text)
            message = value.get("message") if isinstance(value, dict) else None
            if not isinstance(message, str) or not message.strip():
                raise ValueError('expected {"message": "<non-empty text>"}')
            return message.strip()

        variables = {"persona": user.persona, "goal": user.goal, "transcript": _transcript(turns) or _NOT_STARTED}
        reply = await self.judge.ask(load_prompt("simulated_user"), variables, parse)
        spent.add(reply.call)
        return reply.value

    async def goal_met(self, user: SimulatedUser, turns: Sequence[Trace], spent: _Spent) -> tuple[bool, str]:
        """The judge's verdict (and reason) on whether the user's goal was met by now.

        Raises:
            JudgeError: No strict ``{"goal_met": true|false}`` verdict could be had.
        """

        def parse(text: str) -> tuple[bool, str]:
            value = extract_json(text)
            met = value.get("goal_met") if isinstance(value, dict) else None
            if not isinstance(met, bool):
                raise ValueError('expected {"goal_met": true or false, "reason": "..."}')
            return met, str(value.get("reason", ""))

        variables = {"goal": user.goal, "transcript": _transcript(turns)}
        reply = await self.judge.ask(load_prompt("simulated_user_goal"), variables, parse)
        spent.add(reply.call)
        return reply.value

    async def aclose(self) -> None:
        """Close the model client of the running event loop."""
        await self.judge.aclose()


def build_simulator(config: EvalConfig) -> UserSimulator | None:
    """The simulator of a run whose cases include a ``simulated_user`` (None when none does).

    It uses the ``judge:`` block (without one, ``EVALTRACE_JUDGE_MODEL`` / ``OPENAI_*``, as the judges do), with
    the reply cache off. A variant with a ``workspace`` cannot run such a case (one copy per case, not per turn).

    Raises:
        RunConfigError: A variant has a workspace, a ``${VAR}`` of the block is unset, or ``openai`` is missing.
    """
    simulated = next((i for i, c in enumerate(config.cases) if c.simulated_user is not None), None)
    if simulated is None:
        return None
    for index, variant in enumerate(config.variants):
        if variant.workspace is not None:
            problem = f"a simulated_user case (cases[{simulated}]) cannot run against a system with a workspace"
            raise RunConfigError(config.path, f"{config.variants_key}[{index}].workspace", problem)
    if config.judge is not None:
        return UserSimulator(build_judge(config.judge, config.path, "judge", cache_size=0))
    try:
        return UserSimulator(Judge(cache_size=0))
    except ImportError as exc:
        raise RunConfigError(config.path, "judge", str(exc)) from None


def _transcript(turns: Sequence[Trace]) -> str:
    return render_turns([Turn(index=i, trace=t) for i, t in enumerate(turns)]) if turns else ""


def _turn_input(adapter: Adapter, case: EvalCase, message: str, history: list[dict[str, str]]) -> dict[str, Any]:
    """The case input plus ``message``, and ``history`` unless a Python function takes no such parameter."""
    given: dict[str, Any] = {**case.input, MESSAGE_KEY: message}
    if not isinstance(adapter, FunctionAdapter) or adapter.takes(HISTORY_KEY):
        given[HISTORY_KEY] = [dict(m) for m in history]
    return given


async def run_conversation(
    capture: CaseCapture,
    adapter: Adapter,
    case: EvalCase,
    variant: str,
    run_id: str,
    simulator: UserSimulator,
) -> Trace:
    """Play ``case``'s simulated user against the system; return the case trace holding every turn.

    Never raises for the system's or the simulator's sake: a system failure ends the conversation at that turn
    (its error is the case's), a simulator failure ends it with an error naming the simulator.
    """
    user = case.simulated_user
    assert user is not None  # only simulated cases come here
    session = session_id_of(run_id, case.id, variant)
    turns: list[Trace] = []
    history: list[dict[str, str]] = []
    spent = _Spent()
    stop_reason = "max_turns"
    failure: TraceError | None = None
    goal_reason: str | None = None
    try:
        message = user.first_message or await simulator.next_message(user, turns, spent)
        for index in range(user.max_turns):
            turn = await capture.execute(
                adapter,
                case,
                variant,
                run_id,
                case_input=_turn_input(adapter, case, message, history),
                session_id=session,
            )
            # The stored input is the case input and this turn's message, exactly: not the span's copy, which a
            # long history could push past the attribute cap, and without the history, which the earlier turns
            # already hold (kept, it would grow the case's line with the square of the turns).
            stored = {**case.input, MESSAGE_KEY: message}
            turn = turn.model_copy(
                update={"input": stored, "extra": {**turn.extra, SESSION_KEY: session, TURN_KEY: index}}
            )
            turns.append(turn)
            if turn.error is not None:
                stop_reason = "system_error"
                break
            answer = turn.output.final_answer or ""
            history += [{"role": "user", "content": message}, {"role": "assistant", "content": answer}]
            stop = user.stop_when
            if stop is not None and stop.phrase is not None and stop.phrase.casefold() in answer.casefold():
                stop_reason = "phrase"
                break
            if index + 1 >= user.max_turns:
                break  # no turn can follow: a goal verdict could stop nothing (one judge call saved)
            if stop is not None and stop.goal_met:
                met, goal_reason = await simulator.goal_met(user, turns, spent)
                if met:
                    stop_reason = "goal_met"
                    break
            message = await simulator.next_message(user, turns, spent)
    except JudgeError as exc:
        stop_reason = "simulator_error"
        where = f"after turn {len(turns)}" if turns else "before the first turn"
        failure = TraceError(type=exc.error_type, message=f"simulated user failed {where}: {exc}")
    facts: dict[str, Any] = {
        "turns": len(turns),
        "max_turns": user.max_turns,
        "stop_reason": stop_reason,
        "simulator_calls": spent.calls,
        "simulator_cost_usd": spent.cost_usd,
    }
    if goal_reason is not None:
        facts["goal_reason"] = goal_reason
    return case_trace(case, variant, run_id, session, turns, facts, failure)
