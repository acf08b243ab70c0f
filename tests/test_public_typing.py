"""Users who type-check keep their types: the decorators are typed, not ``Any`` (mypy --strict on user code)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

USER_CODE = textwrap.dedent(
    """
    import evaltrace

    @evaltrace.trace
    def add(a: int, b: int) -> int:
        return a + b

    @evaltrace.tool(name="weather")
    async def weather(city: str) -> dict[str, str]:
        return {"city": city}

    @evaltrace.agent(capture_output=False)
    def plan(goal: str) -> list[str]:
        return [goal]

    reveal_type(add)
    reveal_type(weather)
    reveal_type(plan)
    wrong: str = add(1, 2)
    """
)


def test_decorated_functions_keep_their_signatures_under_mypy_strict(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(USER_CODE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(user),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    # Older mypy versions spell builtins in full (builtins.int): compare the types, not the spelling.
    lines = [line.split(": ", 1)[1].replace("builtins.", "") for line in done.stdout.splitlines()]
    assert lines == [
        'note: Revealed type is "def (a: int, b: int) -> int"',
        'note: Revealed type is "def (city: str) -> typing.Coroutine[Any, Any, dict[str, str]]"',
        'note: Revealed type is "def (goal: str) -> list[str]"',
        'error: Incompatible types in assignment (expression has type "int", variable has type "str")  [assignment]',
    ], done.stdout + done.stderr


EVALUATOR_CODE = textwrap.dedent(
    """
    from evaltrace.evaluation import EvaluatorSpec, evaluator
    from evaltrace.schema import EvalCase, EvaluationResult, Trace
    from evaltrace.schema.conversation import Conversation

    class OnTraces:
        name = "on_traces"
        version: str | None = None

        def evaluate(self, trace: Trace, case: EvalCase | None) -> EvaluationResult:
            return EvaluationResult(evaluator=self.name, passed=True)

    class OnSessions:
        name = "on_sessions"
        version: str | None = None

        def evaluate(self, conversation: Conversation, case: EvalCase | None) -> EvaluationResult:
            return EvaluationResult(evaluator=self.name, passed=len(conversation.turns) > 1)

    @evaluator
    def turns(conversation: Conversation) -> bool:
        return bool(conversation.turns)

    specs = [
        EvaluatorSpec(OnTraces(), scope="trace"),
        EvaluatorSpec(OnSessions(), scope="session"),
        EvaluatorSpec(turns, scope="session"),
    ]
    """
)


def test_trace_and_session_evaluators_both_satisfy_the_evaluator_protocol(tmp_path: Path) -> None:
    user = tmp_path / "evaluators.py"
    user.write_text(EVALUATOR_CODE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "c"), str(user)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
